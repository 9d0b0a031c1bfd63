#include "engine/backends/cuda/device_math.cuh"
#include "engine/backends/cuda/layer_norm_kernels.h"

namespace surge::engine::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxPerThread = 16;  // cols <= 4096

template <typename T>
__global__ void __launch_bounds__(kThreads) LayerNormKernel(LayerNormArgs a) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int cols = a.cols;
  const T* x = static_cast<const T*>(a.x) + row * cols;
  const T* skip = a.skip ? static_cast<const T*>(a.skip) + row * cols : nullptr;
  const T* bias = static_cast<const T*>(a.bias);
  float v[kMaxPerThread];
  float local = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxPerThread; ++i) {
    const int c = threadIdx.x + i * kThreads;
    v[i] = 0.f;
    if (c < cols) {
      float t = ToFloat(x[c]);
      if (skip) t += ToFloat(skip[c]);
      if (bias) t += ToFloat(bias[c]);
      v[i] = t;
      local += t;
    }
  }
  const float mean = BlockSum(local, scratch) / static_cast<float>(cols);
  local = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxPerThread; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < cols) {
      const float d = v[i] - mean;
      local += d * d;
    }
  }
  const float var = BlockSum(local, scratch) / static_cast<float>(cols);
  const float inv = rsqrtf(var + a.epsilon);
  T* y = static_cast<T*>(a.y) + row * cols;
  T* sum_out = a.sum_out ? static_cast<T*>(a.sum_out) + row * cols : nullptr;
#pragma unroll
  for (int i = 0; i < kMaxPerThread; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < cols) {
      if (sum_out) sum_out[c] = FromFloat<T>(v[i]);
      y[c] = FromFloat<T>((v[i] - mean) * inv * a.gamma[c] + a.beta[c]);
    }
  }
}

}  // namespace

bool LayerNormCanImplement(const LayerNormArgs& a) {
  return a.cols >= 1 && a.cols <= kThreads * kMaxPerThread && a.rows >= 0 && a.x && a.y &&
         a.gamma && a.beta;
}

size_t LayerNormWorkspaceSize(const LayerNormArgs&) { return 0; }

cudaError_t LayerNormRun(const LayerNormArgs& a, void*, cudaStream_t stream) {
  if (a.rows == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(a.rows));
  if (a.dtype == DataType::kF16) {
    LayerNormKernel<__half><<<grid, kThreads, 0, stream>>>(a);
  } else {
    LayerNormKernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

}  // namespace surge::engine::cuda
