// Bias + activation (+ residual) on a row-major [rows, cols] tensor: the Linear epilogue for the
// cases cuBLASLt's fused epilogues do not cover (exact erf GELU, tanh, relu, an activation
// followed by a residual), and the standalone Gelu op. Float32 arithmetic.
//
//   y = act(x + bias?) + residual?
#pragma once

#include "engine/backends/cuda/kernel_common.h"

namespace surge::engine::cuda {

struct BiasActArgs {
  DataType dtype = DataType::kF16;
  int64_t rows = 0;
  int cols = 0;
  Activation activation = Activation::kNone;
  const void* x = nullptr;         // [rows, cols]
  const void* bias = nullptr;      // [cols] or null
  const void* residual = nullptr;  // [rows, cols] or null
  void* y = nullptr;               // [rows, cols]; may alias x or residual
};

bool BiasActCanImplement(const BiasActArgs& args);
size_t BiasActWorkspaceSize(const BiasActArgs& args);
cudaError_t BiasActRun(const BiasActArgs& args, void* workspace, cudaStream_t stream);

}  // namespace surge::engine::cuda
