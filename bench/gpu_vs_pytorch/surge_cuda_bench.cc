// Times the CUDA backend on the benchmark model that tools/bench/make_bert_base_hf.py writes (a
// BERT-base BertForSequenceClassification Hugging Face folder with random weights, FP16, and
// cases.json with every case's tokens), so that torch_bert.py runs the same weights on the same
// inputs. Per case: median wall time of Execute (input upload, all kernels, logits download,
// synchronise) over repeated runs after warm-up (the first run of a shape captures its CUDA
// graph), the useful FLOPs (real tokens only), and the logits, which torch_bert.py compares with
// PyTorch's.
//
// Engines: padding-free with the default GELU (tanh form fused into the FFN GEMM) for every case;
// padded for the ragged 64-post batch; padding-free with exact erf GELU for 1x128, 128x128 and
// the posts (the price and the numerical effect of exactness).
//
//   surge_cuda_bench --model DIR [--json FILE] [--reps N] [--cases 1x128,128x128]
//                    [--variants padding-free,padded,"padding-free exact-gelu"]
//                    [--tactic-search heuristic|full]
#include <cuda_profiler_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/backends/cuda/cuda_backend.h"
#include "engine/import/importer.h"
#include "engine/ir/graph.h"
#include "engine/passes/passes.h"

namespace surge::engine::cuda {
namespace {

using nlohmann::json;

struct Case {
  std::string name;
  int64_t batch = 0, seq = 0;
  std::vector<int64_t> lengths;
  std::vector<Tensor> inputs;  // in graph-input order
  double flops = 0;
};

// Useful FLOPs of one forward: the multiply-adds the logits need. Every layer but the last: the
// four GEMMs over real tokens and attention over each sequence's real length. The last layer: K
// and V over real tokens, and for [CLS] alone (the only row the pooler reads) Q, attention, the
// projection and the FFN. Then the pooler and classifier on [CLS]. (Rounds before 2026-12-06's
// eleventh counted the last layer on every token as well: 7 % more at 128 tokens.)
double Flops(const json& cfg, const std::vector<int64_t>& lengths, int64_t labels) {
  const double h = cfg["hidden_size"], f = cfg["intermediate_size"], l = cfg["num_hidden_layers"];
  double total = 0;
  for (int64_t n : lengths) {
    total += (l - 1) * (2.0 * n * (h * 3 * h + h * h + 2 * h * f) + 4.0 * n * n * h);
    total += 2.0 * n * h * 2 * h + 2.0 * (h * h + h * h + 2 * h * f) + 4.0 * n * h;
    total += 2.0 * h * h + 2.0 * h * labels;
  }
  return total;
}

Result<std::vector<Case>> LoadCases(const std::string& dir, const ir::Graph& g, const json& cfg) {
  std::ifstream f(dir + "/cases.json");
  if (!f) return NotFoundError("cannot read {}/cases.json (made by make_bert_base_hf.py)", dir);
  const json j = json::parse(f);
  std::vector<Case> out;
  for (const json& c : j["cases"]) {
    Case cs;
    cs.name = c["name"];
    cs.batch = c["batch"];
    cs.seq = c["seq"];
    cs.lengths = c["lengths"].get<std::vector<int64_t>>();
    cs.flops = Flops(cfg, cs.lengths, cfg.value("num_labels", 2));
    for (int v : g.inputs) {
      const std::string& name = g.values[v].name;
      Tensor t(DType::kInt64, {cs.batch, cs.seq});
      int64_t* p = t.data_as<int64_t>();
      for (int64_t b = 0; b < cs.batch; ++b) {
        for (int64_t s = 0; s < cs.seq; ++s) {
          p[b * cs.seq + s] = c.contains(name) ? c[name][b][s].get<int64_t>() : 0;
        }
      }
      cs.inputs.push_back(std::move(t));
    }
    out.push_back(std::move(cs));
  }
  return out;
}

struct Variant {
  std::string name;
  bool padding_free;
  bool exact_gelu;
  std::vector<std::string> cases;  // empty: all
};

int Main(int argc, char** argv) {
  std::string json_path, model;
  std::vector<std::string> only, only_variants;  // --cases, --variants: run only these
  // SURGE_BENCH_PROFILE=<case>: a profiler range around one replay and one eager run of it.
  const char* profile_env = std::getenv("SURGE_BENCH_PROFILE");
  const std::string profile = profile_env ? profile_env : "";
  int reps = 50;
  bool full_search = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    if (a == "--model" && i + 1 < argc) model = argv[++i];
    if (a == "--tactic-search" && i + 1 < argc) {
      const std::string s = argv[++i];
      if (s != "full" && s != "heuristic") {
        std::fprintf(stderr, "--tactic-search: heuristic or full, not '%s'\n", s.c_str());
        return 2;
      }
      full_search = s == "full";
    }
    if ((a == "--cases" || a == "--variants") && i + 1 < argc) {
      std::vector<std::string>& to = a == "--cases" ? only : only_variants;
      const std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        if (comma > at) to.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    }
  }
  if (model.empty()) {
    std::fprintf(stderr,
                 "usage: surge_cuda_bench --model DIR [--json FILE] [--reps N] [--cases A,B] "
                 "[--variants A,B] [--tactic-search heuristic|full]\n");
    return 2;
  }
  Status gpu = CudaDeviceAvailable();
  if (!gpu.ok()) {
    std::fprintf(stderr, "%s\n", gpu.ToString().c_str());
    return 2;
  }
  std::ifstream cf(model + "/config.json");
  const json cfg = json::parse(cf);
  auto imported = import::ImportHuggingFace(model);
  if (!imported.ok()) {
    std::fprintf(stderr, "import: %s\n", imported.status().ToString().c_str());
    return 1;
  }
  auto graph = std::make_shared<ir::Graph>(std::move(imported).value());
  passes::PassReport pass_report;
  Status opt = passes::Optimize(*graph, passes::PassOptions{}, &pass_report);
  if (!opt.ok()) {
    std::fprintf(stderr, "optimize: %s\n", opt.ToString().c_str());
    return 1;
  }
  auto cases = LoadCases(model, *graph, cfg);
  if (!cases.ok()) {
    std::fprintf(stderr, "%s\n", cases.status().ToString().c_str());
    return 1;
  }
  // Unknown --cases / --variants names are an error, not an empty run.
  for (const std::string& name : only) {
    if (std::none_of(cases->begin(), cases->end(), [&](const Case& c) { return c.name == name; })) {
      std::fprintf(stderr, "--cases: no case '%s' in %s/cases.json\n", name.c_str(), model.c_str());
      return 2;
    }
  }
  int logits = -1;
  for (size_t i = 0; i < graph->outputs.size(); ++i) {
    if (graph->values[graph->outputs[i]].name == "logits") logits = static_cast<int>(i);
  }
  if (logits < 0) {
    std::fprintf(stderr, "the model has no 'logits' output\n");
    return 1;
  }

  const std::vector<Variant> variants = {
      {"padding-free", true, false, {}},
      {"padded", false, false, {"64posts"}},
      {"padding-free exact-gelu", true, true, {"1x128", "128x128", "64posts"}}};
  for (const std::string& name : only_variants) {
    if (std::none_of(variants.begin(), variants.end(),
                     [&](const Variant& v) { return v.name == name; })) {
      std::fprintf(stderr,
                   "--variants: no variant '%s' (padding-free, padded, "
                   "padding-free exact-gelu)\n",
                   name.c_str());
      return 2;
    }
  }
  json results = json::array();
  for (const Variant& var : variants) {
    if (!only_variants.empty() &&
        std::find(only_variants.begin(), only_variants.end(), var.name) == only_variants.end()) {
      continue;
    }
    BuilderConfig c;
    c.backend = "cuda";
    c.precision = Precision::kFp16;
    c.padding_free = var.padding_free;
    c.timing_cache_path = "surge_gemm_timing_cache.txt";  // later engines reuse the tunings
    c.full_tactic_search = full_search;
    for (int v : graph->inputs) {
      c.profile.inputs.push_back({graph->values[v].name, {1, 1}, {32, 128}, {256, 128}});
    }
    if (var.exact_gelu) setenv("SURGE_CUDA_EXACT_GELU", "1", 1);
    auto backend = CreateCudaBackend();
    auto t0 = std::chrono::steady_clock::now();
    auto blob = backend->Lower(*graph, c);
    unsetenv("SURGE_CUDA_EXACT_GELU");
    if (!blob.ok()) {
      std::fprintf(stderr, "lower: %s\n", blob.status().ToString().c_str());
      return 1;
    }
    const double lower_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto engine = backend->Load(
        graph,
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(blob->data()), blob->size()), c,
        {});
    if (!engine.ok()) {
      std::fprintf(stderr, "load: %s\n", engine.status().ToString().c_str());
      return 1;
    }
    auto ctx = (*engine)->CreateContext();
    if (!ctx.ok()) {
      std::fprintf(stderr, "context: %s\n", ctx.status().ToString().c_str());
      return 1;
    }
    std::printf("== %s: lower (GEMM tuning) %.2f s\n", var.name.c_str(), lower_s);
    if (&var == &variants[0]) std::printf("%s", (*engine)->Describe().substr(0, 2400).c_str());
    for (const Case& cs : *cases) {
      if (!var.cases.empty() &&
          std::find(var.cases.begin(), var.cases.end(), cs.name) == var.cases.end()) {
        continue;
      }
      if (!only.empty() && std::find(only.begin(), only.end(), cs.name) == only.end()) continue;
      std::vector<Tensor> out;
      for (int i = 0; i < 5; ++i) {
        Status st = (*ctx)->Execute(cs.inputs, &out);
        if (!st.ok()) {
          std::fprintf(stderr, "%s: %s\n", cs.name.c_str(), st.ToString().c_str());
          return 1;
        }
      }
      const Tensor result = out[logits].ToFloat32();
      const bool breakdown = &var == &variants[0] &&
                             (cs.name == "128x128" || cs.name == "1x128" || cs.name == "64posts");
      if (breakdown) {
        // Per-kernel-group device times of a warm eager run (no CUDA graph), then the device
        // time of the captured graph's replay; both logged by the backend (SURGE_CUDA_OP_TIMES).
        for (const char* graphs : {"0", "1"}) {
          setenv("SURGE_CUDA_OP_TIMES", "1", 1);
          setenv("SURGE_CUDA_GRAPHS", graphs, 1);
          auto probe = (*engine)->CreateContext();
          unsetenv("SURGE_CUDA_OP_TIMES");
          unsetenv("SURGE_CUDA_GRAPHS");
          if (!probe.ok()) continue;
          std::vector<Tensor> scratch;
          (void)(*probe)->Execute(cs.inputs, &scratch);
          std::printf("%s %s (warm run, CUDA graph %s):\n", cs.name.c_str(), var.name.c_str(),
                      graphs[0] == '1' ? "replay" : "off: eager");
          std::fflush(stdout);
          for (int i = 0; i < (graphs[0] == '1' ? 3 : 1); ++i)
            (void)(*probe)->Execute(cs.inputs, &scratch);
          std::fflush(stderr);
        }
      }
      std::vector<double> ms;
      for (int i = 0; i < reps; ++i) {
        auto a = std::chrono::steady_clock::now();
        (void)(*ctx)->Execute(cs.inputs, &out);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a)
                         .count());
      }
      if (profile == cs.name && &var == &variants[0]) {
        // One graph replay and one eager run inside a profiler range, for
        // `ncu --profile-from-start off` (per-kernel device times without launch gaps).
        setenv("SURGE_CUDA_GRAPHS", "0", 1);
        auto eager = (*engine)->CreateContext();
        unsetenv("SURGE_CUDA_GRAPHS");
        std::vector<Tensor> scratch;
        if (eager.ok()) (void)(*eager)->Execute(cs.inputs, &scratch);
        cudaProfilerStart();
        (void)(*ctx)->Execute(cs.inputs, &out);
        if (eager.ok()) (void)(*eager)->Execute(cs.inputs, &scratch);
        cudaProfilerStop();
      }
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2];
      int64_t real = 0;
      for (int64_t l : cs.lengths) real += l;
      std::printf(
          "%-8s %-24s tokens %6lld/%6lld  median %8.3f ms  p10 %8.3f  p90 %8.3f  %7.1f TFLOP/s\n",
          cs.name.c_str(), var.name.c_str(), static_cast<long long>(real),
          static_cast<long long>(cs.batch * cs.seq), med, ms[ms.size() / 10],
          ms[ms.size() * 9 / 10], cs.flops / med * 1e-9);
      std::vector<float> lg(result.data_as<float>(), result.data_as<float>() + result.numel());
      results.push_back({{"shape", cs.name},
                         {"variant", var.name},
                         {"padding_free", var.padding_free},
                         {"tactic_search", full_search ? "full" : "heuristic"},
                         {"exact_gelu", var.exact_gelu},
                         {"batch", cs.batch},
                         {"seq", cs.seq},
                         {"real_tokens", real},
                         {"flops", cs.flops},
                         {"median_ms", med},
                         {"p10_ms", ms[ms.size() / 10]},
                         {"p90_ms", ms[ms.size() * 9 / 10]},
                         {"reps", reps},
                         {"lower_s", lower_s},
                         {"logits", lg}});
    }
  }
  json doc = {{"device", "H200"},
              {"model",
               "BertForSequenceClassification, BERT-base shape, random weights "
               "(tools/bench/make_bert_base_hf.py), fp16"},
              {"results", results}};
  if (!json_path.empty()) std::ofstream(json_path) << doc.dump() << "\n";
  return 0;
}

}  // namespace
}  // namespace surge::engine::cuda

int main(int argc, char** argv) { return surge::engine::cuda::Main(argc, argv); }
