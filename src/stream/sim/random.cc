#include "stream/sim/random.h"

#include "core/status.h"

namespace surge::stream::sim {

AliasTable::AliasTable(const std::vector<double>& weights) {
  const size_t n = weights.size();
  SURGE_CHECK(n > 0 && n < (1ull << 32), "alias table needs 1..2^32-1 weights, got {}", n);
  double sum = 0;
  for (double w : weights) {
    SURGE_CHECK(w >= 0 && std::isfinite(w), "alias table weight {} is not a finite non-negative",
                w);
    sum += w;
  }
  SURGE_CHECK(sum > 0, "alias table weights sum to 0");
  prob_.assign(n, 0);
  alias_.assign(n, 0);
  std::vector<double> scaled(n);
  std::vector<uint32_t> small, large;
  for (size_t i = 0; i < n; ++i) {
    scaled[i] = weights[i] * static_cast<double>(n) / sum;
    (scaled[i] < 1 ? small : large).push_back(static_cast<uint32_t>(i));
  }
  while (!small.empty() && !large.empty()) {
    const uint32_t s = small.back();
    small.pop_back();
    const uint32_t l = large.back();
    prob_[s] = scaled[s];
    alias_[s] = l;
    scaled[l] = (scaled[l] + scaled[s]) - 1;
    if (scaled[l] < 1) {
      large.pop_back();
      small.push_back(l);
    }
  }
  for (uint32_t i : large) prob_[i] = 1, alias_[i] = i;
  for (uint32_t i : small) prob_[i] = 1, alias_[i] = i;
}

std::vector<double> ZipfWeights(size_t n, double exponent, double offset) {
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = 1.0 / std::pow(static_cast<double>(i) + offset, exponent);
  return w;
}

}  // namespace surge::stream::sim
