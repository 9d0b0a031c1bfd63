#include "engine/backends/cuda/device_math.cuh"
#include "engine/backends/cuda/embed_layer_norm_kernels.h"

namespace surge::engine::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxPerThread = 16;

template <typename T>
__global__ void __launch_bounds__(kThreads) EmbedLayerNormKernel(EmbedLayerNormArgs a) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int64_t tok = a.row_index ? a.row_index[row] : row;
  const int h = a.hidden;
  const T* w = static_cast<const T*>(a.word_emb) + static_cast<int64_t>(a.input_ids[tok]) * h;
  const T* p = static_cast<const T*>(a.pos_emb) + static_cast<int64_t>(a.positions[tok]) * h;
  const T* t = a.type_emb ? static_cast<const T*>(a.type_emb) +
                                static_cast<int64_t>(a.type_ids ? a.type_ids[tok] : 0) * h
                          : nullptr;
  float v[kMaxPerThread];
  float local = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxPerThread; ++i) {
    const int c = threadIdx.x + i * kThreads;
    v[i] = 0.f;
    if (c < h) {
      float s = ToFloat(w[c]) + ToFloat(p[c]);
      if (t) s += ToFloat(t[c]);
      v[i] = s;
      local += s;
    }
  }
  const float mean = BlockSum(local, scratch) / static_cast<float>(h);
  local = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxPerThread; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < h) local += (v[i] - mean) * (v[i] - mean);
  }
  const float inv = rsqrtf(BlockSum(local, scratch) / static_cast<float>(h) + a.epsilon);
  T* y = static_cast<T*>(a.y) + row * h;
#pragma unroll
  for (int i = 0; i < kMaxPerThread; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < h) y[c] = FromFloat<T>((v[i] - mean) * inv * a.gamma[c] + a.beta[c]);
  }
}

}  // namespace

bool EmbedLayerNormCanImplement(const EmbedLayerNormArgs& a) {
  return a.hidden >= 1 && a.hidden <= kThreads * kMaxPerThread && a.input_ids && a.positions &&
         a.word_emb && a.pos_emb && a.gamma && a.beta && a.y;
}

size_t EmbedLayerNormWorkspaceSize(const EmbedLayerNormArgs&) { return 0; }

cudaError_t EmbedLayerNormRun(const EmbedLayerNormArgs& a, void*, cudaStream_t stream) {
  if (a.rows == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(a.rows));
  if (a.dtype == DataType::kF16) {
    EmbedLayerNormKernel<__half><<<grid, kThreads, 0, stream>>>(a);
  } else {
    EmbedLayerNormKernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

}  // namespace surge::engine::cuda
