// A small count-min sketch of 16-bit saturating counters, for per-key rates that only need to be
// roughly right (posts per author in a bucket, reposts per source): rows x 2^bits counters, the
// estimate is the minimum over rows (never an underestimate). Halve() ages every counter.
//
// Thread safety: none.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "stream/bytes.h"

namespace surge::stream {

class CountSketch {
 public:
  CountSketch(int bits, int rows);

  // Adds one to the key's counters and returns the new estimate.
  uint32_t Increment(uint64_t key);
  uint32_t Estimate(uint64_t key) const;
  void Clear();
  void Halve();
  size_t memory_bytes() const { return cells_.size() * sizeof(uint16_t); }

  void Serialize(ByteWriter* w) const;
  Status Deserialize(ByteReader* r);

 private:
  size_t Index(uint64_t key, int row) const;
  int bits_, rows_;
  std::vector<uint16_t> cells_;
};

}  // namespace surge::stream
