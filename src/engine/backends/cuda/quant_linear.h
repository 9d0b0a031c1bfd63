// Quantised Linear layers of the CUDA backend: INT8 (per-channel weight scales) and FP8 e4m3
// (per-tensor scales) GEMMs for the Linear ops an int8/fp8 build's quantisation spec marks
// (BuilderConfig::quant, filled by engine/quant from a calibration cache and the accuracy guard).
// Everything else (attention, LayerNorm, unmarked Linears) runs in FP16.
//
// Per call: the FP16 input is quantised at the layer's calibrated activation step
// (quant_kernels.h), the GEMM runs in cuBLASLt (quant_gemm.h) and its epilogue writes FP16. Weights
// are quantised on the host from the plan's FP32 constants when the engine loads, stored [N,K].
//
// QuantLinears is built once per engine (immutable afterwards, shared by contexts);
// QuantLinearRunner holds one context's scratch and GEMM plans (one thread at a time).
#pragma once

#include <cublasLt.h>

#include <map>
#include <memory>
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
  QuantGemmMode mode = QuantGemmMode::kFusedEpilogue;  // chosen by Prepare
  const void* w_dev = nullptr;                         // device copy of `weight`
  const float* scales_dev = nullptr;  // INT8: x_scale · w_scales[n]; FP8: {w_scale, x_scale}
};

// W [K,N] row-major float32 -> quantised [N,K] bytes and scales: INT8 per output channel
// (scale = max_k |W[k,n]| / 127, 1 for an all-zero column; round to nearest even, clamp to
// +-127), FP8 e4m3 per tensor (scale = max |W| / 448).
void QuantizeLinearWeight(const Tensor& w, QuantType type, std::vector<uint8_t>* q,
                          std::vector<float>* scales);

struct DeviceFreeDeleter {
  void operator()(void* p) const;
};
using DeviceBuffer = std::unique_ptr<void, DeviceFreeDeleter>;

class QuantLinears {
 public:
  // The quantised Linear ops of `program` under `config` (int8/fp8 builds; empty otherwise).
  // Errors: an int8/fp8 build without a quantisation spec, a layer marked int8/fp8 whose input
  // has no calibrated threshold or whose shape cuBLASLt's INT8/FP8 kernels cannot take, a layer
  // marked with a precision this backend does not run.
  static Result<QuantLinears> Analyze(const ir::Graph& graph, const Program& program,
                                      const BuilderConfig& config);

  // Needs a GPU: chooses each op's GEMM mode at the largest row count and copies weights and
  // scales to the device.
  Status Prepare(cublasLtHandle_t handle, size_t workspace_bytes, int64_t max_token_rows,
                 int64_t max_batch_rows);

  bool empty() const { return ops_.empty(); }
  const QuantLinearOp* Find(size_t op_index) const;
  const std::map<size_t, QuantLinearOp>& ops() const { return ops_; }
  size_t device_bytes() const { return device_bytes_; }
  // Scratch a context needs: quantised inputs and, for INT32-mode ops, accumulators.
  struct Scratch {
    size_t xq = 0, acc = 0;
    size_t total() const { return xq + acc; }
  };
  Scratch ScratchBytes(int64_t max_token_rows, int64_t max_batch_rows) const;
  std::string Describe(const QuantLinearOp& op) const;

 private:
  std::map<size_t, QuantLinearOp> ops_;
  DeviceBuffer device_;
  size_t device_bytes_ = 0;
};

class QuantLinearRunner {
 public:
  // Allocates `sizes` of scratch (QuantLinears::ScratchBytes at the profile max).
  Status Init(const QuantLinears::Scratch& sizes);
  // y [rows, N] FP16 = act(x [rows, K] FP16 · W + bias) + residual.
  Status Run(const QuantLinearOp& op, cublasLtHandle_t handle, int64_t rows, const void* x,
             const void* bias, const void* residual, void* y, void* workspace,
             size_t workspace_bytes, cudaStream_t stream);

 private:
  std::map<std::pair<size_t, int64_t>, std::unique_ptr<QuantGemm>> plans_;
  DeviceBuffer scratch_;
  size_t xq_bytes_ = 0, acc_bytes_ = 0;
};

}  // namespace surge::engine::cuda
