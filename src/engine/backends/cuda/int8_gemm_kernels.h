// Surge's INT8 GEMM for Hopper (sm_90a): Y[M,N] = epilogue(X[M,K] · W[N,K]ᵀ) with int8 operands,
// int32 accumulation in the warpgroup tensor cores (wgmma, TMA loads, warp-specialised persistent
// kernels instantiated from CUTLASS 3 templates), and the quantised Linear's whole epilogue fused:
//
//   v = act(acc · scale[n] + bias[n])         scale = x step · w step of column n (dequantise)
//   FP16 out:  y = v (+ residual[m, n])        residual only with act = none
//   INT8 out:  y = saturate(round_to_nearest_even(v · out_inv_scale))   the next INT8 Linear's input
//
// cuBLASLt has no INT8 kernel with such an epilogue on this card: its INT8 GEMMs write INT32, and
// a separate pass dequantises (quant_gemm.h, kInt32), which costs more than the INT8 tensor cores
// save. Activations: none or GELU, computed in the tanh form with the hardware tanh for both
// kGelu and kGeluTanh (as cuBLASLt's fused GELU epilogue; within about 1e-3 of the erf form);
// others are not implemented here.
// Tiles: several configurations (Int8GemmTileCount); the caller times them (QuantLinears) and keeps
// the fastest per row count.
// Alignment: K a multiple of 16, N a multiple of 16, every pointer 16-byte aligned. Launched with
// programmatic dependent launch when PdlEnabled (it reads X, bias and residual only after the
// grids before it have completed).
#pragma once

#include "engine/backends/cuda/kernel_common.h"

namespace surge::engine::cuda {

struct Int8GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  const void* x = nullptr;       // int8 [m, k] row-major
  const void* w = nullptr;       // int8 [n, k] row-major
  const float* scale = nullptr;  // [n]
  const void* bias = nullptr;    // FP16 [n] or null
  Activation activation = Activation::kNone;
  const void* residual = nullptr;  // FP16 [m, n] or null (activation none only, FP16 out only)
  void* y = nullptr;               // FP16 [m, n], or int8 [m, n] with int8_out
  bool int8_out = false;
  float out_inv_scale = 1.f;  // int8_out: 1 / the next layer's activation step
  int tile = 0;               // 0 .. Int8GemmTileCount() - 1
};

int Int8GemmTileCount();
const char* Int8GemmTileName(int tile);

// False (nothing to run) off sm_90, for unsupported shapes, alignments or epilogues.
bool Int8GemmCanImplement(const Int8GemmArgs& args);
size_t Int8GemmWorkspaceSize(const Int8GemmArgs& args);
cudaError_t Int8GemmRun(const Int8GemmArgs& args, void* workspace, cudaStream_t stream);

}  // namespace surge::engine::cuda
