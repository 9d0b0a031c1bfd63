// INT8 and FP8 (e4m3) GEMMs through cuBLASLt for quantised Linear layers: Y[M,N] from quantised
// X[M,K] and W stored [N,K] (K-major, the "TN" form FP8 requires), FP16 output.
//
// cuBLASLt is column-major: W [N,K] row-major is the column-major [K,N] matrix A used transposed,
// X [M,K] is B, and D [N,M] column-major is Y row-major. Dequantisation:
//   INT8  per-channel: alpha is a device vector over D's rows (N), alpha[n] = sx · sw[n];
//   FP8   per-tensor:  A and B scale pointers hold sw and sx.
// Which epilogue cuBLASLt fuses depends on the data types it supports for the device, so Create
// tries, in order, and keeps the first mode it has an algorithm for:
//   kFusedEpilogue  FP16 D with the bias (+ tanh-form GELU) epilogue, residual as C (beta = 1);
//   kScaled         FP16 D = dequantised product only; bias, activation and residual follow in
//                   BiasActRun (bias_act_kernels.h);
//   kInt32          INT8 only: INT32 D (alpha 1); DequantizeRun (quant_kernels.h) does the rest.
// A QuantGemm belongs to one execution context (one thread at a time); Run records the bias
// pointer on its descriptor.
#pragma once

#include <cublasLt.h>

#include <memory>
#include <string>

#include "core/status.h"
#include "engine/backends/cuda/kernel_common.h"
#include "engine/backends/cuda/quant_kernels.h"

namespace surge::engine::cuda {

enum class QuantGemmMode { kFusedEpilogue = 0, kScaled = 1, kInt32 = 2 };
std::string_view QuantGemmModeName(QuantGemmMode mode);

struct QuantGemmDesc {
  QuantType type = QuantType::kFp8E4M3;
  int64_t m = 0, n = 0, k = 0;
  bool bias = false;
  Activation activation = Activation::kNone;
  bool residual = false;

  std::string Key() const;  // "fp8 m=.. n=.. k=.. bias=1 act=1 res=0"
};

// cuBLASLt's INT8/FP8 kernels want every dimension a multiple of 16 (and 16-byte aligned rows);
// other layers stay in FP16.
bool QuantGemmShapeSupported(int64_t n, int64_t k);

class QuantGemm {
 public:
  // Tries the modes from `first` on; Unimplemented naming the shape when none has an algorithm.
  static Result<std::unique_ptr<QuantGemm>> Create(
      cublasLtHandle_t handle, const QuantGemmDesc& desc, size_t workspace_bytes,
      QuantGemmMode first = QuantGemmMode::kFusedEpilogue);
  ~QuantGemm();

  QuantGemmMode mode() const { return mode_; }
  const QuantGemmDesc& desc() const { return desc_; }

  // w: quantised [N,K]; xq: quantised [M,K]. INT8: `scales` = device float[N] (sx · sw[n]); FP8:
  // `w_scale`, `x_scale` = device floats. bias FP16 [N] (kFusedEpilogue only), residual FP16
  // [M,N] (kFusedEpilogue with no activation only). `out` is FP16 [M,N], or INT32 for kInt32.
  Status Run(cublasLtHandle_t handle, const void* w, const void* xq, const float* scales,
             const float* w_scale, const float* x_scale, const void* bias, const void* residual,
             void* out, void* workspace, size_t workspace_bytes, cudaStream_t stream) const;

 private:
  QuantGemm() = default;
  QuantGemmDesc desc_;
  QuantGemmMode mode_ = QuantGemmMode::kFusedEpilogue;
  bool fused_residual_ = false;  // residual passed as C
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

}  // namespace surge::engine::cuda
