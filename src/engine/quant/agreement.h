// Agreement of a quantised engine's outputs with the FP32 engine's, the measure the accuracy guard
// budgets and `surge compare` reports.
//
// Each output [..., C] is read as rows of C values (one row per sequence for [B, C], per token for
// [B, S, C]; token rows that are padding, mask 0, are left out). Per row: cosine similarity of the
// two vectors (1 when both are zero) and, for top-1 outputs, whether the argmax agrees. An
// engine's cosine is the lowest per-output mean row cosine; its top-1 agreement is pooled over the
// rows of all top-1 outputs. The spread of the row cosines gives the mean's standard error, from
// which a one-sided lower confidence bound on the cosine of rows not measured (Student's t with
// rows - 1 degrees of freedom). Without labels, top-1 disagreement with FP32 bounds the change in
// accuracy from above: a flipped prediction can at worst turn a right answer wrong.
//
// Top-1 outputs: the names given, else every output whose name contains "logit", else every
// output with C >= 2.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/runtime/engine.h"

namespace surge::engine::quant {

struct OutputAgreement {
  std::string name;
  bool top1 = false;  // counted for top-1
  int64_t rows = 0;
  double cosine_sum = 0;
  double cosine_min = 1;
  double loss_sq_sum = 0;  // sum over rows of (1 - cosine)^2, for the spread
  int64_t top1_agree = 0;
  double max_abs_err = 0;

  double mean_cosine() const { return rows ? cosine_sum / static_cast<double>(rows) : 1.0; }
  // The standard error of mean_cosine (sample spread / sqrt(rows)); 0 with fewer than 2 rows.
  double mean_cosine_stderr() const;
  double top1_agreement() const {
    return rows ? static_cast<double>(top1_agree) / static_cast<double>(rows) : 1.0;
  }
};

struct Agreement {
  std::vector<OutputAgreement> outputs;

  double cosine() const;  // min over outputs of the mean row cosine
  // Min over outputs of the one-sided lower confidence bound on the mean row cosine at
  // `confidence` (in [0.5, 1); 0.5 gives cosine()). Needs 2 or more rows per output (with fewer,
  // the mean itself).
  double cosine_lower_bound(double confidence) const;
  double cosine_stderr() const;   // mean_cosine_stderr of the output that gives cosine()
  int64_t min_rows() const;       // the fewest rows of any output (0 without outputs)
  double top1_agreement() const;  // pooled over top-1 outputs (1 when there are none)
  int64_t top1_rows() const;
  std::string Summary() const;  // "cosine 0.99971, top-1 99.2% (248/250)"
};

class AgreementMeter {
 public:
  explicit AgreementMeter(std::vector<std::string> top1_outputs = {})
      : top1_names_(std::move(top1_outputs)) {}

  // Adds one batch: `inputs` (for the mask), the reference outputs and the candidate's. Every
  // reference output must be present in `candidate` with the same shape.
  Status Add(const TensorMap& inputs, const TensorMap& reference, const TensorMap& candidate);
  const Agreement& result() const { return result_; }

 private:
  bool IsTop1(const std::string& name, const Tensor& t, const TensorMap& all) const;
  std::vector<std::string> top1_names_;
  Agreement result_;
};

// Runs `reference` and `candidate` on every batch and measures the candidate's agreement.
// Errors name the batch that failed to run.
// The one-sided quantile of Student's t with `dof` degrees of freedom at `confidence` in
// [0.5, 1): exact for 1 and 2 degrees of freedom, else the normal quantile refined by its
// Cornish-Fisher expansion in 1 / dof (within 0.4 % of the exact value at 3 degrees of freedom and
// 0.99, closer above); the normal quantile for dof <= 0.
double StudentTQuantile(double confidence, int64_t dof);

Result<Agreement> MeasureAgreement(const Engine& reference, const Engine& candidate,
                                   std::span<const TensorMap> batches,
                                   std::vector<std::string> top1_outputs = {});

}  // namespace surge::engine::quant
