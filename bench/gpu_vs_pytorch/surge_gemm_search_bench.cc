// What the full cuBLASLt tactic search (TuneGemm with TacticSearch::kFull, gemm.h) buys on
// BERT-class Linear GEMMs: per shape, the fastest of the heuristic's candidates against the
// fastest found, both timed in the same rounds, the configurations chosen, and how long the
// search took. One JSON object per shape on stdout.
//
//   surge_gemm_search_bench [--rows 128,16384] [--hidden 768] [--ffn 3072] [--layouts kn,nk]
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backends/cuda/gemm.h"

namespace surge::engine::cuda {
namespace {

using nlohmann::json;

// Positive integers, comma-separated; false (with nothing parsed) for anything else.
bool ParseList(const std::string& s, std::vector<int64_t>* out) {
  out->clear();
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      return false;
    }
    if (used != item.size() || v <= 0) return false;
    out->push_back(v);
  }
  return !out->empty();
}

template <class T>
T Config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t written = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written);
  return v;
}

json Describe(const GemmAlgo& a, float us) {
  return {{"us", us},
          {"algo_id", Config<int32_t>(a.algo, CUBLASLT_ALGO_CONFIG_ID)},
          {"tile", Config<uint32_t>(a.algo, CUBLASLT_ALGO_CONFIG_TILE_ID)},
          {"stages", Config<uint32_t>(a.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID)},
          {"split_k", Config<int32_t>(a.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)},
          {"swizzle", Config<uint32_t>(a.algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING)},
          {"custom", Config<uint32_t>(a.algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION)},
          {"cluster", Config<uint16_t>(a.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)}};
}

int Main(int argc, char** argv) {
  std::vector<int64_t> rows = {128, 16384};
  int64_t hidden = 768, ffn = 3072;
  std::vector<bool> layouts = {false, true};
  const char* usage =
      "usage: surge_gemm_search_bench [--rows 128,16384] [--hidden 768] [--ffn 3072] "
      "[--layouts kn,nk]\n";
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n%s", flag.c_str(), usage);
      return 2;
    }
    const std::string value = argv[i + 1];
    std::vector<int64_t> list;
    bool ok = true;
    if (flag == "--rows") {
      ok = ParseList(value, &rows);
    } else if (flag == "--hidden" || flag == "--ffn") {
      ok = ParseList(value, &list) && list.size() == 1;
      if (ok) (flag == "--hidden" ? hidden : ffn) = list[0];
    } else if (flag == "--layouts") {
      layouts.clear();
      std::stringstream ss(value);
      std::string item;
      while (ok && std::getline(ss, item, ',')) {
        ok = item == "kn" || item == "nk";
        layouts.push_back(item == "nk");
      }
      ok = ok && !layouts.empty();
    } else {
      std::fprintf(stderr, "unknown flag %s\n%s", flag.c_str(), usage);
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "%s: bad value '%s' (%s)\n%s", flag.c_str(), value.c_str(),
                   flag == "--layouts" ? "kn and/or nk, comma-separated"
                                       : "positive integers, comma-separated",
                   usage);
      return 2;
    }
  }
  if (cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "no usable GPU\n");
    return 1;
  }
  cublasLtHandle_t lt = nullptr;
  cudaStream_t stream = nullptr;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    std::fprintf(stderr, "cannot create a cuBLASLt handle and a stream\n");
    return 1;
  }
  struct Linear {
    const char* name;
    int64_t n, k;
    GemmEpilogue epi;
    bool residual;
  };
  const Linear linears[] = {{"qkv", 3 * hidden, hidden, GemmEpilogue::kBias, false},
                            {"projection+residual", hidden, hidden, GemmEpilogue::kBias, true},
                            {"ffn1+gelu", ffn, hidden, GemmEpilogue::kBiasGeluTanh, false},
                            {"ffn2+residual", hidden, ffn, GemmEpilogue::kBias, true}};
  constexpr size_t kWorkspace = 32u << 20;
  int rc = 0;
  for (int64_t m : rows) {
    for (const Linear& l : linears) {
      for (bool nk : layouts) {
        GemmDesc d;
        d.m = m;
        d.n = l.n;
        d.k = l.k;
        d.epilogue = l.epi;
        d.residual = l.residual;
        d.weight_nk = nk;
        TuneReport report;
        const auto t0 = std::chrono::steady_clock::now();
        auto best = TuneGemm(lt, d, kWorkspace, stream, TacticSearch::kFull, &report);
        const auto t1 = std::chrono::steady_clock::now();
        if (!best.ok()) {
          std::fprintf(stderr, "%s: %s\n", d.Key().c_str(), best.status().ToString().c_str());
          rc = 1;
          continue;
        }
        json out = {{"gemm", l.name},
                    {"key", d.Key()},
                    {"candidates", report.candidates},
                    {"heuristic_candidates", report.heuristic_candidates},
                    {"screened", report.screened},
                    {"search_ms", std::chrono::duration<double, std::milli>(t1 - t0).count()},
                    {"heuristic", Describe(report.heuristic_best, report.heuristic_best.time_us)},
                    {"full", Describe(*best, best->time_us)}};
        std::printf("%s\n", out.dump().c_str());
        std::fflush(stdout);
      }
    }
  }
  cudaStreamDestroy(stream);
  cublasLtDestroy(lt);
  return rc;
}

}  // namespace
}  // namespace surge::engine::cuda

int main(int argc, char** argv) { return surge::engine::cuda::Main(argc, argv); }
