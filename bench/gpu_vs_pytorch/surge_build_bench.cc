// The host side of building and loading a CUDA plan of the BERT-base-shaped encoder
// (bert_base_graph.h, random weights), no GPU needed: builder::BuildPlanFromGraph (lowering
// without GEMM tuning where no GPU is visible, FP16 weight conversion, plan assembly), parsing the
// plan (its graph and the backend's blob), and the load-time preparation of the INT8/FP8 layers
// (QuantLinears::Analyze: their weights taken from the plan; before blob version 5, quantised
// from float32). What an accuracy-guard candidate costs the host, per plan. Run it with
// CUDA_VISIBLE_DEVICES= on a GPU machine to keep GEMM tuning (timed once per process) out.
//
//   surge_build_bench [--reps 3] [--precisions fp16,fp8,int8]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bert_base_graph.h"
#include "engine/backends/cuda/lowering.h"
#include "engine/backends/cuda/quant_linear.h"
#include "engine/builder/builder.h"
#include "engine/plan/plan_file.h"
#include "engine/quant/calibrate.h"
#include "engine/quant/quantize.h"
#include "engine/runtime/graph_codec.h"

namespace surge::engine {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  int reps = 3;
  std::string precisions = "fp16,fp8,int8";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    if (a == "--precisions" && i + 1 < argc) precisions = argv[++i];
  }
  auto graph = bench::BertEncoderGraph(2026);
  auto cache = quant::Calibrate(*graph, bench::BertBatches(1, 2, 2, 32, 21128, true), {}, "bert");
  if (!cache.ok()) {
    std::fprintf(stderr, "calibration: %s\n", cache.status().ToString().c_str());
    return 1;
  }
  std::printf("%-6s %10s %10s %14s %14s\n", "plan", "MB", "build s", "parse+decode s",
              "quant load s");
  for (size_t at = 0; at <= precisions.size();) {
    size_t comma = precisions.find(',', at);
    if (comma == std::string::npos) comma = precisions.size();
    const std::string name = precisions.substr(at, comma - at);
    at = comma + 1;
    auto p = ParsePrecision(name);
    if (!p.ok()) {
      std::fprintf(stderr, "%s\n", p.status().ToString().c_str());
      return 2;
    }
    BuilderConfig c;
    c.backend = "cuda";
    c.precision = *p;
    for (const char* input : {"input_ids", "token_type_ids", "attention_mask"}) {
      c.profile.inputs.push_back({input, {1, 1}, {32, 128}, {128, 128}});
    }
    quant::QuantizeOptions o;
    o.guard = false;
    Status st = quant::Quantize(*graph, &*cache, o, &c, nullptr);
    if (!st.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), st.ToString().c_str());
      return 1;
    }
    std::vector<double> build, decode, quant_load;
    size_t bytes_size = 0;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = Clock::now();
      auto bytes = builder::BuildPlanFromGraph(*graph, c);
      const auto t1 = Clock::now();
      if (!bytes.ok()) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), bytes.status().ToString().c_str());
        return 1;
      }
      bytes_size = bytes->size();
      auto plan = plan::PlanFile::FromBytes(
          {reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()});
      if (!plan.ok()) return 1;
      auto g = DecodeGraph(*(*plan)->Section(plan::kGraphSection),
                           *(*plan)->Section(plan::kWeightsSection));
      auto blob = cuda::ParseBlob(*(*plan)->Section(plan::kTacticsSection));
      const auto t2 = Clock::now();
      if (!g.ok() || !blob.ok()) return 1;
      auto program = cuda::AnalyzeGraph(*g, cuda::QuantBaseConfig(c));
      const auto t3 = Clock::now();
      if (!program.ok()) return 1;
      auto q = cuda::QuantLinears::Analyze(*g, *program, c, true, &blob->quant_weights);
      const auto t4 = Clock::now();
      if (!q.ok()) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), q.status().ToString().c_str());
        return 1;
      }
      build.push_back(Seconds(t0, t1));
      decode.push_back(Seconds(t1, t2));
      quant_load.push_back(Seconds(t3, t4));
    }
    std::printf("%-6s %10zu %10.2f %14.2f %14.2f\n", name.c_str(), bytes_size >> 20, Median(build),
                Median(decode), Median(quant_load));
  }
  return 0;
}

}  // namespace
}  // namespace surge::engine

int main(int argc, char** argv) { return surge::engine::Main(argc, argv); }
