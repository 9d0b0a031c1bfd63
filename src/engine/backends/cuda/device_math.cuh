// Device helpers shared by the *_kernels.cu files: conversions between the storage types and
// float, and block-wide reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "engine/backends/cuda/kernel_common.h"

namespace surge::engine::cuda {

__device__ __forceinline__ float ToFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float ToFloat(float v) { return v; }

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds 32 floats; the call ends with
// a barrier so the scratch may be reused by the next call.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = WarpSum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.f;
  for (int i = 0; i < warps; ++i) total += scratch[i];
  __syncthreads();
  return total;
}

// Loads/stores 8 consecutive elements (16 bytes) as float.
template <typename T>
__device__ __forceinline__ void Load8(const T* p, float (&v)[8]) {
  alignas(16) T raw[8];
  *reinterpret_cast<int4*>(raw) = *reinterpret_cast<const int4*>(p);
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = ToFloat(raw[j]);
}
// Eight values of the I/O type held in one 16-byte register group -> float.
template <typename T>
__device__ __forceinline__ void Unpack8(int4 packed, float (&v)[8]) {
  alignas(16) T raw[8];
  *reinterpret_cast<int4*>(raw) = packed;
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = ToFloat(raw[j]);
}
// v += the 8 consecutive elements at p, or the 8 held in `packed`.
template <typename T>
__device__ __forceinline__ void AddLoaded8(const T* p, float (&v)[8]) {
  float s[8];
  Load8(p, s);
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] += s[j];
}
template <typename T>
__device__ __forceinline__ void AddUnpacked8(int4 packed, float (&v)[8]) {
  float s[8];
  Unpack8<T>(packed, s);
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] += s[j];
}
template <typename T>
__device__ __forceinline__ void Store8(T* p, const float (&v)[8]) {
  alignas(16) T raw[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) raw[j] = FromFloat<T>(v[j]);
  *reinterpret_cast<int4*>(p) = *reinterpret_cast<const int4*>(raw);
}

// One quantised byte: int8 (round to nearest even, saturating to [-128, 127]) or e4m3
// (saturating to the finite range, +-448).
__device__ __forceinline__ uint8_t QuantizeByte(QuantType type, float v) {
  if (type == QuantType::kInt8) {
    const float r = fminf(fmaxf(rintf(v), -128.f), 127.f);
    return static_cast<uint8_t>(static_cast<int8_t>(r));
  }
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// Eight values already in the I/O type `raw` -> eight quantised bytes at p (one 8-byte store).
template <typename T>
__device__ __forceinline__ void StoreQuantized8(uint8_t* p, const T (&raw)[8], QuantType type,
                                                float inv_scale) {
  alignas(8) uint8_t q[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) q[j] = QuantizeByte(type, ToFloat(raw[j]) * inv_scale);
  *reinterpret_cast<uint2*>(p) = *reinterpret_cast<const uint2*>(q);
}

// Mean and 1 / sqrt(variance + epsilon) of one row held by one warp: lane l owns the 8-column
// chunks c = (i*32 + l)*8 < cols, i < N, in v[i] (float32 sums). Mean, then the centred
// variance, both by warp shuffles.
template <int N>
__device__ __forceinline__ float2 WarpRowStats(const float (&v)[N][8], int cols, int lane,
                                               float epsilon) {
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if ((i * 32 + lane) * 8 < cols) {
#pragma unroll
      for (int j = 0; j < 8; ++j) sum += v[i][j];
    }
  }
  const float mean = WarpSum(sum) / static_cast<float>(cols);
  float sq = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if ((i * 32 + lane) * 8 < cols) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float d = v[i][j] - mean;
        sq += d * d;
      }
    }
  }
  return make_float2(mean, rsqrtf(WarpSum(sq) / static_cast<float>(cols) + epsilon));
}

// Loads 8 consecutive float32 values (two 16-byte loads).
__device__ __forceinline__ void LoadFloat8(const float* p, float (&v)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p);
  const float4 b = *reinterpret_cast<const float4*>(p + 4);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// Stores (v - mean) * inv * gamma + beta for one 8-column chunk (one 16-byte store), and with
// `q` (may be null) its quantised copy (QuantizedCopy).
template <typename T>
__device__ __forceinline__ void StoreNormalized8(const float (&v)[8], float2 stats,
                                                 const float (&gamma)[8], const float (&beta)[8],
                                                 T* y, uint8_t* q, QuantType q_type,
                                                 float q_inv_scale) {
  alignas(16) T raw[8];
#pragma unroll
  for (int j = 0; j < 8; ++j)
    raw[j] = FromFloat<T>((v[j] - stats.x) * stats.y * gamma[j] + beta[j]);
  *reinterpret_cast<int4*>(y) = *reinterpret_cast<const int4*>(raw);
  if (q) StoreQuantized8(q, raw, q_type, q_inv_scale);
}

// LayerNorm of one row held by one warp (layout as WarpRowStats); writes
// y = (v - mean) * rsqrt(var + eps) * gamma + beta with 16-byte stores, gamma and beta read per
// chunk. With `q` (may be null), also the quantised copy of the stored row (QuantizedCopy).
template <typename T, int N>
__device__ __forceinline__ void WarpLayerNormStore(float (&v)[N][8], int cols, int lane,
                                                   const float* gamma, const float* beta,
                                                   float epsilon, T* y, uint8_t* q = nullptr,
                                                   QuantType q_type = QuantType::kFp8E4M3,
                                                   float q_inv_scale = 1.f) {
  const float2 stats = WarpRowStats<N>(v, cols, lane, epsilon);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int c = (i * 32 + lane) * 8;
    if (c < cols) {
      float gs[8], bs[8];
      LoadFloat8(gamma + c, gs);
      LoadFloat8(beta + c, bs);
      StoreNormalized8(v[i], stats, gs, bs, y + c, q ? q + c : nullptr, q_type, q_inv_scale);
    }
  }
}

// Chunks per lane for the warp-per-row kernels: the instantiated count that covers `cols`
// (cols % 8 == 0, cols <= 4096), or 0 when none does.
__host__ __device__ inline int WarpRowChunks(int cols) {
  const int need = (cols + 255) / 256;
  for (int n : {1, 2, 3, 4, 6, 8, 12, 16}) {
    if (n >= need) return n;
  }
  return 0;
}

// Runs `f.template operator()<N>()` for the chunk count N (one of WarpRowChunks' values).
template <typename F>
__host__ inline auto DispatchChunks(int n, F&& f) {
  switch (n) {
    case 1:
      return f.template operator()<1>();
    case 2:
      return f.template operator()<2>();
    case 3:
      return f.template operator()<3>();
    case 4:
      return f.template operator()<4>();
    case 6:
      return f.template operator()<6>();
    case 8:
      return f.template operator()<8>();
    case 12:
      return f.template operator()<12>();
    default:
      return f.template operator()<16>();
  }
}

__device__ __forceinline__ float GeluErf(float x) {
  return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
}
__device__ __forceinline__ float GeluTanh(float x) {
  return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

__device__ __forceinline__ float ApplyActivation(Activation act, float v) {
  switch (act) {
    case Activation::kGelu:
      return GeluErf(v);
    case Activation::kGeluTanh:
      return GeluTanh(v);
    case Activation::kTanh:
      return tanhf(v);
    case Activation::kRelu:
      return fmaxf(v, 0.f);
    case Activation::kNone:
      break;
  }
  return v;
}

}  // namespace surge::engine::cuda
