// Post-id dedup window: remembers the keys (hashed post ids) of recent posts so that a post
// delivered twice (a replayed Kafka range after a restart, a duplicated line) counts once.
//
// Two generations of keys: a key is remembered while its generation or the next one is current.
// A generation ends when it spans window_ms of event time (from its first key's timestamp to the
// newest one) or holds max_entries / 2 keys; the one before it is then forgotten. So a key is
// recognised for at least window_ms of event time after it was seen (unless more than
// max_entries / 2 keys arrive meanwhile) and at most about twice that. A replay older than that
// is not recognised: size the window to cover the longest replay (the span between checkpoints).
//
// Thread safety: none; one per detect shard.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "stream/bytes.h"
#include "stream/flat_map.h"

namespace surge::stream {

class DedupWindow {
 public:
  DedupWindow(int64_t window_ms, size_t max_entries);

  // True when `key` is new (and remembers it); false when it is remembered.
  bool Insert(uint64_t key, int64_t ts_ms);
  bool Contains(uint64_t key) const { return cur_.Find(key) || prev_.Find(key); }

  size_t size() const { return cur_.size() + prev_.size(); }
  int64_t window_ms() const { return window_ms_; }
  size_t max_entries() const { return max_entries_; }
  // Generations ended because they were full rather than old.
  int64_t evicted_early() const { return evicted_early_; }
  size_t memory_bytes() const { return cur_.memory_bytes() + prev_.memory_bytes(); }

  void Serialize(ByteWriter* w) const;
  Status Deserialize(ByteReader* r);

 private:
  void Rotate();

  int64_t window_ms_;
  size_t max_entries_;
  FlatMap64<char> cur_, prev_;
  int64_t cur_start_ms_ = INT64_MIN;  // timestamp of the current generation's first key
  int64_t evicted_early_ = 0;
};

}  // namespace surge::stream
