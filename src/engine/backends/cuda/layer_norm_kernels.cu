#include "engine/backends/cuda/device_math.cuh"
#include "engine/backends/cuda/layer_norm_kernels.h"

namespace surge::engine::cuda {
namespace {

constexpr int kMaxCols = 4096;

// One block per row; each thread holds V consecutive columns in registers (V == 8: one 16-byte
// access per tensor, the block sized to the row), so the row is read once and the two statistics
// passes (mean, then centred variance) run on registers.
template <typename T, int V, int kPerThread>
__global__ void LayerNormKernel(LayerNormArgs a) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int cols = a.cols;
  const T* x = static_cast<const T*>(a.x) + row * cols;
  const T* skip = a.skip ? static_cast<const T*>(a.skip) + row * cols : nullptr;
  const T* bias = static_cast<const T*>(a.bias);
  float v[kPerThread * V];
  float local = 0.f;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int c = (threadIdx.x + i * blockDim.x) * V;
#pragma unroll
    for (int j = 0; j < V; ++j) v[i * V + j] = 0.f;
    if (c < cols) {
      alignas(16) T xs[V], ss[V], bs[V];
      if constexpr (V == 8) {
        *reinterpret_cast<int4*>(xs) = *reinterpret_cast<const int4*>(x + c);
        if (skip) *reinterpret_cast<int4*>(ss) = *reinterpret_cast<const int4*>(skip + c);
        if (bias) *reinterpret_cast<int4*>(bs) = *reinterpret_cast<const int4*>(bias + c);
      } else {
        xs[0] = x[c];
        if (skip) ss[0] = skip[c];
        if (bias) bs[0] = bias[c];
      }
#pragma unroll
      for (int j = 0; j < V; ++j) {
        float t = ToFloat(xs[j]);
        if (skip) t += ToFloat(ss[j]);
        if (bias) t += ToFloat(bs[j]);
        v[i * V + j] = t;
        local += t;
      }
    }
  }
  const float mean = BlockSum(local, scratch) / static_cast<float>(cols);
  local = 0.f;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int c = (threadIdx.x + i * blockDim.x) * V;
    if (c < cols) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float d = v[i * V + j] - mean;
        local += d * d;
      }
    }
  }
  const float inv = rsqrtf(BlockSum(local, scratch) / static_cast<float>(cols) + a.epsilon);
  T* y = static_cast<T*>(a.y) + row * cols;
  T* sum_out = a.sum_out ? static_cast<T*>(a.sum_out) + row * cols : nullptr;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int c = (threadIdx.x + i * blockDim.x) * V;
    if (c < cols) {
      alignas(16) T ys[V], sums[V];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        sums[j] = FromFloat<T>(v[i * V + j]);
        ys[j] = FromFloat<T>((v[i * V + j] - mean) * inv * a.gamma[c + j] + a.beta[c + j]);
      }
      if constexpr (V == 8) {
        *reinterpret_cast<int4*>(y + c) = *reinterpret_cast<const int4*>(ys);
        if (sum_out) *reinterpret_cast<int4*>(sum_out + c) = *reinterpret_cast<const int4*>(sums);
      } else {
        y[c] = ys[0];
        if (sum_out) sum_out[c] = sums[0];
      }
    }
  }
}

bool Aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T>
cudaError_t Launch(const LayerNormArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.rows));
  const bool vec = a.cols % 8 == 0 && Aligned16(a.x) && Aligned16(a.skip) && Aligned16(a.bias) &&
                   Aligned16(a.y) && Aligned16(a.sum_out);
  if (vec) {
    // cols/8 threads (rounded up to whole warps), one 8-column chunk each.
    const int threads = (a.cols / 8 + 31) / 32 * 32;
    LayerNormKernel<T, 8, 1><<<grid, threads, 0, stream>>>(a);
  } else {
    LayerNormKernel<T, 1, kMaxCols / 256><<<grid, 256, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

}  // namespace

bool LayerNormCanImplement(const LayerNormArgs& a) {
  return a.cols >= 1 && a.cols <= kMaxCols && a.rows >= 0 && a.x && a.y && a.gamma && a.beta;
}

size_t LayerNormWorkspaceSize(const LayerNormArgs&) { return 0; }

cudaError_t LayerNormRun(const LayerNormArgs& a, void*, cudaStream_t stream) {
  if (a.rows == 0) return cudaSuccess;
  if (a.dtype == DataType::kF16) return Launch<__half>(a, stream);
  return Launch<__nv_bfloat16>(a, stream);
}

}  // namespace surge::engine::cuda
