#include "engine/quant/quantize.h"

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/logging.h"
#include "engine/plan/plan_file.h"
#include "engine/quant/calibrate.h"

namespace surge::engine::quant {
namespace {

using Json = nlohmann::json;

bool Quantising(Precision p) {
  return p == Precision::kInt8 || p == Precision::kFp8 || p == Precision::kBf16;
}

bool NeedsScales(Precision p) { return p == Precision::kInt8 || p == Precision::kFp8; }

std::string Pct(double fraction) { return fmt::format("{:.2f}%", 100.0 * fraction); }

}  // namespace

Precision BasePrecision(const std::string& backend) {
  return backend == "cuda" ? Precision::kFp16 : Precision::kFp32;
}

std::string QuantizeReport::ToJson() const {
  Json j = {{"calibrator", calibrator},
            {"layers", layers},
            {"quantised", quantised},
            {"guarded", guarded}};
  if (guarded) j["guard"] = Json::parse(guard.ToJson());
  return j.dump();
}

Status Quantize(const ir::Graph& graph, const CalibrationCache* cache,
                const QuantizeOptions& options, BuilderConfig* config, QuantizeReport* report) {
  QuantizeReport local;
  if (report == nullptr) report = &local;
  const Precision target = config->precision;
  if (!Quantising(target)) return Status::Ok();
  const Precision base = BasePrecision(config->backend);
  if (NeedsScales(target) && cache == nullptr) {
    return FailedPreconditionError(
        "precision {} needs a calibration cache (--calibration CACHE); make one with `surge "
        "calibrate MODEL --texts FILE -o CACHE`",
        PrecisionName(target));
  }
  if (cache != nullptr) {
    SURGE_ASSIGN_OR_RETURN(std::string hash, ModelHash(graph));
    if (cache->model_hash != hash) {
      return FailedPreconditionError(
          "the calibration cache was made for another model ('{}', model hash {}); this model's "
          "hash is {}: run `surge calibrate` on this model",
          cache->model, cache->model_hash, hash);
    }
  }
  SURGE_ASSIGN_OR_RETURN(std::vector<QuantLayer> layers, QuantizableLayers(graph));
  QuantSpec spec;
  spec.calibrator = NeedsScales(target) ? CalibratorName(options.calibrator) : "";
  report->calibrator = spec.calibrator;
  report->layers = static_cast<int>(layers.size());
  std::vector<std::string> candidates;
  std::map<std::string, std::string> calibrated;  // layer -> "amax 3.2 (max 7.9)"
  for (const QuantLayer& l : layers) {
    LayerPrecision lp{base, ""};
    if (NeedsScales(target) && config->backend == "cuda" && (l.k % 16 != 0 || l.n % 16 != 0)) {
      lp.reason = fmt::format("K={} N={}: the cuda backend's INT8/FP8 GEMMs need multiples of 16",
                              l.k, l.n);
      spec.layers[l.name] = lp;
      continue;
    }
    if (NeedsScales(target)) {
      auto st = cache->tensors.find(l.input);
      if (st == cache->tensors.end()) {
        lp.reason = fmt::format("no calibration statistics for its input '{}'", l.input);
        spec.layers[l.name] = lp;
        continue;
      }
      auto amax = Threshold(st->second.hist, options.calibrator);
      if (!amax.ok()) {
        lp.reason =
            fmt::format("input '{}' cannot be scaled: {}", l.input, amax.status().message());
        spec.layers[l.name] = lp;
        continue;
      }
      spec.amax[l.input] = *amax;
      calibrated[l.name] =
          fmt::format("input amax {:.4g} of max {:.4g}", *amax, st->second.hist.max_abs());
    }
    lp.precision = target;
    spec.layers[l.name] = lp;
    candidates.push_back(l.name);
  }
  config->quant = spec;
  const bool guard = options.guard && cache != nullptr;
  if (options.guard && cache != nullptr && cache->holdout.empty()) {
    return FailedPreconditionError(
        "the calibration cache holds no held-out inputs for the accuracy guard: recalibrate with "
        "--holdout > 0, or build with --no-guard");
  }
  std::set<std::string> fallback;
  std::map<std::string, const LayerEffect*> effect;
  if (guard) {
    auto t0 = std::chrono::steady_clock::now();
    SURGE_ASSIGN_OR_RETURN(report->guard, RunAccuracyGuard(graph, *config, candidates, base,
                                                           cache->holdout, options.guard_options));
    report->guarded = true;
    fallback.insert(report->guard.fallback.begin(), report->guard.fallback.end());
    for (const auto& e : report->guard.effects) effect[e.layer] = &e;
    SURGE_LOG_INFO(
        "accuracy guard: {} of {} layers fall back to {}; engine {} ({} plans, {:.1f} s)",
        fallback.size(), candidates.size(), PrecisionName(base),
        report->guard.final_agreement.Summary(), report->guard.plans_evaluated,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const GuardResult& g = report->guard;
  const std::string engine_line =
      guard ? fmt::format("engine cosine {:.6f}, top-1 drop {}", g.final_agreement.cosine(),
                          Pct(1 - g.final_agreement.top1_agreement()))
            : "";
  int quantised = 0;
  for (const std::string& name : candidates) {
    LayerPrecision& lp = config->quant.layers[name];
    const std::string cal = calibrated.count(name) ? calibrated[name] + "; " : "";
    auto e = effect.find(name);
    const std::string alone =
        e == effect.end()
            ? ""
            : fmt::format(
                  "quantised alone: cosine {:.6f}, top-1 agreement {} (sensitivity #{} of {})",
                  e->second->alone.cosine(), Pct(e->second->alone.top1_agreement()),
                  e->second->rank, g.effects.size());
    if (fallback.count(name)) {
      lp.precision = base;
      lp.reason = fmt::format(
          "kept by the accuracy guard: {}; with every layer {} the engine reached {}, outside the "
          "budget",
          alone, PrecisionName(target), g.all_quantised.Summary());
      continue;
    }
    ++quantised;
    if (!guard) {
      lp.reason = cache != nullptr ? cal + "calibrated (" + spec.calibrator + "), no accuracy guard"
                                   : "build precision, no calibration cache and no accuracy guard";
    } else if (alone.empty()) {
      lp.reason = cal + "with every layer " + std::string(PrecisionName(target)) +
                  " the budget holds: " + engine_line;
    } else {
      lp.reason = cal + alone + "; " + engine_line;
    }
  }
  report->quantised = quantised;
  config->quant.report_json = report->ToJson();
  return Status::Ok();
}

Status BuildQuantizedToFile(const std::string& model_path, const BuilderConfig& config,
                            const std::string& cache_path, const QuantizeOptions& options,
                            const std::string& plan_path, builder::BuildReport* build_report,
                            QuantizeReport* report) {
  builder::BuildReport local;
  if (build_report == nullptr) build_report = &local;
  auto t0 = std::chrono::steady_clock::now();
  SURGE_ASSIGN_OR_RETURN(ir::Graph graph, builder::ImportAndOptimize(model_path, {}, build_report));
  std::optional<CalibrationCache> cache;
  if (!cache_path.empty()) {
    SURGE_ASSIGN_OR_RETURN(cache, ReadCache(cache_path));
  }
  BuilderConfig c = config;
  Status st = Quantize(graph, cache ? &*cache : nullptr, options, &c, report);
  if (!st.ok()) return st.WithContext(fmt::format("quantising '{}'", model_path));
  SURGE_ASSIGN_OR_RETURN(std::string bytes, builder::BuildPlanFromGraph(graph, c, build_report));
  build_report->total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return plan::WriteFileAtomically(plan_path, bytes);
}

}  // namespace surge::engine::quant
