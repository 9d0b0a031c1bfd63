// Low-precision Linear (Y = act(X·W + B) + R) on oneDNN matmul: INT8 (VNNI/AMX) and BF16
// (AVX-512 BF16/AMX), float32 accumulation of the epilogue, float32 or INT8 output.
//
// INT8: symmetric quantisation, per-output-channel weight scales sw[n] = max_k |W[k,n]| / 127 and
// one per-tensor activation scale sx = amax / 127 from calibration. X (float32) is quantised by a
// oneDNN reorder (round to nearest even, saturating) into a scratch buffer unless its producer
// already wrote INT8 at sx (saturating to [-128, 127] steps, as TensorRT's quantise). The int32
// accumulators are dequantised in the GEMM epilogue (oneDNN output scales sx·sw[n]; the bias is
// folded in before the scales as B[n] / (sx·sw[n])), followed by the activation and the residual
// add as post-ops. With `y_scale` > 0 the epilogue requantises: Y is written as INT8 at step
// y_scale (an eltwise-linear post-op 1/y_scale, then oneDNN's saturating conversion), for a
// consumer that is itself an INT8 Linear.
//
// BF16: W is stored as bfloat16, X is converted (reorder, round to nearest even) per call, output
// and epilogue in float32.
//
// As in linear.h, weights are packed at build time in the layout oneDNN picks for the profile's
// opt M, and primitives are created per distinct M on first use (thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/status.h"
#include "engine/backends/cpu/linear.h"

namespace surge::engine::cpu {

enum class LinearPrecision : uint8_t { kFp32 = 0, kInt8 = 1, kBf16 = 2 };
std::string_view LinearPrecisionName(LinearPrecision p);  // "fp32", "int8", "bf16"

struct QuantLinearSpec {
  LinearSpec base;
  LinearPrecision precision = LinearPrecision::kInt8;
  float x_scale = 0.f;  // INT8: step of the quantised input (> 0)
  float y_scale = 0.f;  // INT8: 0 → float32 output; > 0 → INT8 output at this step
  int w_max = 127;      // INT8: the packed weights' range [-w_max, w_max] (Int8WeightMax)
};

struct PackedQuantWeights {
  std::string desc;  // oneDNN memory descriptor bytes; empty: plain row-major [K,N]
  std::vector<uint8_t> data;
  std::vector<float> w_scales;  // INT8: per output channel (N); empty for BF16
  int w_max = 0;                // INT8: the weights lie in [-w_max, w_max] (Int8WeightMax)
  std::string impl;
};

// Per-channel symmetric INT8 weights: scales[n] = max_k |w[k,n]| / qmax (1 for an all-zero
// column), q[k,n] = round(w[k,n] / scales[n]) in [-qmax, qmax]. Row-major [K,N] in and out.
void QuantizeWeightsPerChannel(const float* w, int64_t k, int64_t n, int8_t* q, float* scales,
                               int qmax = 127);

// The weight range INT8 Linears use on this CPU: 127 with VNNI; 63 without it, where oneDNN's
// u8 x s8 multiply-add (vpmaddubsw) sums pairs in 16 bits and 255 * 127 * 2 would saturate
// (255 * 63 * 2 = 32130 fits): one bit of weight precision for exact sums.
// SURGE_CPU_INT8_WEIGHT_MAX=63 asks for 63 on a VNNI CPU too (plans that load on either kind);
// a plan packed at 127 is refused on a CPU without VNNI.
int Int8WeightMax();

// Quantises (INT8) or converts (BF16) row-major w[K,N] and reorders it into the layout oneDNN
// prefers for M = m_opt. Errors when the spec is invalid (INT8 without a positive x_scale).
Result<PackedQuantWeights> PackQuantLinearWeights(const QuantLinearSpec& spec, const float* w,
                                                  int64_t m_opt);

class QuantLinearKernel {
 public:
  // `weights` (in the layout `packed_desc` describes, plain when empty) must stay valid and
  // 64-byte aligned for the kernel's life; `w_scales` has N entries for INT8.
  static Result<std::unique_ptr<QuantLinearKernel>> Create(const QuantLinearSpec& spec,
                                                           std::string_view packed_desc,
                                                           const void* weights, size_t weight_bytes,
                                                           std::vector<float> w_scales);
  ~QuantLinearKernel();

  // y[M,N] = act(x[M,K]·W + bias) + residual. x is float32, or INT8 at spec.x_scale when
  // `x_is_int8` (INT8 kernels only); y is float32, or INT8 at spec.y_scale when that is > 0.
  // `scratch` receives the quantised/converted X (grown as needed; owned by the caller, one per
  // thread). Thread-safe otherwise.
  Status Run(const void* x, bool x_is_int8, const float* bias, const float* residual, void* y,
             int64_t m, AlignedBuffer* scratch) const;

  const QuantLinearSpec& spec() const { return spec_; }
  bool int8_output() const {
    return spec_.precision == LinearPrecision::kInt8 && spec_.y_scale > 0;
  }
  std::string Describe() const;

 private:
  struct Impl;
  QuantLinearKernel(std::unique_ptr<Impl> impl, QuantLinearSpec spec);
  std::unique_ptr<Impl> impl_;
  QuantLinearSpec spec_;
};

}  // namespace surge::engine::cpu
