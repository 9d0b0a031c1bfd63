// Times the CUDA backend on a BERT-base-shaped fused encoder (12 layers, hidden 768, 12 heads,
// FFN 3072, vocab 21128, random weights, FP16) with a pooled [CLS] output, per batch shape: median
// wall time of Execute (input upload, all kernels, pooled download, synchronise) over repeated
// runs after warm-up (the first run of a shape captures its CUDA graph). The Weibo-like batch
// (64 posts, log-normal lengths) runs padded and padding-free.
//
//   surge_cuda_bench [--json FILE] [--reps N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/backends/cuda/cuda_backend.h"
#include "engine/ir/graph.h"

namespace surge::engine::cuda {
namespace {

constexpr int64_t kH = 768, kHeads = 12, kFfn = 3072, kVocab = 21128, kLayers = 12, kMaxPos = 512;

std::shared_ptr<ir::Graph> BertBase(std::mt19937& rng) {
  auto g = std::make_shared<ir::Graph>();
  std::normal_distribution<float> nd(0.f, 0.02f);
  auto w = [&](const std::string& name, Shape s, float mean = 0.f) {
    Tensor t(DType::kFloat32, std::move(s));
    for (float& v : t.span<float>()) v = mean + nd(rng);
    return g->AddConstant(name, t);
  };
  const ir::SymShape bs = {ir::Dim::Symbol("batch"), ir::Dim::Symbol("seq")};
  const int ids = g->AddInput("input_ids", DType::kInt64, bs);
  const int types = g->AddInput("token_type_ids", DType::kInt64, bs);
  const int mask = g->AddInput("attention_mask", DType::kInt64, bs);
  auto node = [&](std::string op, std::vector<int> in, std::map<std::string, ir::Attribute> attrs,
                  std::string domain = "surge") {
    ir::Node n;
    n.op_type = op;
    n.domain = domain;
    n.name = g->UniqueName(op);
    n.inputs = std::move(in);
    n.attrs = std::move(attrs);
    n.outputs = {g->AddValue(n.name + "_out", DType::kFloat32)};
    g->AddNode(n);
    return g->nodes.back().outputs[0];
  };
  int x = node("EmbedLayerNorm",
               {ids, types, -1, w("word", {kVocab, kH}), w("pos", {kMaxPos, kH}),
                w("type", {2, kH}), w("eg", {kH}, 1.f), w("eb", {kH}), mask},
               {{"epsilon", 1e-12}});
  for (int l = 0; l < kLayers; ++l) {
    const int qkv = node("Linear", {x, w("wqkv", {kH, 3 * kH}), w("bqkv", {3 * kH})}, {});
    const int att = node("Attention", {qkv, mask}, {{"num_heads", kHeads}});
    const int proj = node("Linear", {att, w("wo", {kH, kH}), w("bo", {kH})}, {});
    const int ln1 =
        node("SkipLayerNorm", {proj, x, w("g1", {kH}, 1.f), w("b1", {kH})}, {{"epsilon", 1e-12}});
    const int ff = node("Linear", {ln1, w("w1", {kH, kFfn}), w("bf1", {kFfn})},
                        {{"activation", std::string("gelu")}});
    const int ff2 = node("Linear", {ff, w("w2", {kFfn, kH}), w("bf2", {kH})}, {});
    x = node("SkipLayerNorm", {ff2, ln1, w("g2", {kH}, 1.f), w("b2", {kH})}, {{"epsilon", 1e-12}});
  }
  Tensor zero(DType::kInt64, Shape{});
  const int cls = node("Gather", {x, g->AddConstant("zero", zero)}, {{"axis", int64_t{1}}}, "");
  g->outputs.push_back(node("Linear", {cls, w("wp", {kH, kH}), w("bp", {kH})},
                            {{"activation", std::string("tanh")}}));
  return g;
}

struct Case {
  std::string name;
  int64_t batch, seq;
  std::vector<int64_t> lens;  // real tokens per sequence
};

int Main(int argc, char** argv) {
  std::string json_path;
  int reps = 50;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
  }
  Status gpu = CudaDeviceAvailable();
  if (!gpu.ok()) {
    std::fprintf(stderr, "%s\n", gpu.ToString().c_str());
    return 2;
  }
  std::mt19937 rng(2026);
  auto graph = BertBase(rng);
  std::vector<Case> cases = {{"1x32", 1, 32, {}},      {"1x128", 1, 128, {}},
                             {"8x128", 8, 128, {}},    {"32x128", 32, 128, {}},
                             {"128x64", 128, 64, {}},  {"128x128", 128, 128, {}},
                             {"256x128", 256, 128, {}}};
  // 64 posts, log-normal lengths (mean about 41, capped at 113), padded to the longest.
  std::lognormal_distribution<double> ln(3.55, 0.45);
  std::vector<int64_t> posts;
  for (int i = 0; i < 64; ++i) posts.push_back(std::clamp<int64_t>(std::lround(ln(rng)), 4, 113));
  const int64_t longest = *std::max_element(posts.begin(), posts.end());
  double mean_len = 0;
  for (int64_t l : posts) mean_len += l / 64.0;
  cases.push_back({"64posts", 64, longest, posts});

  std::string json =
      "{\"device\":\"H200\",\"model\":\"bert-base shape, random weights, fp16, pooled "
      "output\",\"results\":[";
  bool first = true;
  for (bool padding_free : {true, false}) {
    BuilderConfig c;
    c.backend = "cuda";
    c.precision = Precision::kFp16;
    c.padding_free = padding_free;
    for (const char* name : {"input_ids", "token_type_ids", "attention_mask"}) {
      c.profile.inputs.push_back({name, {1, 1}, {32, 128}, {256, 128}});
    }
    auto backend = CreateCudaBackend();
    auto t0 = std::chrono::steady_clock::now();
    auto blob = backend->Lower(*graph, c);
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
    std::printf("padding_free=%d: lower (GEMM tuning) %.2f s\n", padding_free, lower_s);
    if (padding_free) std::printf("%s", (*engine)->Describe().substr(0, 400).c_str());
    for (const Case& cs : cases) {
      if (!padding_free && cs.name != "64posts") continue;  // padded differs only with padding
      // One eager run with per-kernel-group device times logged (SURGE_CUDA_OP_TIMES), on a
      // fresh context, for the shapes that show where time goes.
      const bool breakdown = cs.name == "128x128" || cs.name == "1x128" || cs.name == "64posts";
      Tensor ids(DType::kInt64, {cs.batch, cs.seq}), types(DType::kInt64, {cs.batch, cs.seq}),
          mask(DType::kInt64, {cs.batch, cs.seq});
      std::uniform_int_distribution<int64_t> id(1000, kVocab - 1);
      int64_t real = 0;
      for (int64_t b = 0; b < cs.batch; ++b) {
        const int64_t len = cs.lens.empty() ? cs.seq : cs.lens[b];
        for (int64_t s = 0; s < cs.seq; ++s) {
          ids.data_as<int64_t>()[b * cs.seq + s] = s < len ? id(rng) : 0;
          types.data_as<int64_t>()[b * cs.seq + s] = 0;
          mask.data_as<int64_t>()[b * cs.seq + s] = s < len;
          real += s < len;
        }
      }
      std::vector<Tensor> in = {ids, types, mask}, out;
      for (int i = 0; i < 5; ++i) {
        Status st = (*ctx)->Execute(in, &out);
        if (!st.ok()) {
          std::fprintf(stderr, "%s: %s\n", cs.name.c_str(), st.ToString().c_str());
          return 1;
        }
      }
      if (breakdown) {
        // Eager (no CUDA graph) so each run records its marks; the second run is the warm one.
        setenv("SURGE_CUDA_OP_TIMES", "1", 1);
        setenv("SURGE_CUDA_GRAPHS", "0", 1);
        auto probe = (*engine)->CreateContext();
        unsetenv("SURGE_CUDA_OP_TIMES");
        unsetenv("SURGE_CUDA_GRAPHS");
        if (probe.ok()) {
          (void)(*probe)->Execute(in, &out);
          std::printf("%s padding_free=%d kernel breakdown (warm eager run):\n", cs.name.c_str(),
                      padding_free);
          std::fflush(stdout);
          (void)(*probe)->Execute(in, &out);
          std::fflush(stderr);
        }
      }
      std::vector<double> ms;
      for (int i = 0; i < reps; ++i) {
        auto a = std::chrono::steady_clock::now();
        (void)(*ctx)->Execute(in, &out);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a)
                         .count());
      }
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2];
      std::printf(
          "%-8s padding_free=%d tokens %6lld/%6lld  median %8.3f ms  p10 %8.3f  p90 %8.3f  %9.0f "
          "real tok/s\n",
          cs.name.c_str(), padding_free, static_cast<long long>(real),
          static_cast<long long>(cs.batch * cs.seq), med, ms[ms.size() / 10],
          ms[ms.size() * 9 / 10], real / med * 1000.0);
      json += fmt::format(
          "{}{{\"shape\":\"{}\",\"batch\":{},\"seq\":{},\"real_tokens\":{},\"padding_free\":{},"
          "\"median_ms\":{:.4f},\"p10_ms\":{:.4f},\"p90_ms\":{:.4f},\"reps\":{}}}",
          first ? "" : ",", cs.name, cs.batch, cs.seq, real, padding_free, med, ms[ms.size() / 10],
          ms[ms.size() * 9 / 10], reps);
      first = false;
    }
  }
  json += fmt::format("],\"posts_mean_len\":{:.1f},\"posts_max_len\":{}}}\n", mean_len, longest);
  if (!json_path.empty()) std::ofstream(json_path) << json;
  return 0;
}

}  // namespace
}  // namespace surge::engine::cuda

int main(int argc, char** argv) { return surge::engine::cuda::Main(argc, argv); }
