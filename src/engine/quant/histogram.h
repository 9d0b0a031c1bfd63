// Histogram of absolute activation values, the input of every calibrator (calibrator.h).
//
// `bins` equal bins cover [0, range). The range starts at the first non-zero |x| seen and doubles
// (adjacent bins merged in pairs, which is exact) whenever a larger |x| arrives, so one pass over
// the calibration data suffices and no count is ever estimated. The exact maximum, the count and
// the number of non-finite values are kept beside the bins. Not thread-safe; one per tensor.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace surge::engine::quant {

class AbsHistogram {
 public:
  static constexpr int kDefaultBins = 2048;

  explicit AbsHistogram(int bins = kDefaultBins);
  // Rebuilds a histogram from its parts (calibration cache); checks they are consistent.
  static Result<AbsHistogram> FromParts(double range, std::vector<uint64_t> counts, float max_abs,
                                        uint64_t non_finite);

  // Adds |v| of every finite value; NaN and infinities are only counted (non_finite()).
  void Add(std::span<const float> values);

  int bins() const { return static_cast<int>(counts_.size()); }
  double range() const { return range_; }  // 0 until a non-zero value arrives
  double bin_width() const { return range_ / static_cast<double>(counts_.size()); }
  const std::vector<uint64_t>& counts() const { return counts_; }
  uint64_t total() const { return total_; }  // finite values added
  float max_abs() const { return max_abs_; }
  uint64_t non_finite() const { return non_finite_; }

 private:
  void Grow(double needed);

  std::vector<uint64_t> counts_;
  double range_ = 0;
  uint64_t total_ = 0;
  float max_abs_ = 0;
  uint64_t non_finite_ = 0;
};

}  // namespace surge::engine::quant
