#include "engine/quant/accuracy_guard.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

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
                    {"mean_cosine_stderr", o.mean_cosine_stderr()},
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
  Evaluator(const ir::Graph& graph, BuilderConfig config, std::span<const TensorMap> holdout,
            const GuardOptions& options)
      : graph_(graph), config_(std::move(config)), holdout_(holdout), options_(options) {}

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

  // The engine with the candidates at `precisions`, measured on the held-out batches.
  Result<Agreement> Evaluate(const LayerPrecisions& precisions) {
    BuilderConfig c = config_;
    for (const auto& [name, p] : precisions) c.quant.layers[name].precision = p;
    auto engine = BuildEngine(graph_, c);
    if (!engine.ok()) return engine.status().WithContext("building a candidate engine");
    SURGE_ASSIGN_OR_RETURN(auto outputs, RunAll(**engine, holdout_));
    AgreementMeter meter(options_.top1_outputs);
    for (size_t i = 0; i < outputs.size(); ++i) {
      SURGE_RETURN_IF_ERROR(meter.Add(holdout_[i], reference_[i], outputs[i]));
    }
    return meter.result();
  }

 private:
  const ir::Graph& graph_;
  BuilderConfig config_;
  std::span<const TensorMap> holdout_;
  const GuardOptions& options_;
  std::vector<TensorMap> reference_;
};

Status CheckBudget(const GuardBudget& budget) {
  if (!(budget.min_cosine >= -1 && budget.min_cosine <= 1) ||
      !(budget.max_top1_drop >= 0 && budget.max_top1_drop <= 1)) {
    return InvalidArgumentError(
        "accuracy budget: min cosine {} must lie in [-1, 1] and max top-1 drop {} in [0, 1]",
        budget.min_cosine, budget.max_top1_drop);
  }
  if (!(budget.confidence == 0 || (budget.confidence >= 0.5 && budget.confidence < 1))) {
    return InvalidArgumentError(
        "accuracy budget: confidence {} must lie in [0.5, 1) (e.g. 0.95), or be 0 for none",
        budget.confidence);
  }
  return Status::Ok();
}

double Score(const Agreement& a, const GuardBudget& b) {
  const double cos_part = (1.0 - b.Cosine(a)) / std::max(1.0 - b.min_cosine, 1e-12);
  const double top1_part = (1.0 - a.top1_agreement()) / std::max(b.max_top1_drop, 1e-12);
  return std::max(cos_part, top1_part);
}

}  // namespace

double GuardBudget::Cosine(const Agreement& a) const {
  return confidence > 0 ? a.cosine_lower_bound(confidence) : a.cosine();
}

bool GuardBudget::Met(const Agreement& a) const {
  return Cosine(a) >= min_cosine && 1.0 - a.top1_agreement() <= max_top1_drop + 1e-12;
}

std::string GuardBudget::ToString() const {
  return fmt::format("cosine{} >= {}, top-1 drop <= {:.2f}%",
                     confidence > 0 ? fmt::format(" ({:g}% lower bound)", 100 * confidence) : "",
                     min_cosine, 100.0 * max_top1_drop);
}

std::string GuardBudget::Describe(const Agreement& a) const {
  if (confidence <= 0) return a.Summary();
  return fmt::format("{}; cosine {:g}% lower bound {:.6f} (standard error {:.2g})", a.Summary(),
                     100 * confidence, a.cosine_lower_bound(confidence), a.cosine_stderr());
}

std::string GuardResult::ToJson() const {
  auto effects_json = [](const std::vector<LayerEffect>& effects) {
    Json j = Json::array();
    for (const auto& e : effects) {
      j.push_back({{"layer", e.layer},
                   {"rank", e.rank},
                   {"score", e.score},
                   {"cosine_alone", e.alone.cosine()},
                   {"top1_agreement_alone", e.alone.top1_agreement()}});
    }
    return j;
  };
  Json ladder_json = Json::array();
  for (Precision p : ladder) ladder_json.push_back(std::string(PrecisionName(p)));
  Json stages_json = Json::array();
  for (const GuardStage& st : stages) {
    stages_json.push_back({{"from", std::string(PrecisionName(st.from))},
                           {"to", std::string(PrecisionName(st.to))},
                           {"layers", st.layers},
                           {"all_moved", AgreementJson(st.all_moved)},
                           {"sensitivity", effects_json(st.effects)},
                           {"moved", st.moved},
                           {"result", AgreementJson(st.result)}});
  }
  Json precisions = Json::object();
  for (const auto& [name, p] : precision) precisions[name] = std::string(PrecisionName(p));
  Json j = {{"budget",
             {{"min_cosine", budget.min_cosine},
              {"max_top1_drop", budget.max_top1_drop},
              {"confidence", budget.confidence}}},
            {"target", std::string(PrecisionName(target))},
            {"ladder", ladder_json},
            {"fallback", fallback},
            {"precision", precisions},
            {"all_quantised", AgreementJson(all_quantised)},
            {"final", AgreementJson(final_agreement)},
            {"final_cosine_bound", budget.Cosine(final_agreement)},
            {"stages", stages_json},
            {"plans_evaluated", plans_evaluated},
            {"holdout_batches", holdout_batches}};
  return j.dump();
}

Status CheckLadder(Precision target, const std::vector<Precision>& ladder) {
  if (ladder.empty()) {
    return InvalidArgumentError("the accuracy guard needs at least one precision to fall back to");
  }
  for (size_t i = 0; i < ladder.size(); ++i) {
    if (ladder[i] == target) {
      return InvalidArgumentError(
          "accuracy guard: fallback precision {} is the build's own precision; name only "
          "higher ones",
          PrecisionName(target));
    }
    for (size_t j = 0; j < i; ++j) {
      if (ladder[j] == ladder[i]) {
        return InvalidArgumentError("accuracy guard: fallback precision {} is named twice",
                                    PrecisionName(ladder[i]));
      }
    }
  }
  return Status::Ok();
}

Result<GuardResult> SearchFallbacks(const std::vector<std::string>& candidates, Precision target,
                                    const std::vector<Precision>& ladder, const GuardBudget& budget,
                                    const EvaluateFn& evaluate) {
  SURGE_RETURN_IF_ERROR(CheckLadder(target, ladder));
  SURGE_RETURN_IF_ERROR(CheckBudget(budget));
  GuardResult result;
  result.budget = budget;
  result.target = target;
  result.ladder = ladder;
  for (const std::string& name : candidates) result.precision[name] = target;
  // Every configuration measured once (a stage's first and last steps can coincide).
  std::map<LayerPrecisions, Agreement> measured;
  auto measure = [&](const LayerPrecisions& precisions) -> Result<Agreement> {
    auto it = measured.find(precisions);
    if (it != measured.end()) return it->second;
    SURGE_ASSIGN_OR_RETURN(Agreement a, evaluate(precisions));
    measured.emplace(precisions, a);
    return a;
  };
  auto finish = [&](Result<GuardResult> r) {
    if (r.ok()) r->plans_evaluated = static_cast<int>(measured.size());
    return r;
  };
  SURGE_ASSIGN_OR_RETURN(result.all_quantised, measure(result.precision));
  SURGE_LOG_INFO("accuracy guard: every candidate layer {}: {} (budget {})", PrecisionName(target),
                 budget.Describe(result.all_quantised), budget.ToString());
  if (budget.confidence > 0 && result.all_quantised.min_rows() < 2) {
    return InvalidArgumentError(
        "a confidence bound on the cosine needs 2 or more held-out rows per output; the held-out "
        "slice gives {}: hold out more, or budget the measured cosine (confidence 0)",
        result.all_quantised.min_rows());
  }
  result.final_agreement = result.all_quantised;
  if (budget.Met(result.all_quantised)) return finish(std::move(result));
  if (candidates.empty()) {
    return FailedPreconditionError("no layer is quantised, yet the engine reaches {} ({})",
                                   budget.Describe(result.all_quantised), budget.ToString());
  }
  Precision from = target;
  for (size_t rung = 0; rung < ladder.size(); ++rung) {
    const Precision to = ladder[rung];
    const bool last = rung + 1 == ladder.size();
    GuardStage stage;
    stage.from = from;
    stage.to = to;
    std::vector<std::string> layers;
    for (const std::string& name : candidates) {
      if (result.precision.at(name) == from) layers.push_back(name);
    }
    stage.layers = static_cast<int>(layers.size());
    LayerPrecisions all_moved = result.precision;
    for (const std::string& name : layers) all_moved[name] = to;
    SURGE_ASSIGN_OR_RETURN(stage.all_moved, measure(all_moved));
    SURGE_LOG_INFO("accuracy guard: all {} layer(s) from {} to {}: {}", layers.size(),
                   PrecisionName(from), PrecisionName(to), budget.Describe(stage.all_moved));
    if (!budget.Met(stage.all_moved)) {
      if (last) {
        return FailedPreconditionError(
            "the accuracy budget ({}) cannot be met: even with all {} quantisable layers in {} "
            "the engine reaches {}",
            budget.ToString(), candidates.size(), PrecisionName(to),
            budget.Describe(stage.all_moved));
      }
      // Nothing short of every layer at `to` can do; the next rung starts from there.
      stage.moved = layers;
      stage.result = stage.all_moved;
      result.precision = all_moved;
      for (const std::string& name : layers) result.fallback.push_back(name);
      result.stages.push_back(std::move(stage));
      from = to;
      continue;
    }
    // Each layer's effect alone: itself at `from`, the stage's others at `to`.
    for (const std::string& layer : layers) {
      LayerPrecisions alone = all_moved;
      alone[layer] = from;
      SURGE_ASSIGN_OR_RETURN(Agreement a, measure(alone));
      stage.effects.push_back({layer, a, Score(a, budget), 0});
    }
    std::stable_sort(stage.effects.begin(), stage.effects.end(),
                     [](const LayerEffect& a, const LayerEffect& b) { return a.score > b.score; });
    for (size_t i = 0; i < stage.effects.size(); ++i)
      stage.effects[i].rank = static_cast<int>(i) + 1;
    auto top = [&](size_t k) {
      LayerPrecisions p = result.precision;
      for (size_t i = 0; i < k; ++i) p[stage.effects[i].layer] = to;
      return p;
    };
    auto meets = [&](size_t k) -> Result<bool> {
      SURGE_ASSIGN_OR_RETURN(Agreement a, measure(top(k)));
      SURGE_LOG_INFO("accuracy guard: {} most sensitive layer(s) in {}: {}", k, PrecisionName(to),
                     budget.Describe(a));
      return budget.Met(a);
    };
    const size_t n = stage.effects.size();
    size_t lo = 0, hi = 1;  // lo: known to miss (0: the stage's start); n: known to meet
    while (true) {
      hi = std::min(hi, n);
      SURGE_ASSIGN_OR_RETURN(bool ok, meets(hi));
      if (ok) break;
      lo = hi;
      hi *= 2;
    }
    while (hi - lo > 1) {
      const size_t mid = (lo + hi) / 2;
      SURGE_ASSIGN_OR_RETURN(bool ok, meets(mid));
      (ok ? hi : lo) = mid;
    }
    for (size_t i = 0; i < hi; ++i) {
      const std::string& layer = stage.effects[i].layer;
      stage.moved.push_back(layer);
      if (from == target) result.fallback.push_back(layer);  // else listed when it left target
    }
    result.precision = top(hi);
    stage.result = measured.at(result.precision);
    result.final_agreement = stage.result;
    result.stages.push_back(std::move(stage));
    return finish(std::move(result));
  }
  return InternalError("accuracy guard: the ladder ended without a result");
}

Result<GuardResult> RunAccuracyGuard(const ir::Graph& graph, const BuilderConfig& config,
                                     const std::vector<std::string>& candidates,
                                     const std::vector<Precision>& ladder,
                                     std::span<const TensorMap> holdout,
                                     const GuardOptions& options) {
  if (holdout.empty()) {
    return InvalidArgumentError("the accuracy guard needs held-out inputs; none were given");
  }
  SURGE_RETURN_IF_ERROR(CheckBudget(options.budget));
  Evaluator eval(graph, config, holdout, options);
  SURGE_RETURN_IF_ERROR(eval.Init());
  SURGE_ASSIGN_OR_RETURN(
      GuardResult result,
      SearchFallbacks(candidates, config.precision, ladder, options.budget,
                      [&](const LayerPrecisions& p) { return eval.Evaluate(p); }));
  result.holdout_batches = static_cast<int>(holdout.size());
  return result;
}

}  // namespace surge::engine::quant
