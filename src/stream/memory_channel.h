// MemoryChannel<T>: the in-process Channel (channel.h), a bounded queue per partition holding
// typed values (no serialisation). Create writers and readers from it; the channel ends when every
// writer created so far has closed and the queues are drained, so create the writers before any
// reader starts waiting. Each partition should be read by one reader.
//
// Thread safety: all methods of the channel, its writers and readers are thread-safe.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

#include "stream/channel.h"

namespace surge::stream {

template <typename T>
class MemoryChannel : public std::enable_shared_from_this<MemoryChannel<T>> {
 public:
  // `capacity` is the number of messages each partition holds before Send() blocks (>= 1).
  static std::shared_ptr<MemoryChannel> Create(int32_t partitions, size_t capacity) {
    SURGE_CHECK(partitions >= 1 && capacity >= 1, "channel needs partitions and capacity >= 1");
    return std::shared_ptr<MemoryChannel>(new MemoryChannel(partitions, capacity));
  }

  std::unique_ptr<ChannelWriter<T>> NewWriter() {
    std::lock_guard<std::mutex> lock(mu_);
    ++open_writers_;
    return std::make_unique<Writer>(this->shared_from_this());
  }
  // A reader of `partitions` (all when empty).
  std::unique_ptr<ChannelReader<T>> NewReader(std::vector<int32_t> partitions = {}) {
    if (partitions.empty()) {
      for (int32_t p = 0; p < static_cast<int32_t>(parts_.size()); ++p) partitions.push_back(p);
    }
    for (int32_t p : partitions) {
      SURGE_CHECK(p >= 0 && p < static_cast<int32_t>(parts_.size()), "no partition {}", p);
    }
    return std::make_unique<Reader>(this->shared_from_this(), std::move(partitions));
  }

  int32_t partitions() const { return static_cast<int32_t>(parts_.size()); }
  // Messages queued in `partition` now.
  size_t depth(int32_t partition) const {
    std::lock_guard<std::mutex> lock(mu_);
    return parts_[partition].queue.size();
  }
  // Committed offsets (what readers reported through Commit()).
  Offsets committed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return committed_;
  }

 private:
  struct Part {
    std::deque<Message<T>> queue;
    int64_t next_offset = 0;  // offset of the next message sent
    int64_t read_floor = 0;   // messages below this are skipped (Seek)
  };

  MemoryChannel(int32_t partitions, size_t capacity) : parts_(partitions), capacity_(capacity) {}

  Status Push(int32_t p, uint64_t key, T value) {
    std::unique_lock<std::mutex> lock(mu_);
    if (p < 0 || p >= static_cast<int32_t>(parts_.size())) {
      return InvalidArgumentError("partition {} out of range: the channel has {} partitions", p,
                                  parts_.size());
    }
    Part& part = parts_[p];
    not_full_.wait(lock, [&] { return part.queue.size() < capacity_; });
    Message<T> m;
    m.key = key;
    m.position = {p, part.next_offset++};
    m.value = std::move(value);
    part.queue.push_back(std::move(m));
    not_empty_.notify_all();
    return Status::Ok();
  }

  void CloseWriter() {
    std::lock_guard<std::mutex> lock(mu_);
    --open_writers_;
    not_empty_.notify_all();
  }

  Result<bool> Pop(const std::vector<int32_t>& mine, size_t* cursor, std::vector<Message<T>>* out,
                   size_t max, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    auto any = [&] {
      for (int32_t p : mine) {
        if (!parts_[p].queue.empty()) return true;
      }
      return false;
    };
    not_empty_.wait_for(lock, timeout, [&] { return any() || open_writers_ == 0; });
    size_t taken = 0;
    // Round-robin over the reader's partitions so that none starves.
    for (size_t round = 0; taken < max && round < mine.size(); ++round) {
      Part& part = parts_[mine[(*cursor + round) % mine.size()]];
      while (taken < max && !part.queue.empty()) {
        Message<T> m = std::move(part.queue.front());
        part.queue.pop_front();
        if (m.position.offset < part.read_floor) continue;
        out->push_back(std::move(m));
        ++taken;
      }
    }
    *cursor = (*cursor + 1) % std::max<size_t>(1, mine.size());
    if (taken) not_full_.notify_all();
    return !(open_writers_ == 0 && !any() && taken == 0);
  }

  Status SeekParts(const Offsets& offsets) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [p, o] : offsets.next) {
      if (p < 0 || p >= static_cast<int32_t>(parts_.size())) {
        return InvalidArgumentError("seek to partition {}: the channel has {}", p, parts_.size());
      }
      Part& part = parts_[p];
      int64_t first_queued =
          part.queue.empty() ? part.next_offset : part.queue.front().position.offset;
      if (o < first_queued) {
        return FailedPreconditionError(
            "cannot seek partition {} back to offset {}: an in-process channel keeps only what is "
            "queued (from offset {})",
            p, o, first_queued);
      }
      part.read_floor = std::max(part.read_floor, o);
    }
    return Status::Ok();
  }

  void RecordCommit(const Offsets& offsets) {
    std::lock_guard<std::mutex> lock(mu_);
    committed_.Merge(offsets);
  }

  class Writer final : public ChannelWriter<T> {
   public:
    explicit Writer(std::shared_ptr<MemoryChannel> ch) : ch_(std::move(ch)) {}
    ~Writer() override { Close(); }
    int32_t partitions() const override { return ch_->partitions(); }
    Status Send(uint64_t key, T value) override {
      if (closed_) return FailedPreconditionError("send on a closed channel writer");
      return ch_->Push(PartitionOf(key, ch_->partitions()), key, std::move(value));
    }
    Status SendTo(int32_t partition, uint64_t key, T value) override {
      if (closed_) return FailedPreconditionError("send on a closed channel writer");
      return ch_->Push(partition, key, std::move(value));
    }
    Status Flush() override { return Status::Ok(); }
    void Close() override {
      if (closed_) return;
      closed_ = true;
      ch_->CloseWriter();
    }

   private:
    std::shared_ptr<MemoryChannel> ch_;
    bool closed_ = false;
  };

  class Reader final : public ChannelReader<T> {
   public:
    Reader(std::shared_ptr<MemoryChannel> ch, std::vector<int32_t> parts)
        : ch_(std::move(ch)), parts_(std::move(parts)) {}
    Result<bool> Receive(std::vector<Message<T>>* out, size_t max,
                         std::chrono::milliseconds timeout) override {
      return ch_->Pop(parts_, &cursor_, out, max, timeout);
    }
    std::vector<int32_t> partitions() const override { return parts_; }
    Status Commit(const Offsets& offsets) override {
      ch_->RecordCommit(offsets);
      return Status::Ok();
    }
    Status Seek(const Offsets& offsets) override { return ch_->SeekParts(offsets); }

   private:
    std::shared_ptr<MemoryChannel> ch_;
    std::vector<int32_t> parts_;
    size_t cursor_ = 0;
  };

  mutable std::mutex mu_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::vector<Part> parts_;
  size_t capacity_;
  int open_writers_ = 0;
  Offsets committed_;
};

}  // namespace surge::stream
