// Post-id dedup window: remembers the keys (hashed post ids) seen during the last `window_ms` of
// event time, at most `max_entries` of them, so that a post delivered twice (a replayed Kafka
// range after a restart, a duplicated line) counts once. Keys leave in arrival order when they
// are older than the window relative to the newest timestamp seen, or when the window is full
// (oldest first); a replay older than the window is not recognised, so size the window to cover
// the longest replay (the span between checkpoints).
//
// Thread safety: none; one per detect shard.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_set>

#include "core/status.h"
#include "stream/bytes.h"

namespace surge::stream {

class DedupWindow {
 public:
  DedupWindow(int64_t window_ms, size_t max_entries);

  // True when `key` is new (and remembers it); false when it was seen inside the window.
  bool Insert(uint64_t key, int64_t ts_ms);
  bool Contains(uint64_t key) const { return keys_.count(key) != 0; }

  size_t size() const { return keys_.size(); }
  int64_t window_ms() const { return window_ms_; }
  size_t max_entries() const { return max_entries_; }
  int64_t evicted_early() const { return evicted_early_; }  // left because the window was full

  void Serialize(ByteWriter* w) const;
  Status Deserialize(ByteReader* r);

 private:
  void Expire();

  struct Entry {
    uint64_t key;
    int64_t ts_ms;
  };
  int64_t window_ms_;
  size_t max_entries_;
  int64_t newest_ms_ = INT64_MIN;
  int64_t evicted_early_ = 0;
  std::deque<Entry> order_;
  std::unordered_set<uint64_t> keys_;
};

}  // namespace surge::stream
