// Near-duplicate detection over a sliding window of recent posts: a post whose SimHash lies within
// max_distance bits of a recent original is a copy of it; the index counts the copies per original.
// Pigeonhole lookup as text::SimHashIndex (the 64 bits cut into max_distance + 1 blocks, any
// fingerprint within max_distance bits agrees exactly on one block), laid out for a stream: entries
// live in a ring (FIFO of the last `capacity` originals, none older than `window_ms`); each block
// has a fixed table of 2^kBucketBits buckets of kWays slots (fingerprint + ring sequence number),
// one contiguous array, so a lookup touches one bucket (two cache lines) per block and never
// allocates. A new entry takes its bucket's expired or oldest slot, so an original can be
// forgotten early where many posts look alike. Memory: blocks * 2^kBucketBits * kWays * 16 bytes
// (8 MiB for distance 3) plus the ring.
// Copies are not inserted (the original stands for its copies), so a flood of copies does not grow
// the buckets.
//
// Thread safety: none; one per detect shard.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "stream/bytes.h"

namespace surge::stream {

class NearDupIndex {
 public:
  // max_distance 0..3, capacity >= 1, window_ms > 0 (checked).
  NearDupIndex(int max_distance, size_t capacity, int64_t window_ms);

  // Looks `fp` up among the recent originals. A copy: returns how many copies of that original
  // have been seen (>= 1, this one included). An original: inserts it and returns 0.
  uint32_t Observe(uint64_t fp, int64_t ts_ms);

  size_t size() const { return static_cast<size_t>(next_ - head_); }
  size_t memory_bytes() const;

  void Serialize(ByteWriter* w) const;
  Status Deserialize(ByteReader* r);

 private:
  struct Entry {
    uint64_t fp = 0;
    int64_t ts_ms = 0;
    uint32_t copies = 0;
  };
  static constexpr int kBucketBits = 14;
  static constexpr size_t kWays = 8;
  // The first slot of the block's bucket for `fp`.
  size_t Bucket(uint64_t fp, int block) const;
  void Insert(uint64_t fp, int64_t ts_ms, uint32_t copies);
  void Expire(int64_t now_ms);

  int blocks_;
  int shift_[4];
  uint64_t mask_[4];
  size_t capacity_;
  int64_t window_ms_;
  std::vector<Entry> ring_;
  uint64_t head_ = 0;  // sequence number of the oldest live entry
  uint64_t next_ = 0;  // sequence number of the next entry
  struct Slot {
    uint64_t fp = 0;
    uint64_t seq = UINT64_MAX;  // ring sequence number; UINT64_MAX: empty
  };
  std::vector<Slot> slots_;  // blocks_ * 2^kBucketBits buckets of kWays slots
};

// SimHash of features given as 64-bit hashes (each weighs 1): bit i is set when more features
// have it set than clear.
uint64_t SimHashOfHashes(const uint64_t* hashes, size_t n);

}  // namespace surge::stream
