#include "engine/quant/accuracy_guard.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/logging.h"
#include "engine/builder/builder.h"
#include "engine/quant/calibrate.h"

namespace surge::engine::quant {
namespace {

using Json = nlohmann::json;

Json AgreementJson(const Agreement& a) {
  Json outs = Json::array();
  for (const auto& o : a.outputs) {
    outs.push_back({{"name", o.name},
                    {"rows", o.rows},
                    {"mean_cosine", o.mean_cosine()},
                    {"min_cosine", o.cosine_min},
                    {"top1", o.top1},
                    {"top1_agreement", o.top1_agreement()},
                    {"max_abs_err", o.max_abs_err}});
  }
  return {{"cosine", a.cosine()},
          {"top1_agreement", a.top1_agreement()},
          {"top1_rows", a.top1_rows()},
          {"outputs", outs}};
}

Result<std::shared_ptr<const Engine>> BuildEngine(const ir::Graph& graph,
                                                  const BuilderConfig& config) {
  SURGE_ASSIGN_OR_RETURN(std::string bytes, builder::BuildPlanFromGraph(graph, config));
  return Engine::LoadFromMemory({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
}

Result<std::vector<TensorMap>> RunAll(const Engine& engine, std::span<const TensorMap> batches) {
  SURGE_ASSIGN_OR_RETURN(auto ctx, engine.CreateContext());
  std::vector<TensorMap> out;
  for (size_t i = 0; i < batches.size(); ++i) {
    auto r = ctx->Run(batches[i]);
    if (!r.ok()) return r.status().WithContext(fmt::format("held-out batch {}", i + 1));
    TensorMap owned;
    for (auto& [name, t] : *r) owned.emplace(name, t.Clone());
    out.push_back(std::move(owned));
  }
  return out;
}

class Evaluator {
 public:
  Evaluator(const ir::Graph& graph, BuilderConfig config, Precision fallback,
            std::span<const TensorMap> holdout, const GuardOptions& options)
      : graph_(graph),
        config_(std::move(config)),
        fallback_(fallback),
        holdout_(holdout),
        options_(options) {}

  Status Init() {
    SURGE_ASSIGN_OR_RETURN(config_.profile, ProfileCovering(graph_, holdout_));
    BuilderConfig ref;
    ref.backend = "cpu";
    ref.precision = Precision::kFp32;
    ref.num_threads = options_.num_threads;
    ref.profile = config_.profile;
    auto engine = BuildEngine(graph_, ref);
    if (!engine.ok()) return engine.status().WithContext("building the FP32 reference engine");
    SURGE_ASSIGN_OR_RETURN(reference_, RunAll(**engine, holdout_));
    return Status::Ok();
  }

  // The engine with `fallback` layers in the base precision, measured on the held-out batches.
  Result<Agreement> Evaluate(const std::set<std::string>& fallback) {
    BuilderConfig c = config_;
    for (const std::string& name : fallback) c.quant.layers[name].precision = fallback_;
    auto engine = BuildEngine(graph_, c);
    if (!engine.ok()) return engine.status().WithContext("building a candidate engine");
    SURGE_ASSIGN_OR_RETURN(auto outputs, RunAll(**engine, holdout_));
    AgreementMeter meter(options_.top1_outputs);
    for (size_t i = 0; i < outputs.size(); ++i) {
      SURGE_RETURN_IF_ERROR(meter.Add(holdout_[i], reference_[i], outputs[i]));
    }
    ++evaluations_;
    return meter.result();
  }

  int evaluations() const { return evaluations_; }

 private:
  const ir::Graph& graph_;
  BuilderConfig config_;
  Precision fallback_;
  std::span<const TensorMap> holdout_;
  const GuardOptions& options_;
  std::vector<TensorMap> reference_;
  int evaluations_ = 0;
};

double Score(const Agreement& a, const GuardBudget& b) {
  const double cos_part = (1.0 - a.cosine()) / std::max(1.0 - b.min_cosine, 1e-12);
  const double top1_part = (1.0 - a.top1_agreement()) / std::max(b.max_top1_drop, 1e-12);
  return std::max(cos_part, top1_part);
}

}  // namespace

bool GuardBudget::Met(const Agreement& a) const {
  return a.cosine() >= min_cosine && 1.0 - a.top1_agreement() <= max_top1_drop + 1e-12;
}

std::string GuardBudget::ToString() const {
  return fmt::format("cosine >= {}, top-1 drop <= {:.2f}%", min_cosine, 100.0 * max_top1_drop);
}

std::string GuardResult::ToJson() const {
  Json effects_json = Json::array();
  for (const auto& e : effects) {
    effects_json.push_back({{"layer", e.layer},
                            {"rank", e.rank},
                            {"score", e.score},
                            {"cosine_alone", e.alone.cosine()},
                            {"top1_agreement_alone", e.alone.top1_agreement()}});
  }
  Json j = {
      {"budget", {{"min_cosine", budget.min_cosine}, {"max_top1_drop", budget.max_top1_drop}}},
      {"fallback", fallback},
      {"all_quantised", AgreementJson(all_quantised)},
      {"final", AgreementJson(final_agreement)},
      {"sensitivity", effects_json},
      {"plans_evaluated", plans_evaluated},
      {"holdout_batches", holdout_batches}};
  return j.dump();
}

Result<GuardResult> RunAccuracyGuard(const ir::Graph& graph, const BuilderConfig& config,
                                     const std::vector<std::string>& candidates, Precision fallback,
                                     std::span<const TensorMap> holdout,
                                     const GuardOptions& options) {
  if (holdout.empty()) {
    return InvalidArgumentError("the accuracy guard needs held-out inputs; none were given");
  }
  const GuardBudget& budget = options.budget;
  if (!(budget.min_cosine >= -1 && budget.min_cosine <= 1) ||
      !(budget.max_top1_drop >= 0 && budget.max_top1_drop <= 1)) {
    return InvalidArgumentError(
        "accuracy budget: min cosine {} must lie in [-1, 1] and max top-1 drop {} in [0, 1]",
        budget.min_cosine, budget.max_top1_drop);
  }
  Evaluator eval(graph, config, fallback, holdout, options);
  SURGE_RETURN_IF_ERROR(eval.Init());
  GuardResult result;
  result.budget = budget;
  result.holdout_batches = static_cast<int>(holdout.size());
  SURGE_ASSIGN_OR_RETURN(result.all_quantised, eval.Evaluate({}));
  SURGE_LOG_INFO("accuracy guard: every candidate layer quantised: {} (budget {})",
                 result.all_quantised.Summary(), budget.ToString());
  result.final_agreement = result.all_quantised;
  if (budget.Met(result.all_quantised) || candidates.empty()) {
    result.plans_evaluated = eval.evaluations();
    if (!budget.Met(result.all_quantised)) {
      return FailedPreconditionError("no layer is quantised, yet the engine reaches {} ({})",
                                     result.all_quantised.Summary(), budget.ToString());
    }
    return result;
  }
  // Each layer's effect alone.
  const std::set<std::string> all(candidates.begin(), candidates.end());
  for (const std::string& layer : candidates) {
    std::set<std::string> others = all;
    others.erase(layer);
    SURGE_ASSIGN_OR_RETURN(Agreement alone, eval.Evaluate(others));
    result.effects.push_back({layer, alone, Score(alone, budget), 0});
  }
  std::stable_sort(result.effects.begin(), result.effects.end(),
                   [](const LayerEffect& a, const LayerEffect& b) { return a.score > b.score; });
  for (size_t i = 0; i < result.effects.size(); ++i)
    result.effects[i].rank = static_cast<int>(i) + 1;
  auto top = [&](size_t k) {
    std::set<std::string> s;
    for (size_t i = 0; i < k; ++i) s.insert(result.effects[i].layer);
    return s;
  };
  const size_t n = result.effects.size();
  std::map<size_t, Agreement> measured;
  auto meets = [&](size_t k) -> Result<bool> {
    auto it = measured.find(k);
    if (it == measured.end()) {
      SURGE_ASSIGN_OR_RETURN(Agreement a, eval.Evaluate(top(k)));
      SURGE_LOG_INFO("accuracy guard: {} most sensitive layer(s) in {}: {}", k,
                     PrecisionName(fallback), a.Summary());
      it = measured.emplace(k, a).first;
    }
    return budget.Met(it->second);
  };
  size_t lo = 0, hi = 1;  // lo: known to miss (0 = all quantised)
  while (true) {
    hi = std::min(hi, n);
    SURGE_ASSIGN_OR_RETURN(bool ok, meets(hi));
    if (ok) break;
    if (hi == n) {
      return FailedPreconditionError(
          "the accuracy budget ({}) cannot be met: even with all {} quantisable layers in {} the "
          "engine reaches {}",
          budget.ToString(), n, PrecisionName(fallback), measured.at(hi).Summary());
    }
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    SURGE_ASSIGN_OR_RETURN(bool ok, meets(mid));
    if (ok) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  for (size_t i = 0; i < hi; ++i) result.fallback.push_back(result.effects[i].layer);
  result.final_agreement = measured.at(hi);
  result.plans_evaluated = eval.evaluations();
  return result;
}

}  // namespace surge::engine::quant
