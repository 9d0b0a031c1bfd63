// Quantised Linear layers of the CUDA backend: INT8 (per-channel weight scales) and FP8 e4m3
// (per-tensor scales) GEMMs for the Linear ops an int8/fp8 build's quantisation spec marks
// (BuilderConfig::quant, filled by engine/quant from a calibration cache and the accuracy guard).
// Everything else (attention, LayerNorm, unmarked Linears) runs in FP16.
//
// Per call: the FP16 input is quantised at the layer's calibrated activation step
// (quant_kernels.h), the GEMM runs in cuBLASLt (quant_gemm.h) and its epilogue writes FP16. Weights
// are quantised on the host from the plan's FP32 constants when the engine loads, stored [N,K].
//
// How each layer's GEMM runs is chosen when the engine loads, by running it (ChooseQuantGemm):
// the most fused mode, FP8 scales as scale pointers or as alpha, at the profile's largest row
// count, at 1 row and at an odd count; failing that, with rows padded to a multiple of 16 into
// the accumulator scratch. A layer cuBLASLt runs in no such form falls back to FP16 and the
// reason is kept (QuantLinears::FallbackReason, the engine's Describe, a warning in the log).
//
// QuantLinears is built once per engine (immutable afterwards, shared by contexts);
// QuantLinearRunner holds one context's scratch and GEMM plans (one thread at a time).
#pragma once

#include <cublasLt.h>

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/backends/cuda/lowering.h"
#include "engine/backends/cuda/quant_gemm.h"
#include "engine/ir/graph.h"
#include "engine/runtime/backend.h"

namespace surge::engine::cuda {

// The config AnalyzeGraph sees: int8 and fp8 builds run every unquantised op in FP16.
BuilderConfig QuantBaseConfig(const BuilderConfig& config);

struct QuantLinearOp {
  size_t op = 0;  // index into Program::ops
  std::string node;
  QuantType type = QuantType::kFp8E4M3;
  int64_t k = 0, n = 0;
  bool bias = false, residual = false;
  Activation activation = Activation::kNone;
  bool batch_rows = false;      // runs on [B, C] rows rather than token rows
  float x_scale = 0;            // activation step: amax / 127 (INT8) or amax / 448 (FP8)
  std::vector<float> w_scales;  // INT8: per output channel; FP8: one
  std::vector<uint8_t> weight;  // quantised W, [N,K] row-major (host copy)
  // Chosen by ChooseQuantGemm (QuantLinears::Prepare):
  QuantGemmMode mode = QuantGemmMode::kFusedEpilogue;
  bool scale_in_alpha = false;  // FP8: sw · sx as alpha rather than A/B scale pointers
  bool pad_rows = false;        // GEMMs run on rows rounded up to 16 (accumulating modes only)
  const void* w_dev = nullptr;  // device copy of `weight`
  const float* scales_dev = nullptr;  // QuantScaleFloats(*this) on the device
};

// FP8 scales on the device: w_scale at 0, x_scale at this float offset (256 bytes on).
constexpr int kFp8XScaleAt = 64;
// What scales_dev holds: INT8 x_scale · w_scales[n] (n floats); FP8 w_scale at 0 and x_scale at
// kFp8XScaleAt.
std::vector<float> QuantScaleFloats(const QuantLinearOp& op);
// Rows the GEMM of `op` runs on for `rows` input rows (rounded up to 16 with pad_rows).
int64_t QuantGemmRows(const QuantLinearOp& op, int64_t rows);
// The GEMM descriptor of `op` at `rows` input rows.
QuantGemmDesc QuantLinearGemmDesc(const QuantLinearOp& op, int64_t rows);

// W [K,N] row-major float32 -> quantised [N,K] bytes and scales: INT8 per output channel
// (scale = max_k |W[k,n]| / 127, 1 for an all-zero column; round to nearest even, clamp to
// +-127), FP8 e4m3 per tensor (scale = max |W| / 448).
void QuantizeLinearWeight(const Tensor& w, QuantType type, std::vector<uint8_t>* q,
                          std::vector<float>* scales);

struct DeviceFreeDeleter {
  void operator()(void* p) const;
};
using DeviceBuffer = std::unique_ptr<void, DeviceFreeDeleter>;

// Zeroed device operands big enough for every layer ChooseQuantGemm probes.
class QuantProbeBuffers {
 public:
  Status Allocate(int64_t rows, int64_t n, int64_t k, size_t workspace_bytes);
  // Operands for `op` at `gemm_rows` (which must fit the allocation).
  QuantGemmOperands Operands(const QuantLinearOp& op, int64_t gemm_rows) const;
  size_t workspace_bytes() const { return ws_bytes_; }

 private:
  DeviceBuffer mem_;
  char *w_ = nullptr, *x_ = nullptr, *out_ = nullptr, *res_ = nullptr, *bias_ = nullptr,
       *scales_ = nullptr, *ws_ = nullptr;
  size_t ws_bytes_ = 0;
  int64_t rows_ = 0, n_ = 0, k_ = 0;
};

// Chooses how `op` runs (mode from `first` on, FP8 scale form, row padding) by running its GEMM
// on `probe` at every count in `rows`; sets op->mode, scale_in_alpha, pad_rows. Unimplemented,
// listing what cuBLASLt answered for each form, when none ran at all of them.
Status ChooseQuantGemm(cublasLtHandle_t handle, const QuantProbeBuffers& probe,
                       std::span<const int64_t> rows, QuantGemmMode first, QuantLinearOp* op);

class QuantLinears {
 public:
  // The quantised Linear ops of `program` under `config` (int8/fp8 builds; empty otherwise).
  // Errors: an int8/fp8 build without a quantisation spec, a layer marked int8/fp8 whose input
  // has no calibrated threshold or whose shape cuBLASLt's INT8/FP8 kernels cannot take, a layer
  // marked with a precision this backend does not run.
  static Result<QuantLinears> Analyze(const ir::Graph& graph, const Program& program,
                                      const BuilderConfig& config);

  // Needs a GPU: chooses how each op's GEMM runs (ChooseQuantGemm), drops the ops cuBLASLt runs
  // in no form (they run FP16; FallbackReason says why), copies weights and scales to the device.
  Status Prepare(cublasLtHandle_t handle, size_t workspace_bytes, int64_t max_token_rows,
                 int64_t max_batch_rows);

  bool empty() const { return ops_.empty(); }
  const QuantLinearOp* Find(size_t op_index) const;
  // Why a layer marked int8/fp8 runs FP16 after all ("" when it does not).
  std::string FallbackReason(size_t op_index) const;
  const std::map<size_t, std::string>& fallbacks() const { return fallbacks_; }
  const std::map<size_t, QuantLinearOp>& ops() const { return ops_; }
  size_t device_bytes() const { return device_bytes_; }
  // Scratch a context needs: quantised inputs and, for INT32-mode ops, accumulators.
  struct Scratch {
    size_t xq = 0, acc = 0;
    size_t total() const { return xq + acc; }
  };
  Scratch ScratchBytes(int64_t max_token_rows, int64_t max_batch_rows) const;
  // The scratch one op needs at `rows` input rows.
  static Scratch ScratchFor(const QuantLinearOp& op, int64_t rows);
  std::string Describe(const QuantLinearOp& op) const;

 private:
  std::map<size_t, QuantLinearOp> ops_;
  std::map<size_t, std::string> fallbacks_;  // op index -> why it runs FP16
  DeviceBuffer device_;
  size_t device_bytes_ = 0;
};

class QuantLinearRunner {
 public:
  // Allocates `sizes` of scratch (QuantLinears::ScratchBytes at the profile max).
  Status Init(const QuantLinears::Scratch& sizes);
  // y [rows, N] FP16 = act(x [rows, K] FP16 · W + bias) + residual: Quantize, then Gemm.
  Status Run(const QuantLinearOp& op, cublasLtHandle_t handle, int64_t rows, const void* x,
             const void* bias, const void* residual, void* y, void* workspace,
             size_t workspace_bytes, cudaStream_t stream);
  // x at the layer's activation step into the context's scratch.
  Status Quantize(const QuantLinearOp& op, int64_t rows, const void* x, cudaStream_t stream);
  // The GEMM and its epilogue on the input the last Quantize wrote.
  Status Gemm(const QuantLinearOp& op, cublasLtHandle_t handle, int64_t rows, const void* bias,
              const void* residual, void* y, void* workspace, size_t workspace_bytes,
              cudaStream_t stream);

 private:
  Status RunPlan(const QuantLinearOp& op, const QuantGemm& g, cublasLtHandle_t handle, int64_t rows,
                 const void* xq, const void* bias, const void* residual, void* y, void* workspace,
                 size_t workspace_bytes, cudaStream_t stream);

  std::map<std::pair<size_t, int64_t>, std::unique_ptr<QuantGemm>> plans_;
  DeviceBuffer scratch_;
  size_t xq_bytes_ = 0, acc_bytes_ = 0;
};

}  // namespace surge::engine::cuda
