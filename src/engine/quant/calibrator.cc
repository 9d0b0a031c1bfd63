#include "engine/quant/calibrator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace surge::engine::quant {
namespace {

constexpr double kSmoothEps = 1e-4;

// Empty bins get eps, taken evenly from the non-empty ones; false when every bin is empty or a
// non-empty bin would not stay positive.
bool Smooth(std::vector<double>& d) {
  size_t zeros = 0;
  for (double v : d) zeros += v == 0;
  const size_t nonzeros = d.size() - zeros;
  if (nonzeros == 0) return false;
  const double take = kSmoothEps * static_cast<double>(zeros) / static_cast<double>(nonzeros);
  for (double& v : d) {
    if (v == 0) {
      v = kSmoothEps;
    } else {
      v -= take;
      if (v <= 0) return false;
    }
  }
  return true;
}

}  // namespace

Result<CalibratorOptions> ParseCalibrator(std::string_view name, double percentile) {
  CalibratorOptions o;
  if (name == "minmax") {
    o.kind = CalibratorKind::kMinMax;
  } else if (name == "entropy") {
    o.kind = CalibratorKind::kEntropy;
  } else if (name == "percentile") {
    o.kind = CalibratorKind::kPercentile;
    if (!(percentile > 0 && percentile <= 100)) {
      return InvalidArgumentError("percentile {} must lie in (0, 100], e.g. 99.99", percentile);
    }
    o.percentile = percentile;
  } else {
    return InvalidArgumentError("unknown calibrator '{}' (valid: entropy, percentile, minmax)",
                                name);
  }
  return o;
}

std::string CalibratorName(const CalibratorOptions& o) {
  switch (o.kind) {
    case CalibratorKind::kMinMax:
      return "minmax";
    case CalibratorKind::kEntropy:
      return "entropy";
    case CalibratorKind::kPercentile:
      break;
  }
  return fmt::format("percentile {}", o.percentile);
}

double KlDivergence(std::span<const double> p, std::span<const double> q) {
  double sp = 0, sq = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    sp += p[i];
    sq += q[i];
  }
  if (sp <= 0 || sq <= 0) return std::numeric_limits<double>::infinity();
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    if (q[i] <= 0) return std::numeric_limits<double>::infinity();
    const double pi = p[i] / sp, qi = q[i] / sq;
    kl += pi * std::log(pi / qi);
  }
  return kl;
}

std::vector<double> EntropyDivergences(const AbsHistogram& h, int quantized_bins) {
  const auto& hist = h.counts();
  const int n = h.bins();
  std::vector<double> out;
  if (quantized_bins < 1 || n < quantized_bins) return out;
  // outliers[i]: counts in bins [i, n).
  std::vector<double> outliers(n + 1, 0.0);
  for (int i = n - 1; i >= 0; --i) outliers[i] = outliers[i + 1] + static_cast<double>(hist[i]);
  std::vector<double> p, q;
  for (int cut = quantized_bins; cut <= n; ++cut) {
    p.assign(hist.begin(), hist.begin() + cut);
    p[cut - 1] += outliers[cut];
    q.assign(cut, 0.0);
    // Group j covers [j*merged, (j+1)*merged); the last group also takes the remainder.
    const int merged = cut / quantized_bins;
    for (int j = 0; j < quantized_bins; ++j) {
      const int begin = j * merged;
      const int end = j == quantized_bins - 1 ? cut : begin + merged;
      double sum = 0;
      int nonempty = 0;
      for (int b = begin; b < end; ++b) {
        sum += static_cast<double>(hist[b]);
        nonempty += hist[b] != 0;
      }
      if (nonempty == 0) continue;
      for (int b = begin; b < end; ++b) {
        if (hist[b] != 0) q[b] = sum / nonempty;
      }
    }
    for (int b = 0; b < cut; ++b) {
      if (p[b] == 0) q[b] = 0;
    }
    if (!Smooth(p) || !Smooth(q)) {
      out.push_back(std::numeric_limits<double>::infinity());
      continue;
    }
    out.push_back(KlDivergence(p, q));
  }
  return out;
}

float MinMaxThreshold(const AbsHistogram& h) { return h.max_abs(); }

float PercentileThreshold(const AbsHistogram& h, double percentile) {
  if (h.total() == 0) return 0.f;
  const double target = std::clamp(percentile, 0.0, 100.0) / 100.0 * static_cast<double>(h.total());
  const auto& c = h.counts();
  double cum = 0;
  for (int i = 0; i < h.bins(); ++i) {
    const double next = cum + static_cast<double>(c[i]);
    if (next >= target && c[i] > 0) {
      const double frac = (target - cum) / static_cast<double>(c[i]);
      const double t = (i + std::clamp(frac, 0.0, 1.0)) * h.bin_width();
      return std::min(static_cast<float>(t), h.max_abs());
    }
    cum = next;
  }
  return h.max_abs();
}

float EntropyThreshold(const AbsHistogram& h, int quantized_bins) {
  const std::vector<double> d = EntropyDivergences(h, quantized_bins);
  if (d.empty()) return h.max_abs();
  const size_t best = std::min_element(d.begin(), d.end()) - d.begin();
  if (!std::isfinite(d[best])) return h.max_abs();
  const double t = static_cast<double>(quantized_bins + best) * h.bin_width();
  return std::min(static_cast<float>(t), h.max_abs());
}

Result<float> Threshold(const AbsHistogram& h, const CalibratorOptions& o) {
  if (h.total() == 0) {
    return FailedPreconditionError("no finite values were seen ({} non-finite)", h.non_finite());
  }
  if (!(h.max_abs() > 0)) return FailedPreconditionError("every value seen was zero");
  float t = 0;
  switch (o.kind) {
    case CalibratorKind::kMinMax:
      t = MinMaxThreshold(h);
      break;
    case CalibratorKind::kEntropy:
      t = EntropyThreshold(h);
      break;
    case CalibratorKind::kPercentile:
      t = PercentileThreshold(h, o.percentile);
      break;
  }
  // A threshold inside the first bin (almost every value zero) keeps at least that bin's width.
  return std::max(t, static_cast<float>(std::min<double>(h.bin_width(), h.max_abs())));
}

}  // namespace surge::engine::quant
