#include "engine/backends/cuda/gemm.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "core/logging.h"
#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/delay_kernels.h"
#include "engine/backends/cuda/pack_kernels.h"
#include "engine/backends/cuda/qgemm_kernels.h"

namespace surge::engine::cuda {
namespace {

// GEMMs with at most this many rows and a weight of at least kSplitKMinWeights elements get a
// wider tactic search, split-K variants included.
constexpr int64_t kSmallGemmRows = 4096;
constexpr int64_t kSplitKMinWeights = 512 * 512;
// Tactic timing: device time per sample, and the delay queued ahead of each queued run.
constexpr float kSampleUs = 300.f;
constexpr int64_t kDelayPerRunNs = 12000;
// The full search (TuneGemm): twice the neighbours of the kSearchSeeds fastest candidates so far,
// each screened (ScreenCandidates: about kScreenUs of calls each, kScreenBatch candidates behind
// one delay), then the fastest kScreenKeep timed in full beside the heuristic's candidates.
constexpr int kSearchSteps = 2;
constexpr size_t kSearchSeeds = 4;
constexpr size_t kScreenKeep = 8;
constexpr float kScreenUs = 20.f;
constexpr size_t kScreenBatch = 32;

cudaDataType_t CudaType(DataType t) { return t == DataType::kF16 ? CUDA_R_16F : CUDA_R_16BF; }

cublasLtEpilogue_t LtEpilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::kBiasGeluTanh:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
    case GemmEpilogue::kNone:
      break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  void Destroy() {
    if (op) cublasLtMatmulDescDestroy(op);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    op = nullptr;
    a = b = c = nullptr;
  }
};

Status MakeDescriptors(const GemmDesc& d, Descriptors* out) {
  const cudaDataType_t t = CudaType(d.dtype);
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&out->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t no = CUBLAS_OP_N;
  const cublasOperation_t op_a = d.weight_nk ? CUBLAS_OP_T : CUBLAS_OP_N;
  SURGE_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(out->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  SURGE_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(out->op, CUBLASLT_MATMUL_DESC_TRANSB, &no, sizeof(no)));
  const cublasLtEpilogue_t epi = LtEpilogue(d.epilogue);
  SURGE_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(out->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  // W [K,N] row-major is the column-major [N,K] matrix A; W stored [N,K] is column-major [K,N],
  // used transposed.
  if (d.weight_nk) {
    SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&out->a, t, d.k, d.n, d.k));
  } else {
    SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&out->a, t, d.n, d.k, d.n));
  }
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&out->b, t, d.k, d.m, d.k));
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&out->c, t, d.n, d.m, d.n));
  return Status::Ok();
}

Status SetBias(cublasLtMatmulDesc_t op, const void* bias) {
  SURGE_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  return Status::Ok();
}

Result<std::vector<GemmAlgo>> Heuristics(cublasLtHandle_t handle, const Descriptors& ds,
                                         const GemmDesc& desc, size_t ws, int max_candidates) {
  cublasLtMatmulPreference_t pref = nullptr;
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws64 = ws;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws64, sizeof(ws64));
  std::vector<cublasLtMatmulHeuristicResult_t> results(max_candidates);
  int returned = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(handle, ds.op, ds.a, ds.b, ds.c, ds.c, pref, max_candidates,
                                        results.data(), &returned);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || returned == 0) {
    return UnimplementedError("cuBLASLt has no algorithm for GEMM {} (status {})", desc.Key(),
                              static_cast<int>(st));
  }
  std::vector<GemmAlgo> out;
  for (int i = 0; i < returned; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
    GemmAlgo a;
    a.valid = true;
    a.algo = results[i].algo;
    out.push_back(a);
  }
  if (out.empty())
    return UnimplementedError("cuBLASLt has no usable algorithm for GEMM {}", desc.Key());
  return out;
}

}  // namespace

std::string GemmDesc::Key() const {
  return fmt::format("{} m={} n={} k={} epi={} res={} wt={}",
                     dtype == DataType::kF16 ? "f16" : "bf16", m, n, k, static_cast<int>(epilogue),
                     residual ? 1 : 0, weight_nk ? 1 : 0);
}

namespace {

// The own GEMM's arguments for `desc` (QGemmArgs::half).
QGemmArgs OwnArgs(const GemmDesc& desc, int tile, const void* x, const void* w, const void* bias,
                  const void* residual, void* y) {
  QGemmArgs a;
  a.half = true;
  a.m = desc.m;
  a.n = desc.n;
  a.k = desc.k;
  a.x = x;
  a.w = w;
  a.bias = desc.epilogue != GemmEpilogue::kNone ? bias : nullptr;
  a.activation =
      desc.epilogue == GemmEpilogue::kBiasGeluTanh ? Activation::kGeluTanh : Activation::kNone;
  a.residual = desc.residual ? residual : nullptr;
  a.y = y;
  a.tile = tile;
  return a;
}

// Off unless SURGE_CUDA_OWN_GEMM=1 until it has been measured against cuBLASLt in whole plans.
bool OwnGemmOffered() {
  static const bool on = [] {
    const char* env = std::getenv("SURGE_CUDA_OWN_GEMM");
    return env != nullptr && env[0] == '1';
  }();
  return on;
}

}  // namespace

bool OwnGemmRuns(const GemmDesc& desc, int tile) {
  if (desc.dtype != DataType::kF16 || !desc.weight_nk || tile < 0) return false;
  // Placeholder pointers, 16-byte aligned: CanImplement checks the shape and alignment only.
  void* p = reinterpret_cast<void*>(uintptr_t{256});
  return QGemmCanImplement(OwnArgs(desc, tile, p, p, p, p, p));
}

std::string GemmAlgo::ToHex() const {
  if (own_tile >= 0) return fmt::format("own{}", own_tile);
  const auto* p = reinterpret_cast<const unsigned char*>(&algo);
  std::string s;
  for (size_t i = 0; i < sizeof(algo); ++i) s += fmt::format("{:02x}", p[i]);
  return s;
}

bool GemmAlgo::FromHex(const std::string& hex, GemmAlgo* out) {
  if (hex.rfind("own", 0) == 0) {
    int tile = -1;
    char extra = 0;
    if (std::sscanf(hex.c_str() + 3, "%d%c", &tile, &extra) != 1 || tile < 0) return false;
    *out = GemmAlgo{};
    out->own_tile = tile;
    out->valid = true;
    return true;
  }
  if (hex.size() != 2 * sizeof(cublasLtMatmulAlgo_t)) return false;
  auto* p = reinterpret_cast<unsigned char*>(&out->algo);
  for (size_t i = 0; i < sizeof(cublasLtMatmulAlgo_t); ++i) {
    unsigned v = 0;
    if (std::sscanf(hex.c_str() + 2 * i, "%2x", &v) != 1) return false;
    p[i] = static_cast<unsigned char>(v);
  }
  out->own_tile = -1;
  out->valid = true;
  return true;
}

Result<std::unique_ptr<GemmPlan>> GemmPlan::Create(cublasLtHandle_t handle, const GemmDesc& desc,
                                                   const GemmAlgo& algo, size_t ws) {
  if (desc.m <= 0 || desc.n <= 0 || desc.k <= 0) {
    return InvalidArgumentError("GEMM {}: every dimension must be positive", desc.Key());
  }
  if (desc.residual && desc.epilogue == GemmEpilogue::kBiasGeluTanh) {
    return InvalidArgumentError("GEMM {}: a residual cannot follow a fused activation", desc.Key());
  }
  Descriptors ds;
  Status st = MakeDescriptors(desc, &ds);
  if (!st.ok()) {
    ds.Destroy();
    return st;
  }
  std::unique_ptr<GemmPlan> plan(new GemmPlan());
  plan->desc_ = desc;
  plan->op_ = ds.op;
  plan->a_ = ds.a;
  plan->b_ = ds.b;
  plan->c_ = ds.c;
  if (algo.valid && algo.own_tile >= 0 && OwnGemmRuns(desc, algo.own_tile)) {
    plan->own_tile_ = algo.own_tile;
    return plan;
  }
  const bool usable = algo.valid && algo.own_tile < 0 && plan->Accepts(handle, algo.algo, ws);
  if (usable) plan->algo_ = algo.algo;
  if (!usable) {
    SURGE_ASSIGN_OR_RETURN(auto cands, Heuristics(handle, ds, desc, ws, 1));
    plan->algo_ = cands[0].algo;
  }
  return plan;
}

GemmPlan::~GemmPlan() {
  Descriptors ds{op_, a_, b_, c_};
  ds.Destroy();
}

Status GemmPlan::Run(cublasLtHandle_t handle, const void* x, const void* w, const void* bias,
                     const void* residual, void* y, void* ws, size_t ws_bytes,
                     cudaStream_t stream) const {
  if (own_tile_ >= 0) {
    const QGemmArgs a = OwnArgs(desc_, own_tile_, x, w, bias, residual, y);
    if (!QGemmCanImplement(a) || QGemmWorkspaceSize(a) > ws_bytes) {
      return InternalError("GEMM {}: the own GEMM (tile {}) cannot run these operands", desc_.Key(),
                           QGemmTileName(own_tile_));
    }
    SURGE_CUDA_RETURN_IF_ERROR(QGemmRun(a, ws, stream));
    return Status::Ok();
  }
  return RunWith(algo_, handle, x, w, bias, residual, y, ws, ws_bytes, stream);
}

bool GemmPlan::Accepts(cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algo,
                       size_t ws_bytes) const {
  cublasLtMatmulHeuristicResult_t check{};
  return cublasLtMatmulAlgoCheck(handle, op_, a_, b_, c_, c_, &algo, &check) ==
             CUBLAS_STATUS_SUCCESS &&
         check.workspaceSize <= ws_bytes;
}

Status GemmPlan::RunWith(const cublasLtMatmulAlgo_t& algo, cublasLtHandle_t handle, const void* x,
                         const void* w, const void* bias, const void* residual, void* y, void* ws,
                         size_t ws_bytes, cudaStream_t stream) const {
  if (desc_.epilogue != GemmEpilogue::kNone) SURGE_RETURN_IF_ERROR(SetBias(op_, bias));
  const float alpha = 1.f;
  const float beta = desc_.residual ? 1.f : 0.f;
  const void* c = desc_.residual ? residual : y;
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(handle, op_, &alpha, w, a_, x, b_, &beta, c, c_, y,
                                              c_, &algo, ws, ws_bytes, stream));
  return Status::Ok();
}

Result<std::vector<GemmAlgo>> GemmHeuristics(cublasLtHandle_t handle, const GemmDesc& desc,
                                             size_t ws, int max_candidates) {
  Descriptors ds;
  Status st = MakeDescriptors(desc, &ds);
  if (!st.ok()) {
    ds.Destroy();
    return st;
  }
  auto r = Heuristics(handle, ds, desc, ws, max_candidates);
  ds.Destroy();
  return r;
}

namespace {

template <class T>
std::vector<T> CapArray(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS ||
      bytes == 0) {
    return {};
  }
  std::vector<T> v(bytes / sizeof(T));
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, v.data(), v.size() * sizeof(T), &written) !=
      CUBLAS_STATUS_SUCCESS) {
    return {};
  }
  v.resize(written / sizeof(T));
  return v;
}

template <class T>
T CapValue(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  T v{};
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof(v), &written) !=
      CUBLAS_STATUS_SUCCESS) {
    return T{};
  }
  return v;
}

template <class T>
bool SetConfig(cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr, T v) {
  return cublasLtMatmulAlgoConfigSetAttribute(algo, attr, &v, sizeof(v)) == CUBLAS_STATUS_SUCCESS;
}

// Few rows leave most multiprocessors idle with cuBLASLt's usual tiles: tuning looks wider and
// tries splitting K across CTAs as well.
bool FewRows(const GemmDesc& desc) {
  return desc.m <= kSmallGemmRows && desc.n * desc.k >= kSplitKMinWeights;
}

// `v` with K split `split` ways (1: not split), with float32 partial sums where offered so that
// splitting adds no FP16 rounding. False where `v` cannot split or reduce.
bool WithSplitK(cublasLtMatmulAlgo_t* v, int32_t split) {
  uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
  if (split > 1) {
    if (CapValue<int32_t>(*v, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) == 0) return false;
    const uint32_t schemes = CapValue<uint32_t>(*v, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
    for (uint32_t s : {uint32_t{CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE},
                       uint32_t{CUBLASLT_REDUCTION_SCHEME_INPLACE}}) {
      if (schemes & s) {
        scheme = s;
        break;
      }
    }
    if (scheme == CUBLASLT_REDUCTION_SCHEME_NONE) return false;
  }
  return SetConfig(v, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, split) &&
         SetConfig(v, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, scheme);
}

// Copies of the unsplit split-K-capable candidates with K split 2, 4 and 8 ways (each part at
// least 128 deep).
std::vector<GemmAlgo> SplitKVariants(const GemmDesc& desc, const std::vector<GemmAlgo>& cands) {
  std::vector<GemmAlgo> out;
  for (const GemmAlgo& c : cands) {
    int32_t current = 1;
    size_t written = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &current,
                                         sizeof(current), &written);
    if (current > 1) continue;
    for (int32_t split : {2, 4, 8}) {
      if (desc.k / split < 128) break;
      GemmAlgo v = c;
      if (WithSplitK(&v.algo, split)) out.push_back(v);
    }
  }
  return out;
}

}  // namespace

Result<std::vector<float>> TimeInterleaved(const std::vector<std::function<Status()>>& runs,
                                           cudaStream_t stream, std::vector<Status>* failures,
                                           int rounds) {
  const size_t n = runs.size();
  std::vector<Status> failed(n, Status::Ok());
  std::vector<std::vector<float>> samples(n);
  cudaEvent_t ev0 = nullptr, ev1 = nullptr;
  auto body = [&]() -> Status {
    SURGE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&ev0));
    SURGE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&ev1));
    // `reps` back-to-back calls of run i queued behind a delay kernel, so small GEMMs are timed
    // at the device's pace, as in a CUDA-graph replay; a call that fails is recorded in failed[i]
    // (the sample is then not used). Errors of the timing itself are returned.
    auto sample = [&](size_t i, int reps, float* us) -> Status {
      SURGE_CUDA_RETURN_IF_ERROR(DelayRun({kDelayPerRunNs * (reps + 2)}, nullptr, stream));
      SURGE_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev0, stream));
      for (int r = 0; r < reps && failed[i].ok(); ++r) failed[i] = runs[i]();
      SURGE_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev1, stream));
      SURGE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(ev1));
      float ms = 0;
      SURGE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, ev0, ev1));
      *us = ms * 1000.f / static_cast<float>(reps);
      return Status::Ok();
    };
    // One call each for an estimate, then `rounds` rounds of one sample per run.
    std::vector<int> reps(n, 0);
    for (size_t i = 0; i < n; ++i) {
      float estimate = 0;
      SURGE_RETURN_IF_ERROR(sample(i, 1, &estimate));
      reps[i] = std::clamp(static_cast<int>(kSampleUs / std::max(estimate, 1.f)), 2, 24);
    }
    for (int round = 0; round < rounds; ++round) {
      for (size_t i = 0; i < n; ++i) {
        if (!failed[i].ok()) continue;
        float us = 0;
        SURGE_RETURN_IF_ERROR(sample(i, reps[i], &us));
        if (failed[i].ok()) samples[i].push_back(us);
      }
    }
    return Status::Ok();
  };
  const Status st = body();
  cudaStreamSynchronize(stream);
  if (ev0) cudaEventDestroy(ev0);
  if (ev1) cudaEventDestroy(ev1);
  SURGE_RETURN_IF_ERROR(st);
  std::vector<float> medians(n, std::numeric_limits<float>::infinity());
  for (size_t i = 0; i < n; ++i) {
    std::vector<float>& t = samples[i];
    if (!failed[i].ok() || t.empty()) continue;
    std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
    medians[i] = t[t.size() / 2];
  }
  if (failures != nullptr) *failures = std::move(failed);
  return medians;
}

Result<std::vector<float>> ScreenCandidates(const std::vector<std::function<Status()>>& runs,
                                            cudaStream_t stream) {
  const size_t n = runs.size();
  std::vector<float> out(n, std::numeric_limits<float>::infinity());
  if (n == 0) return out;
  // Calls per candidate from the first working one's time: about kScreenUs of device time, 1 to
  // 4 calls.
  float first = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n && !std::isfinite(first); ++i) {
    std::vector<Status> failed;
    SURGE_ASSIGN_OR_RETURN(const std::vector<float> t,
                           TimeInterleaved({runs[i]}, stream, &failed, 1));
    first = t[0];
  }
  if (!std::isfinite(first)) return out;
  const int reps = std::clamp(static_cast<int>(kScreenUs / std::max(first, 1.f)), 1, 4);
  std::vector<cudaEvent_t> ev(2 * kScreenBatch, nullptr);
  auto body = [&]() -> Status {
    for (cudaEvent_t& e : ev) SURGE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
    for (size_t b0 = 0; b0 < n; b0 += kScreenBatch) {
      const size_t b1 = std::min(n, b0 + kScreenBatch);
      // The whole batch queued behind one delay, so that the device, not the host's launch
      // rate, sets each candidate's time.
      SURGE_CUDA_RETURN_IF_ERROR(
          DelayRun({kDelayPerRunNs * static_cast<int64_t>((b1 - b0) * reps + 2)}, nullptr, stream));
      std::vector<bool> failed(b1 - b0, false);
      for (size_t i = b0; i < b1; ++i) {
        SURGE_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev[2 * (i - b0)], stream));
        for (int r = 0; r < reps && !failed[i - b0]; ++r) failed[i - b0] = !runs[i]().ok();
        SURGE_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev[2 * (i - b0) + 1], stream));
      }
      SURGE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(ev[2 * (b1 - b0 - 1) + 1]));
      for (size_t i = b0; i < b1; ++i) {
        if (failed[i - b0]) continue;
        float ms = 0;
        SURGE_CUDA_RETURN_IF_ERROR(
            cudaEventElapsedTime(&ms, ev[2 * (i - b0)], ev[2 * (i - b0) + 1]));
        out[i] = ms * 1000.f / static_cast<float>(reps);
      }
    }
    return Status::Ok();
  };
  const Status st = body();
  cudaStreamSynchronize(stream);
  for (cudaEvent_t e : ev) {
    if (e) cudaEventDestroy(e);
  }
  SURGE_RETURN_IF_ERROR(st);
  return out;
}

Result<float> TimeBackToBack(const std::function<Status()>& run, cudaStream_t stream) {
  std::vector<Status> failed;
  SURGE_ASSIGN_OR_RETURN(const std::vector<float> us, TimeInterleaved({run}, stream, &failed));
  SURGE_RETURN_IF_ERROR(failed[0]);
  return us[0];
}

namespace {

// Candidate configurations, each once (by its bytes).
struct CandidateList {
  std::vector<GemmAlgo> algos;
  std::vector<bool> heuristic;  // proposed by cuBLASLt's heuristic
  std::unordered_map<std::string, size_t> index;

  bool Add(const GemmAlgo& a, bool from_heuristic) {
    std::string bytes(reinterpret_cast<const char*>(&a.algo), sizeof(a.algo));
    auto [it, fresh] = index.emplace(std::move(bytes), algos.size());
    if (!fresh) {
      if (from_heuristic) heuristic[it->second] = true;
      return false;
    }
    algos.push_back(a);
    heuristic.push_back(from_heuristic);
    return true;
  }
};

// The neighbours of `a`: `a` with one of its tile, thread-block cluster shape, custom option or
// (few rows) K split changed, as far as `plan` accepts them.
void AddNeighbours(cublasLtHandle_t handle, const GemmPlan& plan, size_t ws,
                   const cublasLtMatmulAlgo_t& a, CandidateList* list) {
  const GemmDesc& desc = plan.desc();
  auto add = [&](const cublasLtMatmulAlgo_t& v) {
    if (!plan.Accepts(handle, v, ws)) return;
    GemmAlgo g;
    g.valid = true;
    g.algo = v;
    list->Add(g, false);
  };
  for (uint32_t tile : CapArray<uint32_t>(a, CUBLASLT_ALGO_CAP_TILE_IDS)) {
    cublasLtMatmulAlgo_t v = a;
    if (SetConfig(&v, CUBLASLT_ALGO_CONFIG_TILE_ID, tile)) add(v);
  }
  // Let the library choose, or one of the small shapes (larger ones never won where measured).
  for (uint16_t cluster :
       {uint16_t{CUBLASLT_CLUSTER_SHAPE_AUTO}, uint16_t{CUBLASLT_CLUSTER_SHAPE_1x1x1},
        uint16_t{CUBLASLT_CLUSTER_SHAPE_2x1x1}, uint16_t{CUBLASLT_CLUSTER_SHAPE_1x2x1}}) {
    cublasLtMatmulAlgo_t v = a;
    if (SetConfig(&v, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, cluster)) add(v);
  }
  const int32_t custom_max =
      std::min(CapValue<int32_t>(a, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX), 15);
  for (int32_t custom = 0; custom <= custom_max; ++custom) {
    cublasLtMatmulAlgo_t v = a;
    if (SetConfig(&v, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, static_cast<uint32_t>(custom))) add(v);
  }
  if (desc.m <= kSmallGemmRows) {
    for (int32_t split : {1, 2, 4, 8}) {
      if (desc.k / split < 128) break;
      cublasLtMatmulAlgo_t v = a;
      if (WithSplitK(&v, split)) add(v);
    }
  }
}

// Random operands of one GEMM shape on the device, one set of descriptors, and the ways to time
// candidate configurations on them.
class TacticBench {
 public:
  TacticBench(cublasLtHandle_t handle, const GemmDesc& desc, size_t ws_bytes, cudaStream_t stream)
      : handle_(handle), desc_(desc), ws_bytes_(ws_bytes), stream_(stream) {}
  ~TacticBench() {
    cudaStreamSynchronize(stream_);
    for (void* p : buf_) cudaFree(p);
    cudaFree(staging_);
    cudaFree(ws_);
  }

  Status Init() {
    // Random operands (never zeros: they can run faster than real data).
    const int64_t n_x = desc_.m * desc_.k, n_w = desc_.k * desc_.n;
    n_y_ = desc_.m * desc_.n;
    const int64_t n_max = std::max({n_x, n_w, n_y_});
    host_.resize(static_cast<size_t>(std::min<int64_t>(n_max, 1 << 20)));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (float& v : host_) v = dist(rng);
    const int64_t sizes[5] = {n_x, n_w, desc_.n, n_y_, n_y_};
    SURGE_CUDA_RETURN_IF_ERROR(
        cudaMalloc(reinterpret_cast<void**>(&staging_), host_.size() * sizeof(float)));
    SURGE_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(staging_, host_.data(), host_.size() * sizeof(float), cudaMemcpyHostToDevice));
    for (int i = 0; i < 5; ++i) {
      SURGE_CUDA_RETURN_IF_ERROR(cudaMalloc(&buf_[i], sizes[i] * 2));
      for (int64_t off = 0; off < sizes[i]; off += static_cast<int64_t>(host_.size())) {
        const int64_t cnt = std::min<int64_t>(host_.size(), sizes[i] - off);
        SURGE_CUDA_RETURN_IF_ERROR(ConvertFromFloat32(
            desc_.dtype, staging_, static_cast<char*>(buf_[i]) + off * 2, cnt, stream_));
      }
    }
    if (ws_bytes_) SURGE_CUDA_RETURN_IF_ERROR(cudaMalloc(&ws_, ws_bytes_));
    SURGE_ASSIGN_OR_RETURN(plan_, GemmPlan::Create(handle_, desc_, GemmAlgo{}, ws_bytes_));
    return Status::Ok();
  }

  const GemmPlan& plan() const { return *plan_; }

  // The own GEMM at `tile` on these operands (OwnGemmRuns must hold), with its workspace need.
  QGemmArgs Own(int tile) const {
    return OwnArgs(desc_, tile, buf_[0], buf_[1], buf_[2], buf_[3], buf_[4]);
  }
  size_t ws_bytes() const { return ws_bytes_; }
  Status RunOwn(int tile) const {
    SURGE_CUDA_RETURN_IF_ERROR(QGemmRun(Own(tile), ws_, stream_));
    return Status::Ok();
  }
  // y as float after one run of the own GEMM at `tile`.
  Status OwnOutput(int tile, std::vector<float>* y) {
    SURGE_RETURN_IF_ERROR(RunOwn(tile));
    return Fetch(y);
  }

  Status Run(const cublasLtMatmulAlgo_t& algo) const {
    return plan_->RunWith(algo, handle_, buf_[0], buf_[1], buf_[2], buf_[3], buf_[4], ws_,
                          ws_bytes_, stream_);
  }

  // Which of `which` run: each accepted one is called once; one whose call fails is left out.
  Result<std::vector<size_t>> Runnable(const CandidateList& list,
                                       const std::vector<size_t>& which) {
    std::vector<size_t> ok;
    for (size_t c : which) {
      if (!plan_->Accepts(handle_, list.algos[c].algo, ws_bytes_)) continue;
      if (!Run(list.algos[c].algo).ok()) {
        cudaStreamSynchronize(stream_);
        cudaGetLastError();  // the next candidate must not inherit a failed launch's error
        continue;
      }
      ok.push_back(c);
    }
    SURGE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return ok;
  }

  std::vector<std::function<Status()>> Runs(const CandidateList& list,
                                            const std::vector<size_t>& which) const {
    std::vector<std::function<Status()>> runs;
    for (size_t c : which) {
      runs.push_back([this, a = list.algos[c].algo] { return Run(a); });
    }
    return runs;
  }

  // The first values of `algo`'s output (as float32), to compare configurations.
  Status Output(const cublasLtMatmulAlgo_t& algo, std::vector<float>* y) {
    SURGE_RETURN_IF_ERROR(Run(algo));
    return Fetch(y);
  }

 private:
  Status Fetch(std::vector<float>* y) {
    const int64_t cnt = std::min<int64_t>(n_y_, static_cast<int64_t>(host_.size()));
    SURGE_CUDA_RETURN_IF_ERROR(ConvertToFloat32(desc_.dtype, buf_[4], staging_, cnt, stream_));
    y->resize(static_cast<size_t>(cnt));
    SURGE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(y->data(), staging_, cnt * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    SURGE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }

  cublasLtHandle_t handle_;
  GemmDesc desc_;
  size_t ws_bytes_;
  cudaStream_t stream_;
  int64_t n_y_ = 0;
  std::vector<float> host_;
  void* buf_[5] = {};  // x, w, bias, residual, y
  float* staging_ = nullptr;
  void* ws_ = nullptr;
  std::unique_ptr<GemmPlan> plan_;
};

// A configuration the heuristic did not propose, chosen over every one it did, is used only if
// its output matches the heuristic's own first choice on the same operands (relative L2 error
// within kOutsiderTolerance): such configurations are rarely run, and a wrong one would otherwise
// win on speed alone. One that does not match gets +infinity, with a warning.
constexpr double kOutsiderTolerance = 1e-2;

// ‖y − ref‖ / ‖ref‖, or +infinity when the sizes differ.
double RelativeL2(const std::vector<float>& y, const std::vector<float>& ref) {
  if (y.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (static_cast<double>(y[i]) - ref[i]) * (static_cast<double>(y[i]) - ref[i]);
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

Status CheckOutsiders(TacticBench& bench, const CandidateList& list,
                      const std::vector<size_t>& timed, std::vector<float>* us) {
  float heuristic_best = std::numeric_limits<float>::infinity();
  size_t reference = list.algos.size();
  for (size_t j = 0; j < timed.size(); ++j) {
    if (!list.heuristic[timed[j]]) continue;
    heuristic_best = std::min(heuristic_best, (*us)[j]);
    if (reference == list.algos.size() && std::isfinite((*us)[j])) reference = timed[j];
  }
  std::vector<size_t> outsiders;  // positions in `timed`
  for (size_t j = 0; j < timed.size(); ++j) {
    if (!list.heuristic[timed[j]] && (*us)[j] < heuristic_best) outsiders.push_back(j);
  }
  if (outsiders.empty()) return Status::Ok();
  std::sort(outsiders.begin(), outsiders.end(),
            [&](size_t a, size_t b) { return (*us)[a] < (*us)[b]; });
  std::vector<float> ref, y;
  if (reference != list.algos.size()) {
    SURGE_RETURN_IF_ERROR(bench.Output(list.algos[reference].algo, &ref));
  }
  for (size_t j : outsiders) {
    double err = std::numeric_limits<double>::infinity();
    if (!ref.empty()) {
      SURGE_RETURN_IF_ERROR(bench.Output(list.algos[timed[j]].algo, &y));
      err = RelativeL2(y, ref);
    }
    if (err <= kOutsiderTolerance) break;  // the fastest that matches; slower ones cannot win
    SURGE_LOG_WARN(
        "GEMM {}: cuBLASLt configuration {} differs from the heuristic's choice (relative error "
        "{:.3g}); not used",
        bench.plan().desc().Key(), list.algos[timed[j]].ToHex(), err);
    (*us)[j] = std::numeric_limits<float>::infinity();
  }
  return Status::Ok();
}

// The positions of the `n` smallest finite values of `v`, smallest first.
std::vector<size_t> Fastest(const std::vector<float>& v, size_t n) {
  std::vector<size_t> order;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isfinite(v[i])) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  if (order.size() > n) order.resize(n);
  return order;
}

// `best` (cuBLASLt's fastest) or the own GEMM at one of its tiles, whichever the same rounds time
// faster; an own tile whose output differs from `best`'s (relative L2 error over
// kOutsiderTolerance) is not used, with a warning.
Result<GemmAlgo> OwnIfFaster(TacticBench& bench, const GemmAlgo& best, cudaStream_t stream) {
  const GemmDesc& desc = bench.plan().desc();
  std::vector<int> tiles;
  for (int tile = 0; tile < QGemmTileCount(); ++tile) {
    if (OwnGemmRuns(desc, tile) && QGemmCanImplement(bench.Own(tile)) &&
        QGemmWorkspaceSize(bench.Own(tile)) <= bench.ws_bytes()) {
      tiles.push_back(tile);
    }
  }
  if (tiles.empty()) return best;
  std::vector<std::function<Status()>> runs = {[&] { return bench.Run(best.algo); }};
  for (int tile : tiles) runs.push_back([&bench, tile] { return bench.RunOwn(tile); });
  std::vector<Status> failures;
  SURGE_ASSIGN_OR_RETURN(const std::vector<float> us, TimeInterleaved(runs, stream, &failures));
  GemmAlgo out = best;
  if (std::isfinite(us[0])) out.time_us = us[0];
  std::string times;
  for (size_t i = 1; i < runs.size(); ++i) {
    times += fmt::format("; {} {:.2f} us", QGemmTileName(tiles[i - 1]), us[i]);
  }
  SURGE_LOG_DEBUG("GEMM {}: cuBLASLt's fastest {:.2f} us{}", desc.Key(), us[0], times);
  std::vector<float> ref, y;
  for (size_t i = 1; i < runs.size(); ++i) {
    if (!failures[i].ok() || !std::isfinite(us[i]) || us[i] >= out.time_us) continue;
    if (ref.empty()) SURGE_RETURN_IF_ERROR(bench.Output(best.algo, &ref));
    SURGE_RETURN_IF_ERROR(bench.OwnOutput(tiles[i - 1], &y));
    const double err = RelativeL2(y, ref);
    if (err > kOutsiderTolerance) {
      SURGE_LOG_WARN(
          "GEMM {}: the own GEMM ({}) differs from cuBLASLt's (relative error {:.3g}); "
          "not used",
          desc.Key(), QGemmTileName(tiles[i - 1]), err);
      continue;
    }
    out = GemmAlgo{};
    out.valid = true;
    out.own_tile = tiles[i - 1];
    out.time_us = us[i];
  }
  return out;
}

}  // namespace

Result<GemmAlgo> TuneGemm(cublasLtHandle_t handle, const GemmDesc& desc, size_t ws_bytes,
                          cudaStream_t stream, TacticSearch search, TuneReport* report) {
  const bool small = FewRows(desc);
  CandidateList list;
  {
    SURGE_ASSIGN_OR_RETURN(auto top, GemmHeuristics(handle, desc, ws_bytes, small ? 16 : 12));
    if (small) {
      std::vector<GemmAlgo> split = SplitKVariants(desc, top);
      top.insert(top.end(), split.begin(), split.end());
    }
    for (const GemmAlgo& a : top) list.Add(a, true);
  }
  TacticBench bench(handle, desc, ws_bytes, stream);
  SURGE_RETURN_IF_ERROR(bench.Init());
  std::vector<size_t> all(list.algos.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  SURGE_ASSIGN_OR_RETURN(const std::vector<size_t> heuristic, bench.Runnable(list, all));
  std::vector<size_t> timed = heuristic;  // the heuristic's candidates are always timed in full
  size_t screened = 0;
  if (search == TacticSearch::kFull) {
    // Neighbourhood search: screen the heuristic's candidates, then twice the neighbours of the
    // fastest kSearchSeeds so far (one setting changed at a time), then time the fastest
    // kScreenKeep found in full beside the heuristic's own.
    std::vector<size_t> pool;  // candidates screened, and their rough times
    std::vector<float> rough;
    auto screen = [&](const std::vector<size_t>& ok) -> Status {  // candidates that run
      SURGE_ASSIGN_OR_RETURN(const std::vector<float> t,
                             ScreenCandidates(bench.Runs(list, ok), stream));
      pool.insert(pool.end(), ok.begin(), ok.end());
      rough.insert(rough.end(), t.begin(), t.end());
      screened += ok.size();
      return Status::Ok();
    };
    SURGE_RETURN_IF_ERROR(screen(heuristic));
    std::vector<bool> expanded(list.algos.size(), false);
    for (int step = 0; step < kSearchSteps; ++step) {
      const size_t before = list.algos.size();
      for (size_t j : Fastest(rough, kSearchSeeds)) {
        const size_t c = pool[j];
        if (expanded[c]) continue;
        expanded[c] = true;
        AddNeighbours(handle, bench.plan(), ws_bytes, list.algos[c].algo, &list);
      }
      expanded.resize(list.algos.size(), false);
      std::vector<size_t> fresh;
      for (size_t c = before; c < list.algos.size(); ++c) fresh.push_back(c);
      SURGE_ASSIGN_OR_RETURN(const std::vector<size_t> runnable, bench.Runnable(list, fresh));
      if (runnable.empty()) break;
      SURGE_RETURN_IF_ERROR(screen(runnable));
    }
    for (size_t j : Fastest(rough, kScreenKeep)) {
      if (!list.heuristic[pool[j]]) timed.push_back(pool[j]);
    }
  }
  SURGE_ASSIGN_OR_RETURN(std::vector<float> us, TimeInterleaved(bench.Runs(list, timed), stream));
  SURGE_RETURN_IF_ERROR(CheckOutsiders(bench, list, timed, &us));
  GemmAlgo best, best_heuristic;
  for (size_t j = 0; j < timed.size(); ++j) {
    if (!std::isfinite(us[j])) continue;
    const GemmAlgo& a = list.algos[timed[j]];
    if (!best.valid || us[j] < best.time_us) {
      best = a;
      best.time_us = us[j];
    }
    if (list.heuristic[timed[j]] && (!best_heuristic.valid || us[j] < best_heuristic.time_us)) {
      best_heuristic = a;
      best_heuristic.time_us = us[j];
    }
  }
  if (best.valid && OwnGemmOffered()) {
    SURGE_ASSIGN_OR_RETURN(best, OwnIfFaster(bench, best, stream));
  }
  if (report != nullptr) {
    report->candidates = list.algos.size();
    report->heuristic_candidates = heuristic.size();
    report->screened = screened;
    report->heuristic_best = best_heuristic;
  }
  if (!best.valid) return InternalError("GEMM {}: no candidate algorithm ran", desc.Key());
  return best;
}

std::string DeviceKey() {
  cudaDeviceProp prop{};
  int dev = 0;
  cudaGetDevice(&dev);
  cudaGetDeviceProperties(&prop, dev);
  return fmt::format("sm_{}{} {} cublasLt {}", prop.major, prop.minor, prop.name,
                     cublasLtGetVersion());
}

namespace {

// Tunings of this process, by "<device key>\t<desc key>", for every TimingCache.
struct ProcessTunings {
  std::mutex mu;
  std::map<std::string, std::string> lines;
};

ProcessTunings& Tunings() {
  static ProcessTunings* t = new ProcessTunings;  // never destroyed: used until exit
  return *t;
}

}  // namespace

TimingCache::TimingCache(std::string path, std::string device_key)
    : path_(std::move(path)), device_key_(std::move(device_key)) {
  if (path_.empty()) return;
  std::ifstream in(path_);
  std::string line;
  while (std::getline(in, line)) {
    // "<device key>\t<desc key>\t<hex> <us>"
    const size_t t1 = line.find('\t');
    const size_t t2 = t1 == std::string::npos ? t1 : line.find('\t', t1 + 1);
    if (t2 == std::string::npos) continue;
    lines_[line.substr(0, t2)] = line.substr(t2 + 1);
  }
}

bool TimingCache::Lookup(const GemmDesc& desc, GemmAlgo* algo) const {
  const std::string key = device_key_ + "\t" + desc.Key();
  std::string line;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = lines_.find(key);
    if (it != lines_.end()) line = it->second;
  }
  if (line.empty()) {
    {
      ProcessTunings& t = Tunings();
      std::lock_guard<std::mutex> lock(t.mu);
      auto it = t.lines.find(key);
      if (it == t.lines.end()) return false;
      line = it->second;
    }
    std::lock_guard<std::mutex> lock(mu_);
    lines_[key] = line;  // the file, when saved, holds every tuning this build used
  }
  std::istringstream ss(line);
  std::string hex;
  float us = 0;
  ss >> hex >> us;
  if (!GemmAlgo::FromHex(hex, algo)) return false;
  algo->time_us = us;
  return true;
}

void TimingCache::Insert(const GemmDesc& desc, const GemmAlgo& algo) {
  const std::string key = device_key_ + "\t" + desc.Key();
  const std::string line = fmt::format("{} {:.2f}", algo.ToHex(), algo.time_us);
  {
    ProcessTunings& t = Tunings();
    std::lock_guard<std::mutex> lock(t.mu);
    t.lines[key] = line;
  }
  std::lock_guard<std::mutex> lock(mu_);
  lines_[key] = line;
}

Status TimingCache::Save() const {
  if (path_.empty()) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return InvalidArgumentError("cannot write timing cache '{}'", path_);
    for (const auto& [k, v] : lines_) out << k << '\t' << v << '\n';
    if (!out) return InvalidArgumentError("cannot write timing cache '{}'", path_);
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    return InvalidArgumentError("cannot replace timing cache '{}'", path_);
  }
  return Status::Ok();
}

}  // namespace surge::engine::cuda
