// `surge build MODEL -o PLAN`: import an ONNX file or Hugging Face folder, optimise, lower for a
// backend and write a plan file (trtexec --onnx ... --saveEngine). INT8/FP8 builds take a
// calibration cache (`surge calibrate`) and an accuracy budget the guard holds them to; BF16 may.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/engine_io.h"
#include "cli/text_inputs.h"
#include "engine/builder/builder.h"
#include "engine/quant/quantize.h"

namespace surge::cli {
namespace {

struct BuildArgs {
  std::string model;
  std::string output;
  std::string backend = "cpu";
  std::string precision;  // empty: the backend's default (fp32 on cpu, fp16 on cuda)
  std::vector<std::string> profiles;
  int threads = 0;
  std::string tactic_search = "heuristic";
  bool json = false;
  // Quantised builds.
  std::string calibration;
  std::string calibrator = "percentile";
  double percentile = 99.99;
  double min_cosine = 0.999;
  std::string max_top1_drop = "0.5%";
  std::string guard_confidence = "0";  // "95%" or "0.95"; 0: the measured cosine
  std::string top1_outputs;
  std::string guard_fallback;  // empty: the backend's ladder
  bool no_guard = false;
};

Result<engine::quant::QuantizeOptions> QuantOptions(const BuildArgs& a) {
  engine::quant::QuantizeOptions o;
  SURGE_ASSIGN_OR_RETURN(o.calibrator, engine::quant::ParseCalibrator(a.calibrator, a.percentile));
  o.guard = !a.no_guard;
  o.guard_options.budget.min_cosine = a.min_cosine;
  SURGE_ASSIGN_OR_RETURN(o.guard_options.budget.max_top1_drop,
                         ParseFraction(a.max_top1_drop, "--max-top1-drop"));
  SURGE_ASSIGN_OR_RETURN(o.guard_options.budget.confidence,
                         ParseFraction(a.guard_confidence, "--guard-confidence"));
  const double confidence = o.guard_options.budget.confidence;
  if (confidence != 0 && !(confidence >= 0.5 && confidence < 1)) {
    return InvalidArgumentError(
        "--guard-confidence '{}' must be a level in [50%, 100%) such as 95%, or 0 for none",
        a.guard_confidence);
  }
  if (confidence != 0 && a.no_guard) {
    return InvalidArgumentError(
        "--guard-confidence sets how the accuracy guard reads its budget; it cannot go with "
        "--no-guard");
  }
  o.guard_options.top1_outputs = SplitCommaList(a.top1_outputs);
  o.guard_options.num_threads = a.threads;
  if (!a.guard_fallback.empty()) {
    if (a.no_guard) {
      return InvalidArgumentError(
          "--guard-fallback sets where the accuracy guard moves layers; "
          "it cannot go with --no-guard");
    }
    SURGE_ASSIGN_OR_RETURN(o.guard_options.fallbacks,
                           engine::quant::ParseFallbacks(a.guard_fallback));
  }
  return o;
}

bool IsQuantised(engine::Precision p) {
  return p == engine::Precision::kInt8 || p == engine::Precision::kFp8 ||
         p == engine::Precision::kBf16;
}

int RunBuild(const BuildArgs& args) {
  BuildArgs a = args;
  if (a.precision.empty()) a.precision = engine::PrecisionName(engine::DefaultPrecision(a.backend));
  engine::BuilderConfig config;
  config.backend = a.backend;
  auto precision = engine::ParsePrecision(a.precision);
  if (!precision.ok()) return Fail(precision.status());
  config.precision = *precision;
  config.num_threads = a.threads;
  config.full_tactic_search = a.tactic_search == "full";
  std::string spec;
  for (const auto& p : a.profiles) spec += (spec.empty() ? "" : ";") + p;
  auto profile = engine::Profile::Parse(spec);
  if (!profile.ok()) return Fail(profile.status());
  config.profile = *profile;

  engine::builder::BuildReport report;
  engine::quant::QuantizeReport qreport;
  const bool quantised = IsQuantised(config.precision);
  if (!quantised && !a.calibration.empty()) {
    return Fail(InvalidArgumentError("--calibration is for --precision int8, fp8 or bf16, not {}",
                                     a.precision));
  }
  if (!quantised && !a.guard_fallback.empty()) {
    return Fail(InvalidArgumentError(
        "--guard-fallback is for --precision int8, fp8 or bf16 (the accuracy guard), not {}",
        a.precision));
  }
  if (!quantised) {
    auto confidence = ParseFraction(a.guard_confidence, "--guard-confidence");
    if (!confidence.ok() || *confidence != 0) {
      return Fail(InvalidArgumentError(
          "--guard-confidence is for --precision int8, fp8 or bf16 (the accuracy guard), not {}",
          a.precision));
    }
  }
  Status st;
  if (quantised) {
    auto qo = QuantOptions(a);
    if (!qo.ok()) return Fail(qo.status());
    st = engine::quant::BuildQuantizedToFile(a.model, config, a.calibration, *qo, a.output, &report,
                                             &qreport);
  } else {
    st = engine::builder::BuildToFile(a.model, config, a.output, &report);
  }
  if (!st.ok()) return Fail(st);
  if (a.json) {
    auto j = nlohmann::json::parse(report.ToJson());
    j["plan"] = a.output;
    j["plan_bytes"] = report.plan_bytes;
    if (quantised) j["quant"] = nlohmann::json::parse(qreport.ToJson());
    std::cout << j.dump(1) << '\n';
    return 0;
  }
  std::cout << "built " << a.output << " (" << report.plan_bytes << " bytes) from " << a.model
            << " for backend " << a.backend << ", " << a.precision << '\n';
  std::cout << fmt::format(
      "time: {:.1f} ms (import {:.1f}, passes {:.1f}, lower {:.1f}, write "
      "{:.1f})\n",
      report.total_ms, report.import_ms, report.optimize_ms, report.lower_ms, report.write_ms);
  std::cout << "fused ops:";
  bool any = false;
  for (const auto& [op, n] : report.passes.ops_after) {
    if (op.rfind("surge::", 0) == 0) {
      std::cout << ' ' << op.substr(7) << '=' << n;
      any = true;
    }
  }
  std::cout << (any ? "" : " none") << '\n';
  int before = 0, after = 0;
  for (const auto& [op, n] : report.passes.ops_before) before += n;
  for (const auto& [op, n] : report.passes.ops_after) after += n;
  std::cout << "nodes: " << before << " -> " << after << '\n';
  std::cout << "profile: " << report.profile.ToString() << '\n';
  std::cout << "weights: " << report.weights_bytes << " bytes, tactics: " << report.tactics_bytes
            << " bytes\n";
  if (quantised) {
    std::cout << fmt::format("quantised: {} of {} layers {}{}\n", qreport.quantised, qreport.layers,
                             a.precision,
                             qreport.calibrator.empty() ? "" : " (" + qreport.calibrator + ")");
    if (qreport.guarded) {
      const auto& g = qreport.guard;
      std::cout << fmt::format(
          "accuracy guard ({}, {} held-out batch(es), {} plan(s) measured): all {}: {}; built: "
          "{}\n",
          g.budget.ToString(), g.holdout_batches, g.plans_evaluated, a.precision,
          g.budget.Describe(g.all_quantised), g.budget.Describe(g.final_agreement));
      for (const auto& name : g.fallback) {
        std::cout << "  kept in " << engine::PrecisionName(g.precision.at(name)) << ": " << name
                  << '\n';
      }
    }
    std::cout << "per-layer precision and reasons: surge inspect " << a.output << '\n';
  }
  return 0;
}

std::function<int()> SetupBuild(CLI::App& sub) {
  auto a = std::make_shared<BuildArgs>();
  sub.add_option("model", a->model, "ONNX file or Hugging Face folder")->required();
  sub.add_option("-o,--output", a->output, "plan file to write")->required();
  sub.add_option("--backend", a->backend, "cpu or cuda")->capture_default_str();
  sub.add_option("--precision", a->precision,
                 "fp32, fp16, bf16, int8, fp8 (default: fp32 on cpu, fp16 on cuda)");
  sub.add_option("--profile", a->profiles,
                 "NAME:MIN,OPT,MAX, e.g. input_ids:1x1,8x128,64x512 (repeatable; inputs not named "
                 "get batch 1..64 opt 8, seq 1..512 opt 128)");
  sub.add_option("--threads", a->threads, "threads the plan runs with (0: all cores)");
  sub.add_option("--tactic-search", a->tactic_search,
                 "heuristic (the GEMM library's top picks) or full (also the configurations "
                 "around them, timed: builds take minutes, GEMMs up to a few per cent faster; "
                 "cuda)")
      ->check(CLI::IsMember({"heuristic", "full"}))
      ->capture_default_str();
  sub.add_flag("--json", a->json, "print the build report as JSON");
  sub.add_option("--calibration", a->calibration,
                 "calibration cache from `surge calibrate` (int8/fp8; optional for bf16)");
  sub.add_option("--calibrator", a->calibrator, "entropy, percentile or minmax")
      ->capture_default_str();
  sub.add_option("--percentile", a->percentile, "with --calibrator percentile")
      ->capture_default_str();
  sub.add_option("--min-cosine", a->min_cosine,
                 "accuracy budget: cosine to the FP32 outputs on the held-out slice")
      ->capture_default_str();
  sub.add_option("--max-top1-drop", a->max_top1_drop,
                 "accuracy budget: top-1 disagreement with FP32 (0.5% or 0.005)")
      ->capture_default_str();
  sub.add_option("--guard-confidence", a->guard_confidence,
                 "read the cosine budget as a one-sided lower confidence bound over the held-out "
                 "rows at this level (95% or 0.95), so that it holds for rows not held out; 0: "
                 "the held-out mean")
      ->capture_default_str();
  sub.add_option("--top1-outputs", a->top1_outputs,
                 "outputs whose argmax counts (comma-separated; default: names with 'logit')");
  sub.add_option("--guard-fallback", a->guard_fallback,
                 "precisions the guard moves sensitive layers through, cheapest first (default: "
                 "int8,fp16 for cuda fp8, else fp16 on cuda and fp32 on cpu; e.g. bf16,fp32)");
  sub.add_flag("--no-guard", a->no_guard, "quantise every calibrated layer, measure nothing");
  return [a] { return RunBuild(*a); };
}

SURGE_REGISTER_COMMAND(build, "build", "Build a plan file from an ONNX model or HF checkpoint",
                       SetupBuild);

}  // namespace
}  // namespace surge::cli
