// The accuracy guard: keeps the most sensitive quantised layers in the base precision until the
// quantised engine agrees with the FP32 engine within a user budget, measured on held-out inputs.
//
//   1. Reference: the FP32 CPU engine's outputs on the held-out batches.
//   2. Every candidate layer quantised: when that engine meets the budget, nothing falls back.
//   3. Otherwise each candidate's effect is measured alone (a plan with only that layer
//      quantised); layers are ranked by how much of the budget they use alone,
//      max((1 - cosine) / (1 - min_cosine), top-1 drop / max_top1_drop).
//   4. The k most sensitive layers fall back, with the smallest k that meets the budget found by
//      doubling k and then bisecting; every configuration is a real plan built for the target
//      backend and run on the held-out batches, and the one returned is the one measured.
//
// Candidate plans are built with a profile covering the held-out batches (not the user's), which
// changes tactics, not numerics. Costs one build and run per candidate layer plus O(log layers)
// when the all-quantised engine misses the budget, two runs otherwise.
#pragma once

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

  bool Met(const Agreement& a) const;
  std::string ToString() const;  // "cosine >= 0.999, top-1 drop <= 0.50%"
};

struct GuardOptions {
  GuardBudget budget;
  std::vector<std::string> top1_outputs;  // see agreement.h; empty: the default rule
  int num_threads = 0;
};

struct LayerEffect {
  std::string layer;
  Agreement alone;  // the engine with only this layer quantised
  double score = 0;
  int rank = 0;  // 1 = most sensitive
};

struct GuardResult {
  GuardBudget budget;
  std::vector<std::string> fallback;  // layers kept in the base precision, most sensitive first
  Agreement all_quantised;
  Agreement final_agreement;
  std::vector<LayerEffect> effects;  // by rank; empty when every layer could stay quantised
  int plans_evaluated = 0;
  int holdout_batches = 0;

  std::string ToJson() const;
};

// `config` is the build's config with quant.amax filled and quant.layers marking every layer in
// `candidates` at the quantised precision; `fallback` is the precision a layer falls back to.
// FailedPrecondition when even the engine with every candidate in the base precision misses the
// budget; InvalidArgument when `holdout` is empty.
Result<GuardResult> RunAccuracyGuard(const ir::Graph& graph, const BuilderConfig& config,
                                     const std::vector<std::string>& candidates, Precision fallback,
                                     std::span<const TensorMap> holdout,
                                     const GuardOptions& options);

}  // namespace surge::engine::quant
