// LayerNorm and SkipLayerNorm over the last axis of a row-major [rows, cols] tensor, FP16/BF16 in
// and out, mean and variance in float32 (two passes over values held in registers), so inputs
// whose squares overflow FP16 still normalise without NaN.
//
//   sum = x + skip? + bias?          (float32; written to `sum_out` in the I/O type when given)
//   y   = (sum - mean) / sqrt(var + epsilon) * gamma + beta
//   q   = quantised y (optional; QuantizedCopy), for an INT8/FP8 GEMM reading y next
#pragma once

#include "engine/backends/cuda/kernel_common.h"

namespace surge::engine::cuda {

struct LayerNormArgs {
  DataType dtype = DataType::kF16;
  int64_t rows = 0;
  int cols = 0;
  const void* x = nullptr;       // [rows, cols]
  const void* skip = nullptr;    // [rows, cols] or null
  const void* bias = nullptr;    // [cols] (I/O type) or null
  const float* gamma = nullptr;  // [cols]
  const float* beta = nullptr;   // [cols]
  float epsilon = 1e-5f;
  void* y = nullptr;        // [rows, cols]; may alias x or skip
  void* sum_out = nullptr;  // [rows, cols] or null; may alias x or skip
  QuantizedCopy q;          // optional quantised copy of y (bytes [rows, cols])
};

// L2 normalisation over the last axis (the sum of squares in float32):
//   y = x / sqrt(sum(x^2) + epsilon)        (eps_max false)
//   y = x / max(sqrt(sum(x^2)), epsilon)    (eps_max true)
struct L2NormalizeArgs {
  DataType dtype = DataType::kF16;
  int64_t rows = 0;
  int cols = 0;
  const void* x = nullptr;  // [rows, cols]
  void* y = nullptr;        // [rows, cols]; may alias x
  float epsilon = 1e-12f;
  bool eps_max = false;
};

// Any cols >= 1.
bool L2NormalizeCanImplement(const L2NormalizeArgs& args);
cudaError_t L2NormalizeRun(const L2NormalizeArgs& args, void* workspace, cudaStream_t stream);

// cols in [1, 4096].
bool LayerNormCanImplement(const LayerNormArgs& args);
size_t LayerNormWorkspaceSize(const LayerNormArgs& args);
cudaError_t LayerNormRun(const LayerNormArgs& args, void* workspace, cudaStream_t stream);

}  // namespace surge::engine::cuda
