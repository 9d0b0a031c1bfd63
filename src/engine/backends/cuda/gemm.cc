#include "engine/backends/cuda/gemm.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/delay_kernels.h"
#include "engine/backends/cuda/pack_kernels.h"

namespace surge::engine::cuda {
namespace {

// GEMMs with at most this many rows and a weight of at least kSplitKMinWeights elements get a
// wider tactic search, split-K variants included.
constexpr int64_t kSmallGemmRows = 4096;
constexpr int64_t kSplitKMinWeights = 512 * 512;
// Tactic timing: device time per sample, and the delay queued ahead of each queued run.
constexpr float kSampleUs = 300.f;
constexpr int64_t kDelayPerRunNs = 12000;
// Samples per candidate, taken in rounds over all candidates (TimeInterleaved).
constexpr int kTimingRounds = 3;

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

std::string GemmAlgo::ToHex() const {
  const auto* p = reinterpret_cast<const unsigned char*>(&algo);
  std::string s;
  for (size_t i = 0; i < sizeof(algo); ++i) s += fmt::format("{:02x}", p[i]);
  return s;
}

bool GemmAlgo::FromHex(const std::string& hex, GemmAlgo* out) {
  if (hex.size() != 2 * sizeof(cublasLtMatmulAlgo_t)) return false;
  auto* p = reinterpret_cast<unsigned char*>(&out->algo);
  for (size_t i = 0; i < sizeof(cublasLtMatmulAlgo_t); ++i) {
    unsigned v = 0;
    if (std::sscanf(hex.c_str() + 2 * i, "%2x", &v) != 1) return false;
    p[i] = static_cast<unsigned char>(v);
  }
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
  bool usable = false;
  if (algo.valid) {
    cublasLtMatmulHeuristicResult_t check{};
    usable = cublasLtMatmulAlgoCheck(handle, ds.op, ds.a, ds.b, ds.c, ds.c, &algo.algo, &check) ==
                 CUBLAS_STATUS_SUCCESS &&
             check.workspaceSize <= ws;
    if (usable) plan->algo_ = algo.algo;
  }
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
  if (desc_.epilogue != GemmEpilogue::kNone) SURGE_RETURN_IF_ERROR(SetBias(op_, bias));
  const float alpha = 1.f;
  const float beta = desc_.residual ? 1.f : 0.f;
  const void* c = desc_.residual ? residual : y;
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(handle, op_, &alpha, w, a_, x, b_, &beta, c, c_, y,
                                              c_, &algo_, ws, ws_bytes, stream));
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

// Copies of the split-K-capable candidates with K split 2, 4 and 8 ways (each part at least 128
// deep).
std::vector<GemmAlgo> SplitKVariants(const GemmDesc& desc, const std::vector<GemmAlgo>& cands) {
  std::vector<GemmAlgo> out;
  for (const GemmAlgo& c : cands) {
    int32_t support = 0, current = 1;
    uint32_t schemes = 0;
    size_t written = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&c.algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &support,
                                          sizeof(support), &written) != CUBLAS_STATUS_SUCCESS ||
        !support) {
      continue;
    }
    cublasLtMatmulAlgoCapGetAttribute(&c.algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes,
                                      sizeof(schemes), &written);
    cublasLtMatmulAlgoConfigGetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &current,
                                         sizeof(current), &written);
    if (current > 1) continue;
    // float32 partial sums where offered, so splitting K adds no FP16 rounding.
    uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
    for (uint32_t s : {uint32_t{CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE},
                       uint32_t{CUBLASLT_REDUCTION_SCHEME_INPLACE}}) {
      if (schemes & s) {
        scheme = s;
        break;
      }
    }
    if (scheme == CUBLASLT_REDUCTION_SCHEME_NONE) continue;
    for (int32_t split : {2, 4, 8}) {
      if (desc.k / split < 128) break;
      GemmAlgo v = c;
      if (cublasLtMatmulAlgoConfigSetAttribute(&v.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split,
                                               sizeof(split)) != CUBLAS_STATUS_SUCCESS ||
          cublasLtMatmulAlgoConfigSetAttribute(&v.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                               &scheme, sizeof(scheme)) != CUBLAS_STATUS_SUCCESS) {
        continue;
      }
      out.push_back(v);
    }
  }
  return out;
}

}  // namespace

Result<std::vector<float>> TimeInterleaved(const std::vector<std::function<Status()>>& runs,
                                           cudaStream_t stream, std::vector<Status>* failures) {
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
    // One call each for an estimate, then kTimingRounds rounds of one sample per run.
    std::vector<int> reps(n, 0);
    for (size_t i = 0; i < n; ++i) {
      float estimate = 0;
      SURGE_RETURN_IF_ERROR(sample(i, 1, &estimate));
      reps[i] = std::clamp(static_cast<int>(kSampleUs / std::max(estimate, 1.f)), 2, 24);
    }
    for (int round = 0; round < kTimingRounds; ++round) {
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

Result<float> TimeBackToBack(const std::function<Status()>& run, cudaStream_t stream) {
  std::vector<Status> failed;
  SURGE_ASSIGN_OR_RETURN(const std::vector<float> us, TimeInterleaved({run}, stream, &failed));
  SURGE_RETURN_IF_ERROR(failed[0]);
  return us[0];
}

Result<GemmAlgo> TuneGemm(cublasLtHandle_t handle, const GemmDesc& desc, size_t ws_bytes,
                          cudaStream_t stream) {
  // Few rows leave most multiprocessors idle with cuBLASLt's usual tiles: look wider and try
  // splitting K across CTAs as well.
  const bool small = desc.m <= kSmallGemmRows && desc.n * desc.k >= kSplitKMinWeights;
  SURGE_ASSIGN_OR_RETURN(auto cands, GemmHeuristics(handle, desc, ws_bytes, small ? 16 : 12));
  if (small) {
    std::vector<GemmAlgo> split = SplitKVariants(desc, cands);
    cands.insert(cands.end(), split.begin(), split.end());
  }
  // Random operands (never zeros: they can run faster than real data).
  const int64_t n_x = desc.m * desc.k, n_w = desc.k * desc.n, n_y = desc.m * desc.n;
  const int64_t n_max = std::max({n_x, n_w, n_y});
  std::vector<float> host(static_cast<size_t>(std::min<int64_t>(n_max, 1 << 20)));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (float& v : host) v = dist(rng);
  void* buf[5] = {};  // x, w, bias, residual, y
  float* staging = nullptr;
  void* ws = nullptr;
  auto cleanup = [&] {
    for (void* p : buf) cudaFree(p);
    cudaFree(staging);
    cudaFree(ws);
  };
  auto body = [&]() -> Result<GemmAlgo> {
    const int64_t sizes[5] = {n_x, n_w, desc.n, n_y, n_y};
    SURGE_CUDA_RETURN_IF_ERROR(
        cudaMalloc(reinterpret_cast<void**>(&staging), host.size() * sizeof(float)));
    SURGE_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(staging, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
    for (int i = 0; i < 5; ++i) {
      SURGE_CUDA_RETURN_IF_ERROR(cudaMalloc(&buf[i], sizes[i] * 2));
      for (int64_t off = 0; off < sizes[i]; off += static_cast<int64_t>(host.size())) {
        const int64_t cnt = std::min<int64_t>(host.size(), sizes[i] - off);
        SURGE_CUDA_RETURN_IF_ERROR(ConvertFromFloat32(
            desc.dtype, staging, static_cast<char*>(buf[i]) + off * 2, cnt, stream));
      }
    }
    if (ws_bytes) SURGE_CUDA_RETURN_IF_ERROR(cudaMalloc(&ws, ws_bytes));
    // Candidates that run (three calls each) are then timed together, in rounds.
    std::vector<std::unique_ptr<GemmPlan>> plans;
    std::vector<const GemmAlgo*> ran;
    for (const GemmAlgo& cand : cands) {
      auto plan_or = GemmPlan::Create(handle, desc, cand, ws_bytes);
      if (!plan_or.ok()) continue;
      std::unique_ptr<GemmPlan> plan = std::move(*plan_or);
      if (std::memcmp(&plan->algo(), &cand.algo, sizeof(cand.algo)) != 0) continue;
      bool failed = false;
      for (int i = 0; i < 3 && !failed; ++i) {
        failed =
            !plan->Run(handle, buf[0], buf[1], buf[2], buf[3], buf[4], ws, ws_bytes, stream).ok();
      }
      if (failed) continue;
      plans.push_back(std::move(plan));
      ran.push_back(&cand);
    }
    std::vector<std::function<Status()>> runs;
    for (const auto& plan : plans) {
      runs.push_back([&, p = plan.get()] {
        return p->Run(handle, buf[0], buf[1], buf[2], buf[3], buf[4], ws, ws_bytes, stream);
      });
    }
    SURGE_ASSIGN_OR_RETURN(const std::vector<float> us, TimeInterleaved(runs, stream));
    GemmAlgo best;
    for (size_t i = 0; i < us.size(); ++i) {
      if (!std::isfinite(us[i])) continue;
      if (!best.valid || us[i] < best.time_us) {
        best = *ran[i];
        best.time_us = us[i];
      }
    }
    if (!best.valid) return InternalError("GEMM {}: no candidate algorithm ran", desc.Key());
    return best;
  };
  auto result = body();
  cudaStreamSynchronize(stream);
  cleanup();
  return result;
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
