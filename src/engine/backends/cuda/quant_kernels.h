// Kernels of the quantised Linear path (INT8 and FP8 e4m3 GEMMs through cuBLASLt, quant_gemm.h):
// quantising FP16 activations at a per-tensor scale, dequantising INT32 accumulators with
// per-channel scales (or FP32 accumulators of an FP8 GEMM) plus the Linear epilogue, and host
// conversions for weights and tests.
//
//   Quantize:   q = saturate(round_to_nearest_even(x · inv_scale)), int8 in [-128, 127] or e4m3
//               (finite, saturating to +-448).
//   Dequantize: y = act(acc · scale[col] + bias[col]) + residual, FP16 out, float32 arithmetic;
//               acc INT32 or FP32, scale 1 where `scale` is null.
#pragma once

#include "engine/backends/cuda/kernel_common.h"

namespace surge::engine::cuda {

struct QuantizeArgs {
  QuantType type = QuantType::kInt8;
  int64_t n = 0;            // elements
  const void* x = nullptr;  // FP16
  float inv_scale = 1.f;    // 1 / step
  void* y = nullptr;        // int8 or e4m3 bytes
};

bool QuantizeCanImplement(const QuantizeArgs& args);
size_t QuantizeWorkspaceSize(const QuantizeArgs& args);
cudaError_t QuantizeRun(const QuantizeArgs& args, void* workspace, cudaStream_t stream);

struct DequantizeArgs {
  int64_t rows = 0;
  int cols = 0;
  const void* acc = nullptr;  // [rows, cols], INT32 or (float_acc) FP32
  bool float_acc = false;
  const float* scale = nullptr;  // [cols]: activation step x weight step of the column, or null
  const void* bias = nullptr;    // FP16 [cols] or null
  Activation activation = Activation::kNone;
  const void* residual = nullptr;  // FP16 [rows, cols] or null, added after the activation
  void* y = nullptr;               // FP16 [rows, cols]
};

bool DequantizeCanImplement(const DequantizeArgs& args);
size_t DequantizeWorkspaceSize(const DequantizeArgs& args);
cudaError_t DequantizeRun(const DequantizeArgs& args, void* workspace, cudaStream_t stream);

// Scalar host conversions through CUDA's own headers (cuda_fp8.h, cuda_fp16.h, cuda_bf16.h):
// float -> e4m3 (saturating to finite, round to nearest even) and back; float -> FP16 bits and
// back; float -> BF16 bits. The references for host_convert.h's bulk conversions.
void FloatToE4m3Host(const float* x, uint8_t* y, int64_t n);
float E4m3ToFloatHost(uint8_t v);
uint16_t FloatToHalfHost(float v);
float HalfToFloatHost(uint16_t v);
uint16_t FloatToBf16Host(float v);

}  // namespace surge::engine::cuda
