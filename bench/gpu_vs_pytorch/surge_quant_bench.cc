// INT8 and FP8 plans of the CUDA backend against its FP16 plan on the same model, same tokens,
// same card: median wall time of a whole call (upload, kernels, download, synchronise; CUDA graph
// replay after the first call of a shape) per batch shape, the plans timed in interleaved rounds
// (--reps calls each in all), and agreement of every plan with the
// FP32 CPU engine (cosine, top-1) on padded batches.
//
// Model: --model DIR (a Hugging Face folder or ONNX file, imported and fused as `surge build`
// does), else a BERT-base-shaped random-weight encoder with a pooled output
// (bert_base_graph.h). Calibration: the CPU FP32 engine on random token batches (what
// `surge calibrate --inputs` does), percentile 99.99, no accuracy guard (all Linear layers
// quantised whose shapes cuBLASLt's INT8/FP8 GEMMs take).
//
// --guard-min-cosine C: also INT8 and FP8 plans built through the accuracy guard with the budget
// cosine >= C (top-1 not constrained: a few random-weight rows decide nothing), held out on
// --guard-holdout N other random sequences (default 8, a multiple of 4; --guard-confidence P
// budgets the cosine's one-sided lower confidence bound at level P over those rows instead of
// their mean); they run as "int8-guarded"
// and "fp8-guarded", and the precision the guard gave each layer is counted. The FP8 plan's layers
// fall back through INT8 to FP16 (the CUDA default); --guard-fallback LIST adds a second guarded
// FP8 plan, "fp8-guarded-LIST", whose layers fall back through LIST instead (e.g. fp16: straight to
// FP16, the ladder before INT8 was a rung), timed in the same run. Every guard candidate is a real
// CUDA plan, so this costs one build and run per quantisable layer and rung.
//
// Agreement with the FP32 CPU engine is measured on --check-sequences N random sequences of 128
// tokens (default 16, a multiple of 8) that neither calibration nor the guard saw.
//
// A precision that fails to build or run is reported (stderr and the JSON's "errors") and the
// others still run; the exit code is then 1.
//
// SURGE_BENCH_PROFILE=PLAN:SHAPE[,...] (e.g. fp8:128x128,fp16:128x128): one call of each plan
// named at that shape, after their timing, inside a profiler range each, for
// `ncu --profile-from-start off` (each kernel's device metrics without the other plans' builds
// and tuning). An entry that names no plan and shape of the run is reported as an error.
//
//   surge_quant_bench [--model DIR] [--shapes 128x128,32x128] [--reps 50] [--json FILE]
//                     [--guard-min-cosine 0.999] [--guard-fallback int8,fp16]
//                     [--guard-holdout 8] [--guard-confidence 0.95] [--check-sequences 16]
#include <cublasLt.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "bert_base_graph.h"
#include "engine/backends/cuda/cuda_backend.h"
#include "engine/builder/builder.h"
#include "engine/quant/agreement.h"
#include "engine/quant/calibrate.h"
#include "engine/quant/quantize.h"

namespace surge::engine {
namespace {

using Clock = std::chrono::steady_clock;

Result<std::shared_ptr<const Engine>> Build(const ir::Graph& g, const BuilderConfig& c,
                                            double* seconds, size_t* plan_bytes = nullptr) {
  auto t0 = Clock::now();
  SURGE_ASSIGN_OR_RETURN(std::string bytes, builder::BuildPlanFromGraph(g, c));
  *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (plan_bytes != nullptr) *plan_bytes = bytes.size();
  return Engine::LoadFromMemory({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
}

int64_t Vocab(const ir::Graph& g) {
  for (const auto& n : g.nodes) {
    if (n.op_type == "EmbedLayerNorm" && n.input(3) >= 0)
      return g.values[n.input(3)].constant.dim(0);
  }
  return 21128;
}

// Only the inputs the model has.
TensorMap Select(const ir::Graph& g, const TensorMap& all) {
  TensorMap m;
  for (int id : g.inputs) {
    auto it = all.find(g.values[id].name);
    if (it != all.end()) m.emplace(it->first, it->second);
  }
  return m;
}

std::vector<TensorMap> Batches(const ir::Graph& g, uint32_t seed, int count, int64_t batch,
                               int64_t seq, int64_t vocab) {
  std::vector<TensorMap> out;
  for (const auto& b : bench::BertBatches(seed, count, batch, seq, vocab, true)) {
    out.push_back(Select(g, b));
  }
  return out;
}

int Main(int argc, char** argv) {
  std::string model, json_path, shapes_arg = "128x128,32x128", guard_fallback;
  std::vector<Precision> guard_ladder;  // --guard-fallback, parsed
  int reps = 50, guard_holdout = 8, check_sequences = 16;
  double guard_min_cosine = 0;  // 0: no guarded plans
  double guard_confidence = 0;  // 0: the held-out mean
  // A count of sequences that is a positive multiple of `unit`.
  auto sequences = [](const char* flag, const char* value, int unit, int* out) {
    const int n = std::atoi(value);
    if (n <= 0 || n % unit != 0) {
      std::fprintf(stderr, "%s: want a positive multiple of %d sequences, got %s\n", flag, unit,
                   value);
      return false;
    }
    *out = n;
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--guard-min-cosine" && i + 1 < argc) {
      guard_min_cosine = std::atof(argv[++i]);
      if (!(guard_min_cosine > 0 && guard_min_cosine <= 1)) {
        std::fprintf(stderr, "--guard-min-cosine: want a cosine in (0, 1], got %s\n", argv[i]);
        return 2;
      }
    }
    if (a == "--model" && i + 1 < argc) model = argv[++i];
    if (a == "--guard-confidence" && i + 1 < argc) {
      guard_confidence = std::atof(argv[++i]);
      if (!(guard_confidence >= 0.5 && guard_confidence < 1)) {
        std::fprintf(stderr, "--guard-confidence: want a level in [0.5, 1), got %s\n", argv[i]);
        return 2;
      }
    }
    if (a == "--guard-holdout" && i + 1 < argc &&
        !sequences("--guard-holdout", argv[++i], 4, &guard_holdout)) {
      return 2;
    }
    if (a == "--check-sequences" && i + 1 < argc &&
        !sequences("--check-sequences", argv[++i], 8, &check_sequences)) {
      return 2;
    }
    if (a == "--guard-fallback" && i + 1 < argc) {
      guard_fallback = argv[++i];
      auto ladder = quant::ParseFallbacks(guard_fallback);
      if (!ladder.ok()) {
        std::fprintf(stderr, "--guard-fallback: %s\n", ladder.status().ToString().c_str());
        return 2;
      }
      guard_ladder = *ladder;
    }
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    if (a == "--shapes" && i + 1 < argc) shapes_arg = argv[++i];
  }
  Status gpu = cuda::CudaDeviceAvailable();
  if (!gpu.ok()) {
    std::fprintf(stderr, "%s\n", gpu.ToString().c_str());
    return 2;
  }
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (size_t pos = 0; pos < shapes_arg.size();) {
    size_t end = shapes_arg.find(',', pos);
    if (end == std::string::npos) end = shapes_arg.size();
    const std::string s = shapes_arg.substr(pos, end - pos);
    shapes.push_back({std::stoll(s.substr(0, s.find('x'))), std::stoll(s.substr(s.find('x') + 1))});
    pos = end + 1;
  }
  int64_t max_b = 8, max_s = 128;
  for (auto [b, s] : shapes) {
    max_b = std::max(max_b, b);
    max_s = std::max(max_s, s);
  }
  std::shared_ptr<ir::Graph> graph;
  if (model.empty()) {
    graph = bench::BertEncoderGraph(2026);
  } else {
    auto g = builder::ImportAndOptimize(model, {}, nullptr);
    if (!g.ok()) {
      std::fprintf(stderr, "%s\n", g.status().ToString().c_str());
      return 1;
    }
    graph = std::make_shared<ir::Graph>(std::move(g).value());
  }
  const int64_t vocab = Vocab(*graph);
  auto profile = [&](BuilderConfig& c) {
    for (int id : graph->inputs) {
      c.profile.inputs.push_back({graph->values[id].name, {1, 1}, {max_b, max_s}, {max_b, max_s}});
    }
  };
  // Calibration and the FP32 reference on the CPU.
  auto t0 = Clock::now();
  const std::vector<TensorMap> calib = Batches(*graph, 1, 6, 4, 128, vocab);
  std::vector<TensorMap> holdout;
  if (guard_min_cosine > 0) holdout = Batches(*graph, 5, guard_holdout / 4, 4, 128, vocab);
  auto cache = quant::Calibrate(*graph, calib, std::move(holdout),
                                model.empty() ? "bert_base_random" : model);
  if (!cache.ok()) {
    std::fprintf(stderr, "calibration: %s\n", cache.status().ToString().c_str());
    return 1;
  }
  std::printf("calibrated on the CPU in %.1f s\n",
              std::chrono::duration<double>(Clock::now() - t0).count());
  nlohmann::json out = {{"model", model.empty() ? "bert-base shape, random weights" : model},
                        {"results", nlohmann::json::array()},
                        {"errors", nlohmann::json::object()},
                        {"reps", reps},
                        {"check_sequences", check_sequences}};
  if (guard_min_cosine > 0) out["guard_holdout_sequences"] = guard_holdout;
  {
    cudaDeviceProp prop{};
    int dev = 0;
    cudaGetDevice(&dev);
    cudaGetDeviceProperties(&prop, dev);
    out["device"] = prop.name;
    out["cublaslt_version"] = cublasLtGetVersion();
  }
  // Written after every stage, so a run cut short still leaves what it measured.
  auto save = [&] {
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(1) << '\n';
  };
  int failures = 0;
  auto fail = [&](const std::string& name, const std::string& what) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), what.c_str());
    out["errors"][name] = what;
    ++failures;
  };
  std::map<std::string, std::shared_ptr<const Engine>> engines;
  std::set<std::string> profiled;  // PLAN:SHAPE entries of SURGE_BENCH_PROFILE that ran
  struct Plan {
    Precision precision;
    bool guarded;
    std::vector<Precision> ladder;  // guarded: --guard-fallback's; empty: the backend's ladder
  };
  std::vector<Plan> plans = {
      {Precision::kFp16, false, {}}, {Precision::kInt8, false, {}}, {Precision::kFp8, false, {}}};
  if (guard_min_cosine > 0) {
    plans.push_back({Precision::kInt8, true, {}});
    plans.push_back({Precision::kFp8, true, {}});
    if (!guard_ladder.empty()) plans.push_back({Precision::kFp8, true, guard_ladder});
  }
  for (const auto& [p, guarded, ladder] : plans) {
    const std::string name = std::string(PrecisionName(p)) + (guarded ? "-guarded" : "") +
                             (ladder.empty() ? "" : "-" + guard_fallback);
    BuilderConfig c;
    c.backend = "cuda";
    c.precision = p;
    profile(c);
    quant::QuantizeOptions o;
    o.guard = guarded;
    o.guard_options.budget.min_cosine = guard_min_cosine;
    o.guard_options.budget.max_top1_drop = 1.0;
    o.guard_options.budget.confidence = guard_confidence;
    o.guard_options.fallbacks = ladder;
    const auto guard_start = Clock::now();
    quant::QuantizeReport report;
    Status st = quant::Quantize(*graph, &*cache, o, &c, &report);
    if (!st.ok()) {
      fail(name, st.ToString());
      continue;
    }
    double build_s = 0;
    size_t plan_bytes = 0;
    auto e = Build(*graph, c, &build_s, &plan_bytes);
    if (!e.ok()) {
      fail(name, e.status().ToString());
      continue;
    }
    // What the loaded engine runs (a layer cuBLASLt refused runs FP16; Describe says why).
    const std::string desc = (*e)->Describe();
    // Guarded FP8 plans may run INT8 layers too (the fallback ladder fp8 -> int8 -> fp16).
    int running = 0;
    for (const char* kind : {"cublasLt int8 gemm", "cublasLt fp8 e4m3 gemm"}) {
      for (size_t at = desc.find(kind); at != std::string::npos; at = desc.find(kind, at + 1)) {
        ++running;
      }
    }
    std::printf("%s: built in %.1f s, plan %.1f MiB (%d of %d layers marked, %d run quantised)\n",
                name.c_str(), build_s, plan_bytes / 1048576.0, report.quantised, report.layers,
                p == Precision::kFp16 ? 0 : running);
    out["layers"][name] = {{"quantisable", report.layers},
                           {"marked", report.quantised},
                           {"run_quantised", p == Precision::kFp16 ? 0 : running},
                           {"plan_mib", plan_bytes / 1048576.0}};
    if (guarded) {
      const double guard_s = std::chrono::duration<double>(Clock::now() - guard_start).count();
      std::map<Precision, int> at;
      for (const auto& [layer, lp] : report.guard.precision) ++at[lp];
      std::string counts;
      for (const auto& [lp, n] : at) {
        counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, PrecisionName(lp));
      }
      std::printf(
          "%s: guard at %s: %s of %d layers (%d plans, %.0f s); all quantised: %s; built: %s\n",
          name.c_str(), report.guard.budget.ToString().c_str(), counts.c_str(), report.layers,
          report.guard.plans_evaluated, guard_s,
          report.guard.budget.Describe(report.guard.all_quantised).c_str(),
          report.guard.budget.Describe(report.guard.final_agreement).c_str());
      out["guard"][name] = nlohmann::json::parse(report.guard.ToJson());
      out["guard"][name]["seconds"] = guard_s;
    }
    engines[name] = *e;
  }
  // Accuracy against FP32 on the CPU.
  BuilderConfig cpu;
  profile(cpu);
  double cpu_s = 0;
  auto fp32 = Build(*graph, cpu, &cpu_s);
  if (!fp32.ok()) {
    std::fprintf(stderr, "cpu: %s\n", fp32.status().ToString().c_str());
    return 1;
  }
  const std::vector<TensorMap> eval = Batches(*graph, 7, check_sequences / 8, 8, 128, vocab);
  nlohmann::json accuracy = nlohmann::json::object();
  for (auto it = engines.begin(); it != engines.end();) {
    const auto& [name, e] = *it;
    auto a = quant::MeasureAgreement(**fp32, *e, eval);
    if (!a.ok()) {
      fail(name, a.status().ToString());
      it = engines.erase(it);
      continue;
    }
    ++it;
    std::printf("%s vs fp32 (cpu): %s\n", name.c_str(), a->Summary().c_str());
    accuracy[name] = {{"cosine", a->cosine()},
                      {"top1_agreement", a->top1_agreement()},
                      {"top1_rows", a->top1_rows()}};
  }
  out["accuracy_vs_fp32_cpu"] = accuracy;
  for (const auto& [name, e] : engines) out["describe"][name] = e->Describe();
  save();
  // Timing.
  std::printf("\n%-10s %10s %10s %10s %10s %10s\n", "shape", "fp16 ms", "int8 ms", "fp8 ms",
              "int8 x", "fp8 x");
  for (const auto& shape_bs : shapes) {
    const auto [b, s] = shape_bs;
    std::mt19937 rng(11);
    auto all = bench::BertInputs(rng, b, s, vocab);
    std::map<std::string, double> median;
    const std::string shape = fmt::format("{}x{}", b, s);
    const TensorMap in = Select(*graph, all);
    // Every plan's context, warmed up (the first calls of a shape capture its CUDA graph).
    std::map<std::string, std::unique_ptr<ExecutionContext>> ctxs;
    for (const auto& [name, e] : engines) {
      auto ctx = e->CreateContext();
      Status bad = ctx.status();
      for (int w = 0; w < 5 && bad.ok(); ++w) bad = (*ctx)->Run(in).status();
      if (!bad.ok()) {
        fail(name + " " + shape, bad.ToString());
        continue;
      }
      ctxs[name] = std::move(ctx).value();
    }
    // Timed in interleaved rounds, every plan a few calls per round, so that the card's clocks
    // drifting over the run (warming up, heating) fall on every plan alike instead of on
    // whichever is timed first or last.
    constexpr int kRounds = 5;
    const int per_round = (reps + kRounds - 1) / kRounds;
    std::map<std::string, std::vector<double>> ms;
    for (int round = 0; round < kRounds; ++round) {
      for (auto it = ctxs.begin(); it != ctxs.end();) {
        const std::string& name = it->first;
        Status bad;
        for (int i = 0; i < per_round && bad.ok(); ++i) {
          auto t = Clock::now();
          bad = it->second->Run(in).status();
          ms[name].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
        }
        if (!bad.ok()) {
          fail(name + " " + shape, bad.ToString());
          ms.erase(name);
          it = ctxs.erase(it);
          continue;
        }
        ++it;
      }
    }
    for (auto& [name, v] : ms) {
      std::sort(v.begin(), v.end());
      median[name] = v[v.size() / 2];
    }
    if (const char* prof = std::getenv("SURGE_BENCH_PROFILE")) {
      const std::string listed = fmt::format(",{},", prof);
      for (const auto& [name, ctx] : ctxs) {
        if (listed.find("," + name + ":" + shape + ",") != std::string::npos) {
          profiled.insert(name + ":" + shape);
          cudaProfilerStart();
          Status ran = ctx->Run(in).status();
          cudaProfilerStop();
          if (!ran.ok()) fail(name + " " + shape + " (profiled)", ran.ToString());
        }
      }
    }
    ctxs.clear();
    auto ms_of = [&](const char* name) {
      auto it = median.find(name);
      return it == median.end() ? std::nan("") : it->second;
    };
    const double fp16_ms = ms_of("fp16"), int8_ms = ms_of("int8"), fp8_ms = ms_of("fp8");
    std::printf("%-10s %10.3f %10.3f %10.3f %10.2f %10.2f\n", shape.c_str(), fp16_ms, int8_ms,
                fp8_ms, fp16_ms / int8_ms, fp16_ms / fp8_ms);
    for (const auto& [g, ms] : median) {
      if (g.find("-guarded") != std::string::npos) {
        std::printf("%-10s %s %.3f ms, %.2fx fp16\n", shape.c_str(), g.c_str(), ms, fp16_ms / ms);
      }
    }
    nlohmann::json row = {{"shape", shape}};
    for (const auto& [name, ms] : median) row[name + "_ms"] = ms;
    if (median.count("fp16") && median.count("int8"))
      row["int8_speedup_vs_fp16"] = fp16_ms / int8_ms;
    if (median.count("fp16") && median.count("fp8")) row["fp8_speedup_vs_fp16"] = fp16_ms / fp8_ms;
    out["results"].push_back(row);
    save();
    if (&shape_bs == &shapes.front()) {
      // Where the time goes at the first shape: per-kernel-kind GPU time of one call (events
      // between kernels, no CUDA graph), logged as "cuda op times: ..." by the backend.
      setenv("SURGE_CUDA_OP_TIMES", "1", 1);
      setenv("SURGE_CUDA_GRAPHS", "0", 1);
      for (const auto& [name, e] : engines) {
        auto ctx = e->CreateContext();
        if (!ctx.ok()) continue;
        std::printf("%s %s kernel times, three calls:\n", name.c_str(), shape.c_str());
        std::fflush(stdout);
        for (int i = 0; i < 3; ++i) {
          if (!(*ctx)->Run(Select(*graph, all)).ok()) break;
        }
      }
      unsetenv("SURGE_CUDA_OP_TIMES");
      unsetenv("SURGE_CUDA_GRAPHS");
    }
  }
  // A SURGE_BENCH_PROFILE entry that named no plan and shape of this run profiled nothing.
  if (const char* prof = std::getenv("SURGE_BENCH_PROFILE")) {
    const std::string list = prof;
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      const std::string entry = list.substr(at, comma - at);
      if (!entry.empty() && !profiled.count(entry)) {
        std::string plans;
        for (const auto& [name, e] : engines) plans += (plans.empty() ? "" : ",") + name;
        fail("SURGE_BENCH_PROFILE",
             fmt::format("'{}' is no PLAN:SHAPE of this run (plans that ran: {}; shapes: {}), so "
                         "nothing was profiled for it",
                         entry, plans, shapes_arg));
      }
      at = comma + 1;
    }
  }
  std::printf("\ntargets: fp8 >= 1.6x and int8 >= 1.4x fp16 at 128x128; cosine to fp32 >= 0.999\n");
  save();
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace surge::engine

int main(int argc, char** argv) { return surge::engine::Main(argc, argv); }
