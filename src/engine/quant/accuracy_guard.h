// The accuracy guard: moves the most sensitive quantised layers to higher precisions until the
// quantised engine agrees with the FP32 engine within a user budget, measured on held-out inputs.
//
// A layer falls back along a ladder of precisions, cheapest first and the base precision last:
// on CUDA an FP8 layer goes to INT8 (the same tensor-core rate on Hopper, 7 bits of a
// calibrated range where e4m3 keeps 3 mantissa bits) and then to FP16; every other build goes
// straight to the base (CPU fp32, CUDA fp16). `--guard-fallback` sets the ladder (e.g.
// `bf16,fp32` for a CPU INT8 build on an AVX-512 BF16 machine).
//
//   1. Reference: the FP32 CPU engine's outputs on the held-out batches.
//   2. Every candidate layer quantised: when that engine meets the budget, nothing falls back.
//   3. Otherwise one stage per rung, from the layers at precision F (the build's, then the rung
//      before) to the rung's precision P:
//      a. every one of them at P: when that misses the budget and a later rung exists, all of
//         them move to P and the next stage starts from there; at the last rung it is an error
//         (the budget cannot be met);
//      b. each layer's effect alone (itself at F, the others at P); layers are ranked by how
//         much of the budget they use alone,
//         max((1 - cosine) / (1 - min_cosine), top-1 drop / max_top1_drop)
//         (cosine: the lower confidence bound when the budget sets a confidence);
//      c. the k most sensitive move to P, with the smallest k that meets the budget found by
//         doubling k and then bisecting.
//   Every configuration is a real plan built for the target backend and run on the held-out
//   batches, and the one returned is the one measured.
//
// Candidate plans are built with a profile covering the held-out batches (not the user's), which
// changes tactics, not numerics. Cost per stage: one build and run per layer plus O(log layers);
// one plan in all when the all-quantised engine meets the budget.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/ir/graph.h"
#include "engine/quant/agreement.h"
#include "engine/runtime/backend.h"
#include "engine/runtime/engine.h"

namespace surge::engine::quant {

struct GuardBudget {
  double min_cosine = 0.999;     // engine cosine (agreement.h) must be at least this
  double max_top1_drop = 0.005;  // 1 - top-1 agreement must be at most this (a fraction)
  // 0: the held-out mean row cosine must meet min_cosine. Else a one-sided level in [0.5, 1) (say
  // 0.95): its lower confidence bound must (Agreement::cosine_lower_bound), so that the choice
  // holds, at that level, for rows the guard never saw; a small or uneven held-out slice then
  // keeps more layers out of the quantised precision. Top-1 is budgeted as measured.
  double confidence = 0;

  double Cosine(const Agreement& a) const;  // the cosine this budget compares with min_cosine
  bool Met(const Agreement& a) const;
  std::string ToString() const;  // "cosine >= 0.999, top-1 drop <= 0.50%"
  // a.Summary(), plus the lower bound when `confidence` is set.
  std::string Describe(const Agreement& a) const;
};

struct GuardOptions {
  GuardBudget budget;
  std::vector<std::string> top1_outputs;  // see agreement.h; empty: the default rule
  int num_threads = 0;
  // The precisions a quantised layer falls back through, cheapest first; empty: the backend's
  // (DefaultFallbacks in quantize.h).
  std::vector<Precision> fallbacks;
};

struct LayerEffect {
  std::string layer;
  Agreement alone;  // the engine with this layer at the stage's `from`, the others at its `to`
  double score = 0;
  int rank = 0;  // 1 = most sensitive
};

// One rung of the ladder: the layers at `from` when it began, of which `moved` went to `to`.
struct GuardStage {
  Precision from = Precision::kFp32;
  Precision to = Precision::kFp32;
  int layers = 0;
  Agreement all_moved;               // every one of the stage's layers at `to`
  std::vector<LayerEffect> effects;  // by rank; empty when all of them had to move
  std::vector<std::string> moved;    // most sensitive first (all, in candidate order, if unranked)
  Agreement result;                  // the engine the stage ended with
};

// One assignment of precisions to the candidate layers.
using LayerPrecisions = std::map<std::string, Precision>;

struct GuardResult {
  GuardBudget budget;
  Precision target = Precision::kFp32;
  std::vector<Precision> ladder;
  LayerPrecisions precision;          // every candidate's precision in the returned engine
  std::vector<std::string> fallback;  // the layers not at `target`, in the order they moved
  Agreement all_quantised;
  Agreement final_agreement;
  std::vector<GuardStage> stages;  // empty when every layer could stay quantised
  int plans_evaluated = 0;
  int holdout_batches = 0;

  std::string ToJson() const;
};

// InvalidArgument for an empty ladder, one naming a precision twice or naming `target`.
Status CheckLadder(Precision target, const std::vector<Precision>& ladder);

// The search on its own: `evaluate` measures the engine with the given precision for every
// candidate (the guard builds and runs a plan). InvalidArgument for a malformed ladder
// (CheckLadder) or budget; FailedPrecondition when even every layer at the ladder's last precision
// misses the budget.
using EvaluateFn = std::function<Result<Agreement>(const LayerPrecisions&)>;
Result<GuardResult> SearchFallbacks(const std::vector<std::string>& candidates, Precision target,
                                    const std::vector<Precision>& ladder, const GuardBudget& budget,
                                    const EvaluateFn& evaluate);

// `config` is the build's config with quant.amax filled and quant.layers marking every layer in
// `candidates` at the quantised precision (config.precision); `ladder` the precisions a layer
// falls back through (the base last). FailedPrecondition when even the engine with every
// candidate at the ladder's last precision misses the budget; InvalidArgument when `holdout` is
// empty or the budget or ladder is malformed.
Result<GuardResult> RunAccuracyGuard(const ir::Graph& graph, const BuilderConfig& config,
                                     const std::vector<std::string>& candidates,
                                     const std::vector<Precision>& ladder,
                                     std::span<const TensorMap> holdout,
                                     const GuardOptions& options);

}  // namespace surge::engine::quant
