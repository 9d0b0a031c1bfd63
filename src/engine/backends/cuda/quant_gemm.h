// INT8 and FP8 (e4m3) GEMMs through cuBLASLt for quantised Linear layers: Y[M,N] from quantised
// X[M,K] and W stored [N,K] (K-major, the "TN" form FP8 requires), FP16 output.
//
// cuBLASLt is column-major: W [N,K] row-major is the column-major [K,N] matrix A used transposed,
// X [M,K] is B, and D [N,M] column-major is Y row-major. Dequantisation:
//   INT8  per-channel: alpha is a device vector over D's rows (N), alpha[n] = sx · sw[n];
//   FP8   per-tensor:  either the A and B scale pointers hold sw and sx (each at its own 256-byte
//                      aligned address), or, with `scale_in_alpha`, a host alpha = sw · sx and no
//                      scale pointers (the scales are static, so both mean the same product).
// Which epilogue cuBLASLt fuses depends on the data types it supports for the device, so Create
// tries, in order, and keeps the first mode it has an algorithm for:
//   kFusedEpilogue  FP16 D with the bias (+ tanh-form GELU) epilogue, residual as C (beta = 1);
//   kScaled         FP16 D = dequantised product only; bias, activation and residual follow in
//                   BiasActRun (bias_act_kernels.h);
//   kInt32          INT8 only: INT32 D (alpha 1) in scratch; DequantizeRun (quant_kernels.h)
//                   does the rest;
//   kFloat32        FP8 only: FP32 D (dequantised product) in scratch; DequantizeRun does the rest.
// cuBLASLt's heuristic judges a descriptor, not the pointers of a call: an algorithm it returns
// can still be refused by cublasLtMatmul (CUBLAS_STATUS_NOT_SUPPORTED, nothing launched). So a
// plan keeps the heuristic's first kMaxAlgos algorithms and Run moves to the next one when a call
// is refused; Create with `probe` operands runs each candidate once on them and keeps only those
// from the first that ran.
// With `fp8_out` (FP8, kFusedEpilogue, no residual) D is e4m3 at a device scale: the epilogue's
// result times d_scale, saturated, is the quantised input of the FP8 GEMM that follows (its
// 1 / activation step), so that layer needs no quantise pass and the FP16 output is never written.
// Algorithms: Tune times every candidate on probe operands (back-to-back runs behind a delay
// kernel, as the FP16 GEMMs are timed) and orders them fastest first; Create puts a `preferred`
// algorithm (one tuned at another row count of the same bucket) first when cuBLASLt accepts it for
// the shape.
// A QuantGemm belongs to one execution context (one thread at a time); Run records the bias and
// scale pointers on its descriptor.
#pragma once

#include <cublasLt.h>

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/backends/cuda/kernel_common.h"
#include "engine/backends/cuda/quant_kernels.h"

namespace surge::engine::cuda {

enum class QuantGemmMode { kFusedEpilogue = 0, kScaled = 1, kInt32 = 2, kFloat32 = 3 };
std::string_view QuantGemmModeName(QuantGemmMode mode);
// The mode writes an accumulator (INT32 / FP32) to scratch that DequantizeRun turns into FP16.
bool QuantGemmModeAccumulates(QuantGemmMode mode);

struct QuantGemmDesc {
  QuantType type = QuantType::kFp8E4M3;
  int64_t m = 0, n = 0, k = 0;
  bool bias = false;
  Activation activation = Activation::kNone;
  bool residual = false;
  // FP8: the dequantising product sw · sx as the host alpha instead of A/B scale pointers.
  bool scale_in_alpha = false;
  float alpha = 1.f;     // used when scale_in_alpha
  bool fp8_out = false;  // D e4m3 at operands.d_scale (FP8, fused epilogue, no residual)
  // FP8: the tensor cores' own accumulator for the whole K loop (CUBLASLT_MATMUL_DESC_FAST_ACCUM)
  // instead of cuBLASLt's periodic promotion to FP32: faster, a few more ulps on long K.
  bool fast_accum = false;

  std::string Key() const;  // "fp8 m=.. n=.. k=.. bias=1 act=1 res=0 alpha=0 d8=0 fa=0"
};

// The mode can express the desc's Linear at all (whether cuBLASLt runs it is another matter).
bool QuantGemmModeApplies(const QuantGemmDesc& desc, QuantGemmMode mode);

// cuBLASLt's INT8/FP8 kernels want every dimension a multiple of 16 (and 16-byte aligned rows);
// other layers stay in FP16.
bool QuantGemmShapeSupported(int64_t n, int64_t k);

// Device operands of one call. w: quantised [N,K]; xq: quantised [M,K]. INT8: `scales` = device
// float[N] (sx · sw[n]); FP8 (unless scale_in_alpha): `w_scale`, `x_scale` = device floats, each
// 16-byte aligned. bias FP16 [N] (kFusedEpilogue only), residual FP16 [M,N] (kFusedEpilogue with
// no activation only). `out` is FP16 [M,N], INT32 [M,N] for kInt32, FP32 [M,N] for kFloat32.
struct QuantGemmOperands {
  const void* w = nullptr;
  const void* xq = nullptr;
  const float* scales = nullptr;
  const float* w_scale = nullptr;
  const float* x_scale = nullptr;
  const void* bias = nullptr;
  const void* residual = nullptr;
  void* out = nullptr;
  // fp8_out: `out` holds e4m3 bytes [M,N]; d_scale is a device float (16-byte aligned) and
  // `unused_c` any other device buffer of FP16 [M,N] (cuBLASLt's C, not read: beta is 0).
  const float* d_scale = nullptr;
  const void* unused_c = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

class QuantGemm {
 public:
  static constexpr int kMaxAlgos = 8;

  // Tries the modes from `first` on (only `first` with `only_first`); Unimplemented naming the
  // shape and what each mode answered when none has an algorithm (or, with `probe`, none of its
  // algorithms ran on the probe operands: device buffers of the desc's sizes holding finite
  // values, whose outputs are written). `preferred`: see above.
  static Result<std::unique_ptr<QuantGemm>> Create(
      cublasLtHandle_t handle, const QuantGemmDesc& desc, size_t workspace_bytes,
      QuantGemmMode first = QuantGemmMode::kFusedEpilogue, const QuantGemmOperands* probe = nullptr,
      bool only_first = false, const cublasLtMatmulAlgo_t* preferred = nullptr);
  ~QuantGemm();

  // Times every algorithm on `probe` (operands of the desc's sizes on probe.stream) and orders
  // them fastest first; algorithms that fail to run are dropped (Unimplemented when none runs).
  Status Tune(cublasLtHandle_t handle, const QuantGemmOperands& probe);
  // The algorithm the next Run tries first, and its measured time (0 before Tune).
  const cublasLtMatmulAlgo_t& algo() const { return algos_[current_]; }
  float tuned_us() const { return tuned_us_; }

  QuantGemmMode mode() const { return mode_; }
  const QuantGemmDesc& desc() const { return desc_; }

  // Enqueues the GEMM on operands.stream with the current algorithm, moving on to the next one
  // when cuBLASLt refuses a call; Unimplemented when it refused every one (nothing enqueued).
  Status Run(cublasLtHandle_t handle, const QuantGemmOperands& operands) const;

 private:
  QuantGemm() = default;
  cublasStatus_t Call(cublasLtHandle_t handle, const QuantGemmOperands& o, size_t algo) const;

  QuantGemmDesc desc_;
  QuantGemmMode mode_ = QuantGemmMode::kFusedEpilogue;
  bool fused_residual_ = false;  // residual passed as C
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatrixLayout_t d_ = nullptr;  // fp8_out only (else D uses c_)
  std::vector<cublasLtMatmulAlgo_t> algos_;
  mutable size_t current_ = 0;  // the algorithm the last call ran
  float tuned_us_ = 0.f;
};

}  // namespace surge::engine::cuda
