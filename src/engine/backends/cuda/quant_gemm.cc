#include "engine/backends/cuda/quant_gemm.h"

#include <fmt/format.h>

#include <vector>

#include "engine/backends/cuda/cuda_check.h"

namespace surge::engine::cuda {
namespace {

struct Layouts {
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

template <typename T>
Status Set(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, const T& v) {
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(op, attr, &v, sizeof(v)));
  return Status::Ok();
}

bool FusesResidual(const QuantGemmDesc& d, QuantGemmMode mode) {
  return mode == QuantGemmMode::kFusedEpilogue && d.residual && d.activation == Activation::kNone;
}

bool FusesGelu(Activation a) { return a == Activation::kGelu || a == Activation::kGeluTanh; }

// The mode can express the Linear at all (the rest is up to cuBLASLt's heuristic).
bool ModeApplies(const QuantGemmDesc& d, QuantGemmMode mode) {
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
  }
  return false;
}

Status MakeLayouts(const QuantGemmDesc& d, QuantGemmMode mode, Layouts* out) {
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
  const cudaDataType_t out_t = int32_out ? CUDA_R_32I : CUDA_R_16F;
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&out->a, in_t, d.k, d.n, d.k));
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&out->b, in_t, d.k, d.m, d.k));
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&out->c, out_t, d.n, d.m, d.n));
  return Status::Ok();
}

// FP8 needs its scale pointers set for the heuristic to consider the scaled kernels; any
// device address will do for the query, the real ones are set per Run.
Status SetScalePointers(cublasLtMatmulDesc_t op, const float* w_scale, const float* x_scale) {
  SURGE_RETURN_IF_ERROR(Set(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, w_scale));
  SURGE_RETURN_IF_ERROR(Set(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, x_scale));
  return Status::Ok();
}

Result<cublasLtMatmulAlgo_t> FirstAlgo(cublasLtHandle_t handle, const Layouts& l, size_t ws) {
  cublasLtMatmulPreference_t pref = nullptr;
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws64 = ws;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws64, sizeof(ws64));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(handle, l.op, l.a, l.b, l.c, l.c, pref, 1, &result,
                                        &returned);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || returned == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
    return UnimplementedError("no cuBLASLt algorithm (status {})", static_cast<int>(st));
  }
  return result.algo;
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
  }
  return "?";
}

std::string QuantGemmDesc::Key() const {
  return fmt::format("{} m={} n={} k={} bias={} act={} res={}",
                     type == QuantType::kInt8 ? "int8" : "fp8", m, n, k, bias ? 1 : 0,
                     static_cast<int>(activation), residual ? 1 : 0);
}

bool QuantGemmShapeSupported(int64_t n, int64_t k) { return n % 16 == 0 && k % 16 == 0; }

Result<std::unique_ptr<QuantGemm>> QuantGemm::Create(cublasLtHandle_t handle,
                                                     const QuantGemmDesc& desc, size_t ws,
                                                     QuantGemmMode first) {
  if (desc.m <= 0 || !QuantGemmShapeSupported(desc.n, desc.k)) {
    return InvalidArgumentError("quantised GEMM {}: M must be positive and N, K multiples of 16",
                                desc.Key());
  }
  std::string tried;
  for (int m = static_cast<int>(first); m <= static_cast<int>(QuantGemmMode::kInt32); ++m) {
    const auto mode = static_cast<QuantGemmMode>(m);
    if (!ModeApplies(desc, mode)) continue;
    Layouts l;
    Status st = MakeLayouts(desc, mode, &l);
    // Placeholder scale addresses for the query: cuBLASLt only checks that they are set.
    static float dummy_scale = 1.f;
    if (st.ok() && desc.type == QuantType::kFp8E4M3) {
      st = SetScalePointers(l.op, &dummy_scale, &dummy_scale);
    }
    Result<cublasLtMatmulAlgo_t> algo =
        st.ok() ? FirstAlgo(handle, l, ws) : Result<cublasLtMatmulAlgo_t>(st);
    if (!algo.ok()) {
      tried += fmt::format("{}{}: {}", tried.empty() ? "" : "; ", QuantGemmModeName(mode),
                           algo.status().message());
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
    g->algo_ = *algo;
    return g;
  }
  return UnimplementedError("cuBLASLt runs no form of quantised GEMM {} ({})", desc.Key(), tried);
}

QuantGemm::~QuantGemm() {
  Layouts l{op_, a_, b_, c_};
  l.Destroy();
}

Status QuantGemm::Run(cublasLtHandle_t handle, const void* w, const void* xq, const float* scales,
                      const float* w_scale, const float* x_scale, const void* bias,
                      const void* residual, void* out, void* ws, size_t ws_bytes,
                      cudaStream_t stream) const {
  const bool int8 = desc_.type == QuantType::kInt8;
  if (mode_ == QuantGemmMode::kFusedEpilogue && desc_.bias) {
    SURGE_RETURN_IF_ERROR(Set(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias));
  }
  if (!int8) SURGE_RETURN_IF_ERROR(SetScalePointers(op_, w_scale, x_scale));
  const void* c = fused_residual_ ? residual : out;
  if (mode_ == QuantGemmMode::kInt32) {
    const int32_t one = 1, zero = 0;
    SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(handle, op_, &one, w, a_, xq, b_, &zero, out, c_,
                                                out, c_, &algo_, ws, ws_bytes, stream));
    return Status::Ok();
  }
  const float one = 1.f, zero = 0.f;
  const float* beta = fused_residual_ ? &one : &zero;
  // INT8: alpha is the per-channel scale vector on the device.
  const void* alpha = int8 ? static_cast<const void*>(scales) : static_cast<const void*>(&one);
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(handle, op_, alpha, w, a_, xq, b_, beta, c, c_, out,
                                              c_, &algo_, ws, ws_bytes, stream));
  return Status::Ok();
}

}  // namespace surge::engine::cuda
