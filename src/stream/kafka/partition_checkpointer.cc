#include "stream/kafka/partition_checkpointer.h"

#include "core/logging.h"

namespace surge::stream::kafka {

PartitionCheckpointer::PartitionCheckpointer(CheckpointStore* store, Options options,
                                             PartitionStateHooks hooks)
    : store_(store), options_(std::move(options)), hooks_(std::move(hooks)) {
  SURGE_CHECK(store_ != nullptr, "PartitionCheckpointer needs a store");
  SURGE_CHECK(hooks_.restore && hooks_.snapshot && hooks_.drop,
              "PartitionCheckpointer needs restore, snapshot and drop hooks");
}

RebalanceHandler PartitionCheckpointer::Handler() {
  return [this](RebalanceEvent& event) { return OnRebalance(event); };
}

std::string PartitionCheckpointer::CheckpointName(const TopicPartition& tp) const {
  return fmt::format("{}.{}.{}", options_.stage, tp.topic, tp.partition);
}

void PartitionCheckpointer::MarkApplied(const std::string& topic, int32_t partition,
                                        int64_t offset) {
  MarkPosition({topic, partition, offset + 1});
}

void PartitionCheckpointer::MarkPosition(const TopicPartitionOffset& next) {
  auto [it, fresh] = positions_.try_emplace({next.topic, next.partition}, next.offset);
  if (!fresh) it->second = std::max(it->second, next.offset);
}

Status PartitionCheckpointer::OnRebalance(RebalanceEvent& event) {
  std::vector<TopicPartition> partitions;
  for (const auto& p : event.partitions) partitions.push_back({p.topic, p.partition});
  switch (event.kind) {
    case RebalanceKind::kAssigned: {
      Status first_error;
      std::vector<TopicPartitionOffset*> unknown;
      for (auto& p : event.partitions) {
        TopicPartition tp{p.topic, p.partition};
        std::string name = CheckpointName(tp);
        Result<std::optional<CheckpointStore::Loaded>> loaded = store_->LoadLatest(name);
        if (!loaded.ok()) {
          // Reading on without the state would double-count or lose; the stage must stop.
          if (first_error.ok()) {
            first_error =
                loaded.status().WithContext(fmt::format("restoring {} for {}", name, ToString(tp)));
          }
          continue;
        }
        const Checkpoint* ckpt = loaded->has_value() ? &(*loaded)->checkpoint : nullptr;
        if (ckpt != nullptr && ckpt->state_version != options_.state_version) {
          if (first_error.ok()) {
            first_error = FailedPreconditionError(
                "checkpoint {} has state version {}, stage '{}' reads version {}", (*loaded)->path,
                ckpt->state_version, options_.stage, options_.state_version);
          }
          continue;
        }
        Status restored = hooks_.restore(tp, ckpt);
        if (!restored.ok()) {
          if (first_error.ok()) {
            first_error = restored.WithContext(fmt::format("restoring {}", ToString(tp)));
          }
          continue;
        }
        const CheckpointOffset* off = ckpt ? ckpt->FindOffset(tp.topic, tp.partition) : nullptr;
        if (off != nullptr) {
          p.offset = off->next_offset;
          positions_[tp] = off->next_offset;
          checkpointed_[tp] = off->next_offset;
          ++counters_.restored;
          SURGE_LOG_INFO("stage {}: {} resumes at offset {} from checkpoint {}", options_.stage,
                         ToString(tp), off->next_offset, (*loaded)->path);
        } else {
          unknown.push_back(&p);
        }
      }
      // No checkpoint: empty state from the committed offset, else from the beginning. The start
      // is recorded so the next checkpoint covers this partition too, even before its first
      // record — from then on its checkpoint, not a later commit, says where it resumes.
      if (!unknown.empty()) {
        std::vector<TopicPartition> tps;
        for (const auto* p : unknown) tps.push_back({p->topic, p->partition});
        Result<std::vector<TopicPartitionOffset>> committed =
            consumer_ != nullptr
                ? consumer_->Committed(tps, options_.committed_timeout_ms)
                : Result<std::vector<TopicPartitionOffset>>(std::vector<TopicPartitionOffset>());
        if (!committed.ok()) {
          return committed.status().WithContext(
              fmt::format("stage {}: reading committed offsets of partitions without a checkpoint",
                          options_.stage));
        }
        for (auto* p : unknown) {
          p->offset = kOffsetBeginning;
          for (const auto& c : *committed) {
            if (c.topic == p->topic && c.partition == p->partition && c.offset >= 0) {
              p->offset = c.offset;
            }
          }
          positions_[{p->topic, p->partition}] = p->offset;
          SURGE_LOG_INFO("stage {}: {} has no checkpoint; empty state from {}", options_.stage,
                         ToString(TopicPartition{p->topic, p->partition}),
                         p->offset >= 0 ? fmt::format("committed offset {}", p->offset)
                                        : std::string("the beginning"));
        }
      }
      return first_error;
    }
    case RebalanceKind::kRevoked: {
      Status s = CheckpointPartitions(partitions);
      for (const auto& tp : partitions) {
        hooks_.drop(tp);
        positions_.erase(tp);
        checkpointed_.erase(tp);
      }
      return s;
    }
    case RebalanceKind::kLost:
      for (const auto& tp : partitions) {
        SURGE_LOG_WARN("stage {}: {} was lost (session expired); dropping its uncheckpointed state",
                       options_.stage, ToString(tp));
        hooks_.drop(tp);
        positions_.erase(tp);
        checkpointed_.erase(tp);
      }
      return Status::Ok();
  }
  return Status::Ok();
}

Status PartitionCheckpointer::CheckpointAll() {
  std::vector<TopicPartition> all;
  for (const auto& [tp, pos] : positions_) all.push_back(tp);
  return CheckpointPartitions(all);
}

Status PartitionCheckpointer::CheckpointPartitions(const std::vector<TopicPartition>& partitions) {
  std::vector<TopicPartition> dirty;
  for (const auto& tp : partitions) {
    auto pos = positions_.find(tp);
    if (pos == positions_.end()) continue;  // nothing applied yet
    auto done = checkpointed_.find(tp);
    if (done == checkpointed_.end() || done->second != pos->second) dirty.push_back(tp);
  }
  if (dirty.empty()) return Status::Ok();
  if (hooks_.flush_outputs) {
    SURGE_RETURN_IF_ERROR(hooks_.flush_outputs().WithContext(
        fmt::format("stage {}: flushing outputs before a checkpoint", options_.stage)));
  }
  std::vector<TopicPartitionOffset> commit;
  for (const auto& tp : dirty) {
    int64_t next = positions_[tp];
    SURGE_ASSIGN_OR_RETURN(std::vector<CheckpointBlob> blobs, hooks_.snapshot(tp));
    Checkpoint c;
    c.name = CheckpointName(tp);
    c.stage = options_.stage;
    c.worker_id = options_.worker_id;
    c.state_version = options_.state_version;
    c.offsets = {{tp.topic, tp.partition, next}};
    c.blobs = std::move(blobs);
    SURGE_ASSIGN_OR_RETURN(uint64_t seq, store_->Write(std::move(c)));
    (void)seq;
    ++counters_.checkpoints;
    checkpointed_[tp] = next;
    if (next >= 0) commit.push_back({tp.topic, tp.partition, next});  // not kOffsetBeginning
  }
  if (consumer_ == nullptr) return Status::Ok();
  Status s = consumer_->Commit(commit, options_.committed_timeout_ms);
  if (!s.ok()) {
    ++counters_.commit_failures;
    SURGE_LOG_WARN(
        "stage {}: commit after checkpoint failed ({}); the checkpoint holds the offsets "
        "and wins on restore",
        options_.stage, s.message());
    last_commit_error_ = std::move(s);
  }
  return Status::Ok();
}

}  // namespace surge::stream::kafka
