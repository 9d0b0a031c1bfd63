// Whether one persistent kernel could run a small batch's encoder faster than the engine's
// kernels launched one by one: the GEMM chain of a BERT-class encoder at 128 token rows (per
// layer QKV, attention projection + residual, FFN1 + GELU, FFN2 + residual; [N,K] weights, FP16)
// run as one kernel (persistent_gemm_chain.h) against the engine's tuned cuBLASLt GEMMs (TuneGemm,
// GemmPlan) replayed from a CUDA graph, on the same weights and inputs. Attention and LayerNorm
// are left out (the projection reads a fixed stand-in for the attention output), so the figures
// say what the GEMMs, and the grid-wide barriers between them, would cost inside such a kernel.
//
//   surge_persistent_gemm_bench [--layers 12] [--hidden 768] [--ffn 3072] [--cluster 4,8]
//                               [--kblock 32,64] [--persistent on|off] [--reps 200]
// Prints one JSON object: ms per forward (median of 5 samples of `reps` graph replays) of the
// cuBLASLt chain, of the same chain on the FP16 GEMM of our own (one tile for every GEMM; with
// programmatic dependent launch unless SURGE_CUDA_PDL=0), of the persistent kernel per cluster size
// and of its barriers alone, and how close the persistent kernel's output is to the cuBLASLt
// chain's. Per configuration four variants: weights copied row by row, pre-tiled (one copy per CTA
// share), pre-tiled with each cluster starting its K loop at another k-block
// (ChainConfig::stagger), and pre-tiled with the next weights copied after the K loop
// (ChainConfig::late_weights).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_cuda.h"
#include "engine/backends/cuda/gemm.h"
#include "engine/backends/cuda/qgemm_kernels.h"
#include "persistent_gemm_chain.h"

namespace surge::engine::cuda {
namespace {

using nlohmann::json;
constexpr int kRows = kChainRows;

bool ParseList(const std::string& s, std::vector<int>* out) {
  out->clear();
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v <= 0) return false;
    out->push_back(static_cast<int>(v));
  }
  return !out->empty();
}

__half* DeviceRandom(size_t count, float bound, std::mt19937* rng) {
  std::uniform_real_distribution<float> dist(-bound, bound);
  std::vector<uint16_t> h(count);
  for (auto& v : h) {
    const __half_raw x = __float2half(dist(*rng));
    v = x.x;
  }
  __half* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, count * sizeof(__half)));
  CHECK_CUDA(cudaMemcpy(d, h.data(), count * sizeof(__half), cudaMemcpyHostToDevice));
  return d;
}

__half* DeviceZeros(size_t count) {
  __half* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, count * sizeof(__half)));
  CHECK_CUDA(cudaMemset(d, 0, count * sizeof(__half)));
  return d;
}

std::vector<uint16_t> HostBits(const __half* d, size_t count) {
  std::vector<uint16_t> h(count);
  CHECK_CUDA(cudaMemcpy(h.data(), d, count * 2, cudaMemcpyDeviceToHost));
  return h;
}

// What `enqueue` puts on `stream`, captured and instantiated as a graph.
template <typename Fn>
cudaGraphExec_t Capture(Fn&& enqueue, cudaStream_t stream) {
  cudaGraph_t g;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  enqueue();
  CHECK_CUDA(cudaStreamEndCapture(stream, &g));
  CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
  cudaGraphDestroy(g);
  return exec;
}

// Median over 5 samples of `reps` replays of `graph`, ms per replay.
float TimeGraph(cudaGraphExec_t graph, cudaStream_t stream, int reps) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 10; ++i) CHECK_CUDA(cudaGraphLaunch(graph, stream));
  std::vector<float> samples;
  for (int s = 0; s < 5; ++s) {
    CHECK_CUDA(cudaEventRecord(a, stream));
    for (int i = 0; i < reps; ++i) CHECK_CUDA(cudaGraphLaunch(graph, stream));
    CHECK_CUDA(cudaEventRecord(b, stream));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0.f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    samples.push_back(ms / reps);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(samples.begin(), samples.end());
  return samples[2];
}

std::vector<float> ToHost(const __half* d, size_t count) {
  const std::vector<uint16_t> h = HostBits(d, count);
  std::vector<float> f(count);
  for (size_t i = 0; i < count; ++i) {
    __half_raw x;
    x.x = h[i];
    f[i] = __half2float(__half(x));
  }
  return f;
}

// How close `got` is to `want` (the cuBLASLt chain's output), into `r`.
void Closeness(const std::vector<float>& got, const std::vector<float>& want, json* r) {
  double max_diff = 0, max_ref = 0, dot = 0, n_got = 0, n_want = 0;
  bool finite = true;
  for (size_t i = 0; i < got.size(); ++i) {
    finite = finite && std::isfinite(got[i]);
    max_diff = std::max(max_diff, double(std::fabs(got[i] - want[i])));
    max_ref = std::max(max_ref, double(std::fabs(want[i])));
    dot += double(got[i]) * want[i];
    n_got += double(got[i]) * got[i];
    n_want += double(want[i]) * want[i];
  }
  (*r)["finite"] = finite;
  (*r)["max_abs_diff"] = max_diff;
  (*r)["max_abs_ref"] = max_ref;
  (*r)["cosine"] = dot / std::sqrt(n_got * n_want + 1e-30);
}

// One persistent configuration on `phases`: its output against `want` (the cuBLASLt chain's),
// its graph-replay time, with `parts` the times of its parts alone, and where a phase's time goes.
json Measure(const ChainConfig& config, const std::vector<ChainPhase>& phases, __half* in,
             const __half* x0, const __half* out, const std::vector<float>& want,
             cudaStream_t stream, unsigned* barrier, int reps, bool parts) {
  json r;
  const int n = static_cast<int>(phases.size());
  ChainPhase* dev_phases = nullptr;
  CHECK_CUDA(cudaMalloc(&dev_phases, phases.size() * sizeof(ChainPhase)));
  CHECK_CUDA(cudaMemcpy(dev_phases, phases.data(), phases.size() * sizeof(ChainPhase),
                        cudaMemcpyHostToDevice));
  // The chain's input again (an even layer count writes its output over it).
  CHECK_CUDA(cudaMemcpyAsync(in, x0, want.size() * 2, cudaMemcpyDeviceToDevice, stream));
  CHECK_CUDA(LaunchChain(config, dev_phases, n, barrier, ChainWork::kFull, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  Closeness(ToHost(out, want.size()), want, &r);
  std::vector<std::pair<ChainWork, const char*>> works = {{ChainWork::kFull, "graph_ms"}};
  if (parts) {
    works.push_back({ChainWork::kBarriersOnly, "barriers_only_graph_ms"});
    works.push_back({ChainWork::kNoMma, "without_mma_graph_ms"});
    works.push_back({ChainWork::kNoEpilogue, "without_cluster_epilogue_graph_ms"});
  }
  for (const auto& [work, name] : works) {
    cudaGraphExec_t ge = Capture(
        [&] { CHECK_CUDA(LaunchChain(config, dev_phases, n, barrier, work, stream)); }, stream);
    r[name] = TimeGraph(ge, stream, reps);
    cudaGraphExecDestroy(ge);
  }
  // Where a phase's time goes: SM cycles between the marks, by GEMM of the layer (mean over
  // layers and CTAs, and the slowest CTA's mean), from one more run with the marks on.
  const int ctas = config.clusters * config.cs;
  const size_t count = size_t(ctas) * n * kChainMarks;
  long long* marks = nullptr;
  CHECK_CUDA(cudaMalloc(&marks, count * sizeof(long long)));
  CHECK_CUDA(LaunchChain(config, dev_phases, n, barrier, ChainWork::kFull, stream, marks));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::vector<long long> m(count);
  CHECK_CUDA(cudaMemcpy(m.data(), marks, count * sizeof(long long), cudaMemcpyDeviceToHost));
  cudaFree(marks);
  cudaFree(dev_phases);
  const char* names[] = {"qkv", "projection", "ffn1", "ffn2"};
  const char* steps[] = {"weights_wait", "k_loop", "cluster_sync", "epilogue", "grid_barrier"};
  json split;
  for (int kind = 0; kind < 4; ++kind) {
    json per;
    for (int st = 0; st < kChainMarks - 1; ++st) {
      double sum = 0, worst = 0;
      for (int b = 0; b < ctas; ++b) {
        double cta = 0;
        int of_kind = 0;
        for (int ph = kind; ph < n; ph += 4) {
          const long long* at = &m[(size_t(b) * n + ph) * kChainMarks];
          cta += double(at[st + 1] - at[st]);
          ++of_kind;
        }
        cta /= std::max(of_kind, 1);
        sum += cta;
        worst = std::max(worst, cta);
      }
      per[steps[st]] = {{"mean_cycles", std::lround(sum / ctas)},
                        {"slowest_cta_cycles", std::lround(worst)}};
    }
    split[names[kind]] = per;
  }
  r["cycles_per_phase"] = split;
  return r;
}

int Main(int argc, char** argv) {
  int layers = 12, hidden = 768, ffn = 3072, reps = 200;
  std::vector<int> cluster_sizes = {4, 8};
  std::vector<int> kblocks = {32, 64};
  bool persistent = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    bool ok = v != nullptr;
    if (arg == "--layers" && ok) {
      layers = std::atoi(v);
    } else if (arg == "--hidden" && ok) {
      hidden = std::atoi(v);
    } else if (arg == "--ffn" && ok) {
      ffn = std::atoi(v);
    } else if (arg == "--reps" && ok) {
      reps = std::atoi(v);
    } else if (arg == "--cluster" && ok) {
      ok = ParseList(v, &cluster_sizes);
    } else if (arg == "--kblock" && ok) {
      ok = ParseList(v, &kblocks);
    } else if (arg == "--persistent" && ok) {
      ok = std::string(v) == "on" || std::string(v) == "off";
      persistent = std::string(v) == "on";
    } else {
      ok = false;
    }
    if (!ok || layers <= 0 || hidden <= 0 || ffn <= 0 || reps <= 0) {
      std::fprintf(stderr,
                   "usage: surge_persistent_gemm_bench [--layers N] [--hidden H] [--ffn F] "
                   "[--cluster 4,8] [--kblock 32,64] [--persistent on|off] [--reps R]\n");
      return 2;
    }
    ++i;
  }

  std::mt19937 rng(7);
  struct Layer {
    __half *wq, *bq, *wo, *bo, *w1, *b1, *w2, *b2;
  };
  std::vector<Layer> ws(layers);
  for (auto& l : ws) {
    const float bh = 1.f / std::sqrt(static_cast<float>(hidden));
    const float bf = 1.f / std::sqrt(static_cast<float>(ffn));
    l.wq = DeviceRandom(size_t{3} * hidden * hidden, bh, &rng);
    l.bq = DeviceRandom(3 * hidden, 0.1f, &rng);
    l.wo = DeviceRandom(size_t{1} * hidden * hidden, bh, &rng);
    l.bo = DeviceRandom(hidden, 0.1f, &rng);
    l.w1 = DeviceRandom(size_t{1} * ffn * hidden, bh, &rng);
    l.b1 = DeviceRandom(ffn, 0.1f, &rng);
    l.w2 = DeviceRandom(size_t{1} * hidden * ffn, bf, &rng);
    l.b2 = DeviceRandom(hidden, 0.1f, &rng);
  }
  __half* x0 = DeviceRandom(size_t{kRows} * hidden, 1.f, &rng);
  __half* att = DeviceRandom(size_t{kRows} * hidden, 1.f, &rng);  // stands in for attention

  // One chain's buffers; `out` is the last layer's output.
  struct Chain {
    __half *x[2], *yq, *yo, *yf;
  };
  auto make_chain = [&] {
    Chain c;
    c.x[0] = DeviceZeros(size_t{kRows} * hidden);
    c.x[1] = DeviceZeros(size_t{kRows} * hidden);
    c.yq = DeviceZeros(size_t{kRows} * 3 * hidden);
    c.yo = DeviceZeros(size_t{kRows} * hidden);
    c.yf = DeviceZeros(size_t{kRows} * ffn);
    CHECK_CUDA(cudaMemcpy(c.x[0], x0, size_t{kRows} * hidden * 2, cudaMemcpyDeviceToDevice));
    return c;
  };
  auto phases_of = [&](Chain& c) {
    std::vector<ChainPhase> ph;
    for (int l = 0; l < layers; ++l) {
      __half* in = c.x[l & 1];
      __half* out = c.x[(l + 1) & 1];
      ph.push_back({in, ws[l].wq, ws[l].bq, nullptr, c.yq, 3 * hidden, hidden, 0});
      ph.push_back({att, ws[l].wo, ws[l].bo, in, c.yo, hidden, hidden, 0});
      ph.push_back({c.yo, ws[l].w1, ws[l].b1, nullptr, c.yf, ffn, hidden, 1});
      ph.push_back({c.yf, ws[l].w2, ws[l].b2, c.yo, out, hidden, ffn, 0});
    }
    return ph;
  };

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  int clock_khz = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  json report = {{"device", prop.name},
                 {"sms", prop.multiProcessorCount},
                 {"sm_clock_khz", clock_khz},
                 {"layers", layers},
                 {"hidden", hidden},
                 {"ffn", ffn},
                 {"rows", kRows},
                 {"reps", reps}};

  // The engine's GEMMs: cuBLASLt, tuned as the engine tunes them, replayed from a graph.
  Chain ref = make_chain();
  std::vector<ChainPhase> ref_phases = phases_of(ref);
  cublasLtHandle_t lt;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasLtCreate failed\n");
    return 1;
  }
  constexpr size_t kWs = size_t{32} << 20;
  void* gemm_ws = nullptr;
  CHECK_CUDA(cudaMalloc(&gemm_ws, kWs));
  std::vector<std::unique_ptr<GemmPlan>> plans;
  json tuned = json::array();
  {
    std::map<std::string, GemmAlgo> algos;
    for (const ChainPhase& ph : ref_phases) {
      GemmDesc d;
      d.m = kRows;
      d.n = ph.n;
      d.k = ph.k;
      d.epilogue = ph.gelu ? GemmEpilogue::kBiasGeluTanh : GemmEpilogue::kBias;
      d.residual = ph.residual != nullptr;
      d.weight_nk = true;
      auto it = algos.find(d.Key());
      if (it == algos.end()) {
        auto algo = TuneGemm(lt, d, kWs, stream);
        if (!algo.ok()) {
          std::fprintf(stderr, "tuning %s: %s\n", d.Key().c_str(), algo.status().message().c_str());
          return 1;
        }
        it = algos.emplace(d.Key(), *algo).first;
        tuned.push_back({{"gemm", d.Key()}, {"us", it->second.time_us}});
      }
      auto plan = GemmPlan::Create(lt, d, it->second, kWs);
      if (!plan.ok()) {
        std::fprintf(stderr, "plan %s: %s\n", d.Key().c_str(), plan.status().message().c_str());
        return 1;
      }
      plans.push_back(std::move(*plan));
    }
  }
  report["cublaslt_tuned"] = tuned;
  auto run_ref = [&] {
    for (size_t i = 0; i < ref_phases.size(); ++i) {
      const ChainPhase& ph = ref_phases[i];
      const Status st =
          plans[i]->Run(lt, ph.a, ph.w, ph.bias, ph.residual, ph.out, gemm_ws, kWs, stream);
      if (!st.ok()) {
        std::fprintf(stderr, "gemm %zu: %s\n", i, st.message().c_str());
        std::exit(1);
      }
    }
  };
  run_ref();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  const std::vector<float> want = ToHost(ref.x[layers & 1], size_t{kRows} * hidden);
  cudaGraphExec_t ref_graph = Capture(run_ref, stream);
  const float ref_ms = TimeGraph(ref_graph, stream, reps);
  report["cublaslt_graph_ms"] = ref_ms;
  report["cublaslt_graph_nodes"] = ref_phases.size();

  // The same chain on the FP16 GEMM of our own (qgemm_kernels.h, QGemmArgs::half: CUTLASS's
  // warp-specialised ping-pong kernels with the epilogue fused), one tile for every GEMM, replayed
  // from a graph. They are launched with programmatic dependent launch unless SURGE_CUDA_PDL=0, so
  // each may start while the one before it finishes; cuBLASLt's are not.
  const char* pdl_env = std::getenv("SURGE_CUDA_PDL");
  report["pdl"] = !(pdl_env && pdl_env[0] == '0');
  json own = json::array();
  for (int tile : {1, 2}) {
    json o = {{"tile", QGemmTileName(tile)}};
    Chain c = make_chain();
    std::vector<QGemmArgs> args;
    for (const ChainPhase& ph : phases_of(c)) {
      QGemmArgs a;
      a.half = true;
      a.m = kRows;
      a.n = ph.n;
      a.k = ph.k;
      a.x = ph.a;
      a.w = ph.w;
      a.bias = ph.bias;
      a.activation = ph.gelu ? Activation::kGeluTanh : Activation::kNone;
      a.residual = ph.residual;
      a.y = ph.out;
      a.tile = tile;
      if (!QGemmCanImplement(a) || QGemmWorkspaceSize(a) > kWs) {
        o["skipped"] = "the tile cannot run " + std::to_string(ph.n) + " x " + std::to_string(ph.k);
        break;
      }
      args.push_back(a);
    }
    if (o.contains("skipped")) {
      own.push_back(o);
      continue;
    }
    auto run = [&] {
      for (const QGemmArgs& a : args) CHECK_CUDA(QGemmRun(a, gemm_ws, stream));
    };
    run();
    CHECK_CUDA(cudaStreamSynchronize(stream));
    Closeness(ToHost(c.x[layers & 1], size_t{kRows} * hidden), want, &o);
    cudaGraphExec_t own_graph = Capture(run, stream);
    o["graph_ms"] = TimeGraph(own_graph, stream, reps);
    cudaGraphExecDestroy(own_graph);
    own.push_back(o);
  }
  report["own_fp16"] = own;

  unsigned* barrier = nullptr;
  CHECK_CUDA(cudaMalloc(&barrier, sizeof(unsigned)));
  json configs = json::array();
  std::vector<std::pair<int, int>> shapes;
  for (int cs : cluster_sizes) {
    for (int kb : kblocks) shapes.push_back({cs, kb});
  }
  if (!persistent) shapes.clear();
  for (const auto& [cs, kb] : shapes) {
    json cfg = {{"cluster", cs}, {"kblock", kb}};
    Chain c = make_chain();
    std::vector<ChainPhase> phases = phases_of(c);
    ChainConfig config;
    std::string why;
    if (!PlanChain(phases, cs, kb, prop.multiProcessorCount, &config, &why)) {
      cfg["skipped"] = why;
      configs.push_back(cfg);
      continue;
    }
    int max_clusters = 0;
    CHECK_CUDA(ChainMaxActiveClusters(config, &max_clusters));
    cfg["clusters"] = config.clusters;
    cfg["ctas"] = config.clusters * cs;
    cfg["max_active_clusters"] = max_clusters;
    cfg["smem_bytes"] = config.smem_bytes;
    if (max_clusters < config.clusters) {
      cfg["skipped"] = "not every cluster can be resident";
      configs.push_back(cfg);
      continue;
    }
    // Weights as [N,K] (one bulk copy per row of a CTA's share) and pre-tiled (one per share).
    std::vector<ChainPhase> tiled = phases;
    std::vector<__half*> tiled_bufs;
    for (ChainPhase& ph : tiled) {
      const std::vector<uint16_t> t =
          TileChainWeight(HostBits(ph.w, size_t(ph.n) * ph.k), ph.n, ph.k, config);
      __half* d = nullptr;
      CHECK_CUDA(cudaMalloc(&d, t.size() * 2));
      CHECK_CUDA(cudaMemcpy(d, t.data(), t.size() * 2, cudaMemcpyHostToDevice));
      ph.w_tiled = d;
      tiled_bufs.push_back(d);
    }
    cfg["weights_by_row"] =
        Measure(config, phases, c.x[0], x0, c.x[layers & 1], want, stream, barrier, reps,
                /*parts=*/false);
    cfg["weights_tiled"] =
        Measure(config, tiled, c.x[0], x0, c.x[layers & 1], want, stream, barrier, reps,
                /*parts=*/true);
    ChainConfig staggered = config;
    staggered.stagger = true;
    cfg["weights_tiled_staggered"] =
        Measure(staggered, tiled, c.x[0], x0, c.x[layers & 1], want, stream, barrier, reps,
                /*parts=*/false);
    ChainConfig late = config;
    late.late_weights = true;
    cfg["weights_tiled_late"] =
        Measure(late, tiled, c.x[0], x0, c.x[layers & 1], want, stream, barrier, reps,
                /*parts=*/false);
    for (__half* d : tiled_bufs) cudaFree(d);
    configs.push_back(cfg);
  }
  report["persistent"] = configs;
  std::printf("%s\n", report.dump(1).c_str());
  return 0;
}

}  // namespace
}  // namespace surge::engine::cuda

int main(int argc, char** argv) { return surge::engine::cuda::Main(argc, argv); }
