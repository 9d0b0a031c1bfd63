#include "engine/quant/quantize.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

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

// "; 19 to int8, 3 to fp16": the layers at each rung (empty when none moved).
std::string FallbackCounts(const GuardResult& g) {
  std::string out;
  for (Precision p : g.ladder) {
    int n = 0;
    for (const auto& [name, q] : g.precision) n += q == p;
    if (n > 0) out += fmt::format("{}{} to {}", out.empty() ? "; " : ", ", n, PrecisionName(p));
  }
  return out;
}

// What the guard measured of `layer`, stage by stage: "fp8 alone (the others int8): cosine
// 0.999, top-1 100.00% (sensitivity #3 of 49)" for a ranked stage, "every layer went from fp8 to
// int8 (all int8: cosine ..., outside the budget)" for one that moved them all.
std::string GuardHistory(const GuardResult& g, const std::string& layer) {
  std::vector<std::string> parts;
  for (const GuardStage& st : g.stages) {
    bool ranked = false;
    for (const LayerEffect& e : st.effects) {
      if (e.layer != layer) continue;
      ranked = true;
      parts.push_back(fmt::format(
          "{} alone (the others {}): cosine {:.6f}, top-1 agreement {} (sensitivity #{} of {})",
          PrecisionName(st.from), PrecisionName(st.to), e.alone.cosine(),
          Pct(e.alone.top1_agreement()), e.rank, st.effects.size()));
    }
    if (!ranked && st.effects.empty() &&
        std::find(st.moved.begin(), st.moved.end(), layer) != st.moved.end()) {
      parts.push_back(fmt::format("every layer went from {} to {} (all {}: {}, outside the budget)",
                                  PrecisionName(st.from), PrecisionName(st.to),
                                  PrecisionName(st.to), st.all_moved.Summary()));
    }
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; then ") + p;
  return out;
}

}  // namespace

Precision BasePrecision(const std::string& backend) {
  return backend == "cuda" ? Precision::kFp16 : Precision::kFp32;
}

std::vector<Precision> DefaultFallbacks(const std::string& backend, Precision target) {
  if (backend == "cuda" && target == Precision::kFp8) return {Precision::kInt8, Precision::kFp16};
  return {BasePrecision(backend)};
}

Result<std::vector<Precision>> ParseFallbacks(std::string_view list) {
  std::vector<Precision> out;
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view item = list.substr(at, comma - at);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) {
      return InvalidArgumentError(
          "fallback precisions '{}': an empty entry (give a comma-separated list such as "
          "int8,fp16)",
          list);
    }
    auto p = ParsePrecision(item);
    if (!p.ok()) return p.status().WithContext(fmt::format("fallback precisions '{}'", list));
    out.push_back(*p);
    at = comma + 1;
  }
  return out;
}

Status CheckFallbacks(const std::string& backend, Precision target,
                      const std::vector<Precision>& ladder) {
  SURGE_RETURN_IF_ERROR(CheckLadder(target, ladder));
  for (Precision p : ladder) {
    const bool runs = backend == "cuda"
                          ? p == Precision::kInt8 || p == Precision::kFp8 || p == Precision::kFp16
                          : p == Precision::kInt8 || p == Precision::kBf16 || p == Precision::kFp32;
    if (!runs) {
      return InvalidArgumentError("fallback precision {}: a single layer of the {} backend runs {}",
                                  PrecisionName(p), backend,
                                  backend == "cuda" ? "int8, fp8 or fp16" : "int8, bf16 or fp32");
    }
    if (NeedsScales(p) && !NeedsScales(target)) {
      return InvalidArgumentError(
          "fallback precision {} needs calibrated scales, which a {} build does not have",
          PrecisionName(p), PrecisionName(target));
    }
  }
  return Status::Ok();
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
  std::vector<Precision> ladder = options.guard_options.fallbacks;
  if (ladder.empty()) ladder = DefaultFallbacks(config->backend, target);
  if (guard || !options.guard_options.fallbacks.empty()) {
    SURGE_RETURN_IF_ERROR(CheckFallbacks(config->backend, target, ladder));
  }
  if (guard) {
    auto t0 = std::chrono::steady_clock::now();
    SURGE_ASSIGN_OR_RETURN(report->guard, RunAccuracyGuard(graph, *config, candidates, ladder,
                                                           cache->holdout, options.guard_options));
    report->guarded = true;
    SURGE_LOG_INFO("accuracy guard: {} of {} layers kept {}{}; engine {} ({} plans, {:.1f} s)",
                   candidates.size() - report->guard.fallback.size(), candidates.size(),
                   PrecisionName(target), FallbackCounts(report->guard),
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
    if (!guard) {
      ++quantised;
      lp.reason = cache != nullptr ? cal + "calibrated (" + spec.calibrator + "), no accuracy guard"
                                   : "build precision, no calibration cache and no accuracy guard";
      continue;
    }
    lp.precision = g.precision.at(name);
    const std::string history = GuardHistory(g, name);
    if (lp.precision != target) {
      lp.reason = fmt::format(
          "kept by the accuracy guard in {}: {}; with every layer {} the engine "
          "reached {}, outside the budget; {}",
          PrecisionName(lp.precision), history, PrecisionName(target), g.all_quantised.Summary(),
          engine_line);
      continue;
    }
    ++quantised;
    lp.reason = history.empty() ? cal + "with every layer " + std::string(PrecisionName(target)) +
                                      " the budget holds: " + engine_line
                                : cal + history + "; " + engine_line;
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
