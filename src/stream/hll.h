// HyperLogLog distinct counter (Flajolet et al. 2007) with the small-range linear-counting
// correction: 2^precision one-byte registers, relative standard error about 1.04 / sqrt(2^p)
// (p = 10: 3.3 %, 1 KiB). Used for unique authors per term and per topic; sketches of the same
// precision merge exactly (register-wise max), so a topic's authors are the union of its terms'.
//
// Add() takes a 64-bit hash that is already well mixed (HashBytes of the author id); it is mixed
// once more so that sequential keys are fine too.
//
// Thread safety: none.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "stream/bytes.h"

namespace surge::stream {

class HyperLogLog {
 public:
  static constexpr int kMinPrecision = 4;
  static constexpr int kMaxPrecision = 16;

  // `precision` must be within [kMinPrecision, kMaxPrecision] (checked).
  explicit HyperLogLog(int precision = 10);

  void Add(uint64_t hash);
  // Estimated number of distinct hashes added.
  double Estimate() const;
  // Register-wise max; `other` must have the same precision (InvalidArgument otherwise).
  Status Merge(const HyperLogLog& other);
  void Clear();
  bool empty() const { return nonzero_ == 0; }

  int precision() const { return precision_; }
  size_t memory_bytes() const { return registers_.size(); }

  void Serialize(ByteWriter* w) const;
  static Result<HyperLogLog> Deserialize(ByteReader* r);

 private:
  int precision_;
  uint32_t nonzero_ = 0;
  std::vector<uint8_t> registers_;
};

}  // namespace surge::stream
