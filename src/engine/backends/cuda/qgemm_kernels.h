// Surge's quantised GEMM for Hopper (sm_90a): Y[M,N] = epilogue(X[M,K] · W[N,K]ᵀ) with INT8 or FP8
// e4m3 operands, accumulated in the warpgroup tensor cores (INT32, or FP32 with FP8's fast
// accumulation; wgmma with TMA loads in warp-specialised persistent kernels instantiated from
// CUTLASS 3 templates), and the quantised Linear's whole epilogue fused:
//
//   v = act(acc · scale[n] + bias[n])      scale = x step · w step of column n (dequantise; FP8's
//                                          per-tensor steps give one value repeated N times)
//   FP16 out:      y = v (+ residual[m, n])  residual only with act = none
//   quantised out: y = the next Linear's input, int8 saturate(round_to_nearest_even(v · out_inv_
//                  scale)) or e4m3 of v · out_inv_scale saturating to ±448 (act = GELU only)
//
// cuBLASLt has no INT8 kernel with such an epilogue on this card (its INT8 GEMMs write INT32 for a
// separate dequantise pass, quant_gemm.h kInt32); its FP8 kernels fuse the same epilogue, and the
// caller times both. Activations: none or GELU, computed in the tanh form with the hardware tanh
// for kGelu and kGeluTanh alike (as cuBLASLt's fused GELU epilogue; within about 1e-3 of the erf
// form); others are not implemented here. FP8 with an FP16 GELU output is not instantiated (FFN1's
// output feeds an FP8 FFN2 as e4m3).
// Tiles: several configurations (QGemmTileCount); the caller times them (QuantLinears) and keeps
// the fastest per row count. One of them (QGemmArgs::ln) also runs the LayerNorm that follows a
// residual Linear, in its epilogue.
// Alignment: K a multiple of 16, N a multiple of 16, every pointer 16-byte aligned. Launched with
// programmatic dependent launch when PdlEnabled (it reads X, bias and residual only after the
// grids before it have completed).
#pragma once

#include "engine/backends/cuda/kernel_common.h"

namespace surge::engine::cuda {

struct QGemmArgs {
  QuantType type = QuantType::kInt8;  // of x and w
  int64_t m = 0, n = 0, k = 0;
  const void* x = nullptr;       // int8 / e4m3 [m, k] row-major
  const void* w = nullptr;       // int8 / e4m3 [n, k] row-major
  const float* scale = nullptr;  // [n]
  const void* bias = nullptr;    // FP16 [n] or null
  Activation activation = Activation::kNone;
  const void* residual = nullptr;  // FP16 [m, n] or null (activation none, FP16 out only)
  void* y = nullptr;               // FP16 [m, n], or [m, n] of `type` with q_out
  bool q_out = false;
  float out_inv_scale = 1.f;  // q_out: 1 / the next layer's activation step
  int tile = 0;               // 0 .. QGemmTileCount() - 1
  // FP16 operands instead (x and w FP16, `type` ignored, accumulated in FP32, no scale: `scale`
  // may be null; FP16 output, q_out false). Tiles 1 and 2 only (64 x 128 x 64 and 128 x 128 x 64
  // ping-pong): the FP16 Linear's GEMM of our own at few rows, launched with PDL like the
  // quantised GEMMs, so that a small batch's chain of kernels is programmatic end to end.
  bool half = false;
  // The LayerNorm after a residual Linear, in the epilogue (tile 5 only; gamma null: none):
  // y = LayerNorm(act(x w) + bias + residual) in FP16 instead of the sum, with the quantised copy
  // q of y for the next Linear when q.y is set. N a multiple of 128 up to 1024, activation none,
  // q_out false; no workspace (the row statistics go between the CTAs of a cluster).
  struct LayerNorm {
    const float* gamma = nullptr;  // [n]
    const float* beta = nullptr;   // [n]
    float epsilon = 1e-5f;
    QuantizedCopy q;
  } ln;
};

int QGemmTileCount();
const char* QGemmTileName(int tile);
// The tile with the LayerNorm epilogue (QGemmArgs::ln; it runs nothing else).
int QGemmLayerNormTile();
// The clusters of n / 128 CTAs that tile runs at once on the current device for a `t` GEMM of n
// columns (0: none; it takes no such layer).
int QGemmLayerNormClusters(QuantType t, int64_t n);

// False (nothing to run) off sm_90, for unsupported shapes, alignments or epilogues.
bool QGemmCanImplement(const QGemmArgs& args);
size_t QGemmWorkspaceSize(const QGemmArgs& args);
cudaError_t QGemmRun(const QGemmArgs& args, void* workspace, cudaStream_t stream);

}  // namespace surge::engine::cuda
