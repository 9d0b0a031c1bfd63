#include "engine/quant/histogram.h"

#include <algorithm>
#include <cmath>

namespace surge::engine::quant {

// An even count, so that doubling the range merges whole pairs.
AbsHistogram::AbsHistogram(int bins)
    : counts_(static_cast<size_t>(std::max(bins, 2) + std::max(bins, 2) % 2), 0) {}

Result<AbsHistogram> AbsHistogram::FromParts(double range, std::vector<uint64_t> counts,
                                             float max_abs, uint64_t non_finite) {
  if (counts.size() < 2 || counts.size() > (1u << 20) || counts.size() % 2 != 0) {
    return InvalidArgumentError("histogram with {} bins (valid: an even number, 2 .. {})",
                                counts.size(), 1u << 20);
  }
  if (!(range >= 0) || !std::isfinite(range) || !(max_abs >= 0) || !std::isfinite(max_abs) ||
      max_abs > range * (1 + 1e-6)) {
    return InvalidArgumentError("histogram range {} and max {} are inconsistent", range, max_abs);
  }
  AbsHistogram h(static_cast<int>(counts.size()));
  uint64_t total = 0;
  for (uint64_t c : counts) {
    if (__builtin_add_overflow(total, c, &total)) {
      return InvalidArgumentError("histogram counts overflow");
    }
  }
  if (range == 0 && total != counts[0]) {
    return InvalidArgumentError("histogram without a range has counts beyond its first bin");
  }
  h.counts_ = std::move(counts);
  h.range_ = range;
  h.total_ = total;
  h.max_abs_ = max_abs;
  h.non_finite_ = non_finite;
  return h;
}

void AbsHistogram::Grow(double needed) {
  if (range_ == 0) {
    // Just above the first maximum, so that it falls inside the last bin exactly as it will
    // after the range doubles (bin edges are then multiples of each other).
    range_ = needed * (1 + 1.0 / 65536);
    return;
  }
  const size_t n = counts_.size();
  while (range_ <= needed) {
    for (size_t i = 0; i < n / 2; ++i) counts_[i] = counts_[2 * i] + counts_[2 * i + 1];
    std::fill(counts_.begin() + n / 2, counts_.end(), 0);
    range_ *= 2;
  }
}

void AbsHistogram::Add(std::span<const float> values) {
  float batch_max = 0;
  for (float v : values) {
    if (std::isfinite(v)) batch_max = std::max(batch_max, std::abs(v));
  }
  if (batch_max >= range_ && batch_max > 0) Grow(batch_max);
  max_abs_ = std::max(max_abs_, batch_max);
  const int last = bins() - 1;
  const double inv = range_ > 0 ? bins() / range_ : 0;
  for (float v : values) {
    if (!std::isfinite(v)) {
      ++non_finite_;
      continue;
    }
    const int bin = std::min(last, static_cast<int>(std::abs(v) * inv));
    ++counts_[bin];
    ++total_;
  }
}

}  // namespace surge::engine::quant
