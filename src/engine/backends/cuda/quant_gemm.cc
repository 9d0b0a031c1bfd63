#include "engine/backends/cuda/quant_gemm.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/gemm.h"

namespace surge::engine::cuda {
namespace {

struct Layouts {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  void Destroy() {
    if (op) cublasLtMatmulDescDestroy(op);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (d) cublasLtMatrixLayoutDestroy(d);
    op = nullptr;
    a = b = c = d = nullptr;
  }
  // D's layout: its own for an e4m3 D, else C's.
  cublasLtMatrixLayout_t D() const { return d ? d : c; }
};

template <typename T>
Status Set(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, const T& v) {
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(op, attr, &v, sizeof(v)));
  return Status::Ok();
}

bool FusesResidual(const QuantGemmDesc& d, QuantGemmMode mode) {
  return mode == QuantGemmMode::kFusedEpilogue && d.residual && d.activation == Activation::kNone;
}

bool FusesGelu(Activation a) { return a == Activation::kGelu || a == Activation::kGeluTanh; }

bool UsesScalePointers(const QuantGemmDesc& d) {
  return d.type == QuantType::kFp8E4M3 && !d.scale_in_alpha;
}

}  // namespace

bool QuantGemmModeApplies(const QuantGemmDesc& d, QuantGemmMode mode) {
  if (d.fp8_out) {
    // An e4m3 D only from the fused epilogue of an FP8 GEMM, which then is the whole Linear.
    if (mode != QuantGemmMode::kFusedEpilogue || d.type != QuantType::kFp8E4M3 || d.residual) {
      return false;
    }
  }
  switch (mode) {
    case QuantGemmMode::kFusedEpilogue:
      // Fused GELU is the tanh form; tanh/relu and an activation before a residual are not
      // cuBLASLt epilogues.
      return (d.activation == Activation::kNone || FusesGelu(d.activation)) &&
             !(d.residual && d.activation != Activation::kNone) &&
             (d.bias || d.activation == Activation::kNone);
    case QuantGemmMode::kScaled:
      return true;
    case QuantGemmMode::kInt32:
      return d.type == QuantType::kInt8;
    case QuantGemmMode::kFloat32:
      return d.type == QuantType::kFp8E4M3;
  }
  return false;
}

namespace {

// Placeholder scale addresses for the heuristic query without probe operands: cuBLASLt only
// checks that they are set; every call sets the real ones.
alignas(256) float placeholder_scales[3] = {1.f, 1.f, 1.f};

Status MakeLayouts(const QuantGemmDesc& d, QuantGemmMode mode, const QuantGemmOperands* probe,
                   Layouts* out) {
  const bool int8 = d.type == QuantType::kInt8;
  const cudaDataType_t in_t = int8 ? CUDA_R_8I : CUDA_R_8F_E4M3;
  const bool int32_out = mode == QuantGemmMode::kInt32;
  const cublasComputeType_t compute = int8 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F;
  const cudaDataType_t scale_t = int32_out ? CUDA_R_32I : CUDA_R_32F;
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&out->op, compute, scale_t));
  SURGE_RETURN_IF_ERROR(Set(out->op, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T));
  SURGE_RETURN_IF_ERROR(Set(out->op, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N));
  if (int8 && !int32_out) {
    const int32_t pm = FusesResidual(d, mode) ? CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST
                                              : CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO;
    SURGE_RETURN_IF_ERROR(Set(out->op, CUBLASLT_MATMUL_DESC_POINTER_MODE, pm));
  }
  if (mode == QuantGemmMode::kFusedEpilogue && d.bias) {
    const cublasLtEpilogue_t epi =
        FusesGelu(d.activation) ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    SURGE_RETURN_IF_ERROR(Set(out->op, CUBLASLT_MATMUL_DESC_EPILOGUE, epi));
    SURGE_RETURN_IF_ERROR(
        Set(out->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(CUDA_R_16F)));
  }
  if (UsesScalePointers(d)) {
    const float* w_scale = probe ? probe->w_scale : &placeholder_scales[0];
    const float* x_scale = probe ? probe->x_scale : &placeholder_scales[1];
    SURGE_RETURN_IF_ERROR(Set(out->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, w_scale));
    SURGE_RETURN_IF_ERROR(Set(out->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, x_scale));
  }
  if (d.fast_accum && !int8) {
    SURGE_RETURN_IF_ERROR(Set(out->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, int8_t{1}));
  }
  if (d.fp8_out) {
    const float* d_scale = probe ? probe->d_scale : &placeholder_scales[2];
    SURGE_RETURN_IF_ERROR(Set(out->op, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, d_scale));
  }
  const cudaDataType_t out_t = int32_out                         ? CUDA_R_32I
                               : mode == QuantGemmMode::kFloat32 ? CUDA_R_32F
                                                                 : CUDA_R_16F;
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&out->a, in_t, d.k, d.n, d.k));
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&out->b, in_t, d.k, d.m, d.k));
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&out->c, out_t, d.n, d.m, d.n));
  if (d.fp8_out) {
    SURGE_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatrixLayoutCreate(&out->d, CUDA_R_8F_E4M3, d.n, d.m, d.n));
  }
  return Status::Ok();
}

Result<std::vector<cublasLtMatmulAlgo_t>> Algos(cublasLtHandle_t handle, const Layouts& l,
                                                size_t ws) {
  cublasLtMatmulPreference_t pref = nullptr;
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws64 = ws;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws64, sizeof(ws64));
  cublasLtMatmulHeuristicResult_t results[QuantGemm::kMaxAlgos] = {};
  int returned = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(handle, l.op, l.a, l.b, l.c, l.D(), pref,
                                        QuantGemm::kMaxAlgos, results, &returned);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  std::vector<cublasLtMatmulAlgo_t> out;
  for (int i = 0; st == CUBLAS_STATUS_SUCCESS && i < returned; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) out.push_back(results[i].algo);
  }
  if (out.empty()) {
    return UnimplementedError("no cuBLASLt algorithm (heuristic status {}, {} returned)",
                              static_cast<int>(st), returned);
  }
  return out;
}

bool Refused(cublasStatus_t st) {
  return st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE;
}

}  // namespace

std::string_view QuantGemmModeName(QuantGemmMode mode) {
  switch (mode) {
    case QuantGemmMode::kFusedEpilogue:
      return "fused epilogue";
    case QuantGemmMode::kScaled:
      return "scaled + bias_act";
    case QuantGemmMode::kInt32:
      return "int32 + dequantize";
    case QuantGemmMode::kFloat32:
      return "fp32 + dequantize";
  }
  return "?";
}

bool QuantGemmModeAccumulates(QuantGemmMode mode) {
  return mode == QuantGemmMode::kInt32 || mode == QuantGemmMode::kFloat32;
}

std::string QuantGemmDesc::Key() const {
  return fmt::format("{} m={} n={} k={} bias={} act={} res={}{}{}{}",
                     type == QuantType::kInt8 ? "int8" : "fp8", m, n, k, bias ? 1 : 0,
                     static_cast<int>(activation), residual ? 1 : 0,
                     type == QuantType::kInt8 ? "" : (scale_in_alpha ? " alpha=1" : " alpha=0"),
                     fp8_out ? " d8=1" : "", fast_accum ? " fa=1" : "");
}

bool QuantGemmShapeSupported(int64_t n, int64_t k) { return n % 16 == 0 && k % 16 == 0; }

Result<std::unique_ptr<QuantGemm>> QuantGemm::Create(
    cublasLtHandle_t handle, const QuantGemmDesc& desc, size_t ws, QuantGemmMode first,
    const QuantGemmOperands* probe, bool only_first, const cublasLtMatmulAlgo_t* preferred) {
  if (desc.m <= 0 || !QuantGemmShapeSupported(desc.n, desc.k)) {
    return InvalidArgumentError("quantised GEMM {}: M must be positive and N, K multiples of 16",
                                desc.Key());
  }
  std::string tried;
  auto note = [&](QuantGemmMode mode, const std::string& what) {
    tried += fmt::format("{}{}: {}", tried.empty() ? "" : "; ", QuantGemmModeName(mode), what);
  };
  for (int m = static_cast<int>(first); m <= static_cast<int>(QuantGemmMode::kFloat32); ++m) {
    const auto mode = static_cast<QuantGemmMode>(m);
    if (only_first && mode != first) break;
    if (!QuantGemmModeApplies(desc, mode)) continue;
    Layouts l;
    Status st = MakeLayouts(desc, mode, probe, &l);
    Result<std::vector<cublasLtMatmulAlgo_t>> algos =
        st.ok() ? Algos(handle, l, ws) : Result<std::vector<cublasLtMatmulAlgo_t>>(st);
    if (!algos.ok()) {
      note(mode, algos.status().message());
      l.Destroy();
      continue;
    }
    std::unique_ptr<QuantGemm> g(new QuantGemm());
    g->desc_ = desc;
    g->mode_ = mode;
    g->fused_residual_ = FusesResidual(desc, mode);
    g->op_ = l.op;
    g->a_ = l.a;
    g->b_ = l.b;
    g->c_ = l.c;
    g->d_ = l.d;
    g->algos_ = std::move(algos).value();
    if (preferred != nullptr) {
      // A tuned algorithm first, when it can run this shape (it was timed at another row count).
      cublasLtMatmulHeuristicResult_t check{};
      if (cublasLtMatmulAlgoCheck(handle, l.op, l.a, l.b, l.c, l.D(), preferred, &check) ==
              CUBLAS_STATUS_SUCCESS &&
          check.state == CUBLAS_STATUS_SUCCESS && check.workspaceSize <= ws) {
        auto same = [&](const cublasLtMatmulAlgo_t& a) {
          return std::memcmp(&a, preferred, sizeof(a)) == 0;
        };
        g->algos_.erase(std::remove_if(g->algos_.begin(), g->algos_.end(), same), g->algos_.end());
        g->algos_.insert(g->algos_.begin(), *preferred);
      }
    }
    if (probe == nullptr) return g;
    std::string refused;
    for (size_t i = 0; i < g->algos_.size(); ++i) {
      const cublasStatus_t cs = g->Call(handle, *probe, i);
      if (cs == CUBLAS_STATUS_SUCCESS) {
        // A launched kernel that faults is a real error, not a refusal.
        SURGE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(probe->stream));
        SURGE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
        g->algos_.erase(g->algos_.begin(), g->algos_.begin() + static_cast<std::ptrdiff_t>(i));
        return g;
      }
      // On probe operands any refusal, whatever its status, only rules this algorithm out.
      refused += fmt::format("{}{}", refused.empty() ? "" : ",", static_cast<int>(cs));
    }
    note(mode, fmt::format("cublasLtMatmul refused all {} algorithms of the heuristic (status {})",
                           g->algos_.size(), refused));
    // g's destructor frees the layouts.
  }
  return UnimplementedError("cuBLASLt runs no form of quantised GEMM {} ({})", desc.Key(),
                            tried.empty() ? "no mode applies" : tried);
}

QuantGemm::~QuantGemm() {
  Layouts l{op_, a_, b_, c_, d_};
  l.Destroy();
}

Status QuantGemm::Tune(cublasLtHandle_t handle, const QuantGemmOperands& probe) {
  // The algorithms that run on the probe, then timed together (samples in rounds).
  std::vector<size_t> ran;
  std::vector<std::function<Status()>> runs;
  for (size_t i = 0; i < algos_.size(); ++i) {
    if (Call(handle, probe, i) != CUBLAS_STATUS_SUCCESS) continue;
    SURGE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(probe.stream));
    SURGE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    ran.push_back(i);
    runs.push_back([this, handle, &probe, i]() -> Status {
      const cublasStatus_t st = Call(handle, probe, i);
      if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
      return InternalError("quantised GEMM {}: cublasLtMatmul status {}", desc_.Key(),
                           static_cast<int>(st));
    });
  }
  std::vector<std::pair<float, size_t>> timed;
  if (!runs.empty()) {
    SURGE_ASSIGN_OR_RETURN(const std::vector<float> us, TimeInterleaved(runs, probe.stream));
    for (size_t j = 0; j < us.size(); ++j) {
      if (std::isfinite(us[j])) timed.emplace_back(us[j], ran[j]);
    }
  }
  if (timed.empty()) {
    return UnimplementedError("quantised GEMM {} ({}): none of its {} algorithms ran", desc_.Key(),
                              QuantGemmModeName(mode_), algos_.size());
  }
  std::stable_sort(timed.begin(), timed.end());
  std::vector<cublasLtMatmulAlgo_t> ordered;
  for (const auto& [us, i] : timed) ordered.push_back(algos_[i]);
  algos_ = std::move(ordered);
  current_ = 0;
  tuned_us_ = timed.front().first;
  return Status::Ok();
}

cublasStatus_t QuantGemm::Call(cublasLtHandle_t handle, const QuantGemmOperands& o,
                               size_t algo) const {
  const bool int8 = desc_.type == QuantType::kInt8;
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  if (mode_ == QuantGemmMode::kFusedEpilogue && desc_.bias) {
    st = cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &o.bias,
                                        sizeof(o.bias));
    if (st != CUBLAS_STATUS_SUCCESS) return st;
  }
  if (desc_.fp8_out) {
    st = cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &o.d_scale,
                                        sizeof(o.d_scale));
    if (st != CUBLAS_STATUS_SUCCESS) return st;
  }
  if (UsesScalePointers(desc_)) {
    st = cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &o.w_scale,
                                        sizeof(o.w_scale));
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &o.x_scale,
                                          sizeof(o.x_scale));
    }
    if (st != CUBLAS_STATUS_SUCCESS) return st;
  }
  const cublasLtMatmulAlgo_t* a = &algos_[algo];
  if (mode_ == QuantGemmMode::kInt32) {
    const int32_t one = 1, zero = 0;
    return cublasLtMatmul(handle, op_, &one, o.w, a_, o.xq, b_, &zero, o.out, c_, o.out, c_, a,
                          o.workspace, o.workspace_bytes, o.stream);
  }
  const float one = 1.f, zero = 0.f;
  const float* beta = fused_residual_ ? &one : &zero;
  const void* c = fused_residual_ ? o.residual : (desc_.fp8_out ? o.unused_c : o.out);
  // INT8: alpha is the per-channel scale vector on the device; FP8: 1 with scale pointers, else
  // the product of the scales.
  const void* alpha = int8                   ? static_cast<const void*>(o.scales)
                      : desc_.scale_in_alpha ? static_cast<const void*>(&desc_.alpha)
                                             : static_cast<const void*>(&one);
  return cublasLtMatmul(handle, op_, alpha, o.w, a_, o.xq, b_, beta, c, c_, o.out, d_ ? d_ : c_, a,
                        o.workspace, o.workspace_bytes, o.stream);
}

Status QuantGemm::Run(cublasLtHandle_t handle, const QuantGemmOperands& o) const {
  std::string refused;
  for (size_t n = 0; n < algos_.size(); ++n) {
    const size_t i = (current_ + n) % algos_.size();
    const cublasStatus_t st = Call(handle, o, i);
    if (st == CUBLAS_STATUS_SUCCESS) {
      current_ = i;
      return Status::Ok();
    }
    if (!Refused(st)) {
      return InternalError("quantised GEMM {} ({}): cublasLtMatmul failed: status {}", desc_.Key(),
                           QuantGemmModeName(mode_), static_cast<int>(st));
    }
    refused += fmt::format("{}{}", refused.empty() ? "" : ",", static_cast<int>(st));
  }
  return UnimplementedError(
      "quantised GEMM {} ({}): cublasLtMatmul refused all {} algorithms (status {})", desc_.Key(),
      QuantGemmModeName(mode_), algos_.size(), refused);
}

}  // namespace surge::engine::cuda
