#include "engine/backends/cuda/device_math.cuh"
#include "engine/backends/cuda/embed_layer_norm_kernels.h"
#include "engine/backends/cuda/launch.cuh"

namespace surge::engine::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxPerThread = 16;
constexpr int kRowsPerBlock = 4;  // warp-per-row path

// The word, position and type (or null) embedding rows of output row `row`.
template <typename T>
struct EmbedRows {
  const T *word, *pos, *type;
  __device__ EmbedRows(const EmbedLayerNormArgs& a, int64_t row) {
    const int64_t tok = a.row_index ? a.row_index[row] : row;
    const int64_t h = a.hidden;
    word = static_cast<const T*>(a.word_emb) + a.input_ids[tok] * h;
    pos = static_cast<const T*>(a.pos_emb) + a.positions[tok] * h;
    type = a.type_emb ? static_cast<const T*>(a.type_emb) + (a.type_ids ? a.type_ids[tok] : 0) * h
                      : nullptr;
  }
};

// One warp per output row, 16-byte gathers of the word, position and type rows (hidden % 8 == 0).
template <typename T, int N>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    EmbedLayerNormWarpKernel(EmbedLayerNormArgs a) {
  WaitForPriorGrids();
  AllowDependentLaunch();
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  if (row >= a.rows) return;
  const int h = a.hidden;
  const EmbedRows<T> rows(a, row);
  const T *w = rows.word, *p = rows.pos, *t = rows.type;
  float v[N][8];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int c = (i * 32 + lane) * 8;
    if (c < h) {
      Load8(w + c, v[i]);
      AddLoaded8(p + c, v[i]);
      if (t) AddLoaded8(t + c, v[i]);
    }
  }
  WarpLayerNormStore<T, N>(v, h, lane, a.gamma, a.beta, a.epsilon, static_cast<T*>(a.y) + row * h);
}

template <typename T>
__global__ void __launch_bounds__(kThreads) EmbedLayerNormKernel(EmbedLayerNormArgs a) {
  WaitForPriorGrids();
  AllowDependentLaunch();
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int h = a.hidden;
  const EmbedRows<T> rows(a, row);
  const T *w = rows.word, *p = rows.pos, *t = rows.type;
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

namespace {

bool Aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T>
cudaError_t Launch(const EmbedLayerNormArgs& a, cudaStream_t stream) {
  const bool vec = a.hidden % 8 == 0 && WarpRowChunks(a.hidden) > 0 && Aligned16(a.word_emb) &&
                   Aligned16(a.pos_emb) && Aligned16(a.type_emb) && Aligned16(a.gamma) &&
                   Aligned16(a.beta) && Aligned16(a.y);
  if (vec) {
    const dim3 grid(static_cast<unsigned>((a.rows + kRowsPerBlock - 1) / kRowsPerBlock));
    return DispatchChunks(WarpRowChunks(a.hidden), [&]<int N>() {
      return LaunchKernel(EmbedLayerNormWarpKernel<T, N>, grid, dim3(kRowsPerBlock * 32), 0, stream,
                          a);
    });
  }
  return LaunchKernel(EmbedLayerNormKernel<T>, dim3(static_cast<unsigned>(a.rows)), dim3(kThreads),
                      0, stream, a);
}

}  // namespace

cudaError_t EmbedLayerNormRun(const EmbedLayerNormArgs& a, void*, cudaStream_t stream) {
  if (a.rows == 0) return cudaSuccess;
  if (a.dtype == DataType::kF16) return Launch<__half>(a, stream);
  return Launch<__nv_bfloat16>(a, stream);
}

}  // namespace surge::engine::cuda
