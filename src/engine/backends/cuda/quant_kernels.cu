#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "engine/backends/cuda/device_math.cuh"
#include "engine/backends/cuda/quant_kernels.h"

namespace surge::engine::cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxGridRows = 65535;

// Eight elements per thread: one 16-byte load of FP16, one 8-byte store.
__global__ void __launch_bounds__(kThreads) QuantizeKernel(QuantizeArgs a) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * 8;
  if (i >= a.n) return;
  const __half* x = static_cast<const __half*>(a.x) + i;
  uint8_t* y = static_cast<uint8_t*>(a.y) + i;
  if (i + 8 <= a.n) {
    alignas(16) __half v[8];
    *reinterpret_cast<int4*>(v) = *reinterpret_cast<const int4*>(x);
    alignas(8) uint8_t q[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) q[j] = QuantizeByte(a.type, __half2float(v[j]) * a.inv_scale);
    *reinterpret_cast<uint2*>(y) = *reinterpret_cast<const uint2*>(q);
  } else {
    for (int64_t j = 0; i + j < a.n; ++j) {
      y[j] = QuantizeByte(a.type, __half2float(x[j]) * a.inv_scale);
    }
  }
}

// One thread per 4 consecutive columns of a row; blocks walk rows (grid y).
template <typename Acc>
__global__ void __launch_bounds__(kThreads) DequantizeKernel(DequantizeArgs a) {
  const int c0 = (blockIdx.x * kThreads + threadIdx.x) * 4;
  if (c0 >= a.cols) return;
  float s[4], b[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    s[j] = a.scale ? a.scale[c0 + j] : 1.f;
    b[j] = a.bias ? __half2float(static_cast<const __half*>(a.bias)[c0 + j]) : 0.f;
  }
  const Acc* accs_in = static_cast<const Acc*>(a.acc);
  for (int64_t r = blockIdx.y; r < a.rows; r += gridDim.y) {
    const int64_t at = r * a.cols + c0;
    alignas(16) Acc accs[4];
    *reinterpret_cast<int4*>(accs) = *reinterpret_cast<const int4*>(accs_in + at);
    alignas(8) __half out[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float v = ApplyActivation(a.activation, static_cast<float>(accs[j]) * s[j] + b[j]);
      if (a.residual) v += __half2float(static_cast<const __half*>(a.residual)[at + j]);
      out[j] = __float2half_rn(v);
    }
    *reinterpret_cast<uint2*>(static_cast<__half*>(a.y) + at) =
        *reinterpret_cast<const uint2*>(out);
  }
}

}  // namespace

bool QuantizeCanImplement(const QuantizeArgs& a) {
  return a.n >= 0 && a.x && a.y && reinterpret_cast<uintptr_t>(a.x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(a.y) % 8 == 0;
}
size_t QuantizeWorkspaceSize(const QuantizeArgs&) { return 0; }

cudaError_t QuantizeRun(const QuantizeArgs& a, void*, cudaStream_t stream) {
  if (a.n == 0) return cudaSuccess;
  const int64_t threads = (a.n + 7) / 8;
  const unsigned blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
  QuantizeKernel<<<blocks, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

bool DequantizeCanImplement(const DequantizeArgs& a) {
  return a.rows >= 0 && a.cols > 0 && a.cols % 4 == 0 && a.acc && (a.scale || a.float_acc) && a.y &&
         reinterpret_cast<uintptr_t>(a.acc) % 16 == 0 && reinterpret_cast<uintptr_t>(a.y) % 8 == 0;
}
size_t DequantizeWorkspaceSize(const DequantizeArgs&) { return 0; }

cudaError_t DequantizeRun(const DequantizeArgs& a, void*, cudaStream_t stream) {
  if (a.rows == 0) return cudaSuccess;
  const unsigned gx = static_cast<unsigned>((a.cols / 4 + kThreads - 1) / kThreads);
  const unsigned gy = static_cast<unsigned>(a.rows < kMaxGridRows ? a.rows : kMaxGridRows);
  if (a.float_acc) {
    DequantizeKernel<float><<<dim3(gx, gy), kThreads, 0, stream>>>(a);
  } else {
    DequantizeKernel<int32_t><<<dim3(gx, gy), kThreads, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

void FloatToE4m3Host(const float* x, uint8_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(x[i], __NV_SATFINITE, __NV_E4M3));
  }
}

float E4m3ToFloatHost(uint8_t v) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(v), __NV_E4M3);
  return __half2float(__half(h));
}

uint16_t FloatToHalfHost(float v) {
  const __half h = __float2half_rn(v);
  return static_cast<__half_raw>(h).x;
}

uint16_t FloatToBf16Host(float v) {
  const __nv_bfloat16 b = __float2bfloat16_rn(v);
  return static_cast<__nv_bfloat16_raw>(b).x;
}

float HalfToFloatHost(uint16_t v) {
  __half_raw r;
  r.x = v;
  return __half2float(__half(r));
}

}  // namespace surge::engine::cuda
