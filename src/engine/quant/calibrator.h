// Calibrators: the absolute threshold ("amax") of an activation tensor from its histogram of |x|
// (histogram.h). Values beyond amax saturate; INT8 uses the step amax / 127, FP8 e4m3 amax / 448.
//
//   minmax      amax = max |x| seen. No clipping; one outlier stretches the step for everything.
//   percentile  amax = the p-th percentile of |x| (linear inside a bin), e.g. 99.99, which NVIDIA
//               reported as the best fit for BERT post-training quantisation.
//   entropy     the threshold whose 128-level quantisation of the clipped distribution loses the
//               least information: for every candidate cut i >= 128 bins, P = the first i bins with
//               the counts beyond folded into bin i-1, Q = those i bins (without the outliers)
//               merged into 128 groups and spread back over their non-empty bins; both smoothed
//               (empty bins get 1e-4, taken evenly from the others); amax = i · bin width of the i
//               minimising KL(P || Q). This is the entropy calibration TensorRT and MXNet use.
//               Its smallest threshold is 128 bins (1/16 of the histogram range with 2048 bins):
//               with outliers more than 16x beyond the bulk, percentile clips tighter.
//
// All functions are pure and thread-safe.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/quant/histogram.h"

namespace surge::engine::quant {

enum class CalibratorKind { kMinMax, kEntropy, kPercentile };

struct CalibratorOptions {
  CalibratorKind kind = CalibratorKind::kPercentile;
  double percentile = 99.99;  // kPercentile only, in (0, 100]
};

// "minmax", "entropy", "percentile" (with `percentile` for the last); errors list the valid names.
Result<CalibratorOptions> ParseCalibrator(std::string_view name, double percentile = 99.99);
// "minmax", "entropy", "percentile 99.99".
std::string CalibratorName(const CalibratorOptions& options);

// KL(p || q) = sum p_i ln(p_i / q_i) over bins with p_i > 0, both normalised to sum 1 first.
// Infinite when some q_i is 0 where p_i is not.
double KlDivergence(std::span<const double> p, std::span<const double> q);

// The entropy calibrator's divergence for every candidate cut: element j is the cut at
// quantized_bins + j bins (so the last is the whole histogram). Needs bins >= quantized_bins.
std::vector<double> EntropyDivergences(const AbsHistogram& h, int quantized_bins = 128);

float MinMaxThreshold(const AbsHistogram& h);
float PercentileThreshold(const AbsHistogram& h, double percentile);
float EntropyThreshold(const AbsHistogram& h, int quantized_bins = 128);

// The calibrator's amax, never above max |x|. FailedPrecondition when the histogram holds no
// finite value or only zeros (nothing to scale by).
Result<float> Threshold(const AbsHistogram& h, const CalibratorOptions& options);

}  // namespace surge::engine::quant
