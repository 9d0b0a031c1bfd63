#include <algorithm>

#include "engine/backends/cuda/device_math.cuh"
#include "engine/backends/cuda/launch.cuh"
#include "engine/backends/cuda/layer_norm_kernels.h"

namespace surge::engine::cuda {
namespace {

constexpr int kMaxCols = 4096;
constexpr int kRowsPerBlock = 4;  // one warp per row

// One warp per row, 16-byte accesses: lane l holds the 8-column chunks (i*32 + l)*8 of x (+ skip
// + bias) as float32, every load of the row issued before the first use; statistics by warp
// shuffles (no block barrier).
template <typename T, int N>
__global__ void __launch_bounds__(kRowsPerBlock * 32) LayerNormWarpKernel(LayerNormArgs a) {
  WaitForPriorGrids();
  AllowDependentLaunch();
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  if (row >= a.rows) return;
  const int cols = a.cols;
  const T* x = static_cast<const T*>(a.x) + row * cols;
  const T* skip = a.skip ? static_cast<const T*>(a.skip) + row * cols : nullptr;
  const T* bias = static_cast<const T*>(a.bias);
  float v[N][8];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int c = (i * 32 + lane) * 8;
    if (c < cols) {
      Load8(x + c, v[i]);
      if (skip) AddLoaded8(skip + c, v[i]);
      if (bias) AddLoaded8(bias + c, v[i]);
    }
  }
  if (a.sum_out) {
    T* sum_out = static_cast<T*>(a.sum_out) + row * cols;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int c = (i * 32 + lane) * 8;
      if (c < cols) Store8(sum_out + c, v[i]);
    }
  }
  uint8_t* q = a.q.y ? static_cast<uint8_t*>(a.q.y) + row * cols : nullptr;
  WarpLayerNormStore<T, N>(v, cols, lane, a.gamma, a.beta, a.epsilon,
                           static_cast<T*>(a.y) + row * cols, q, a.q.type, a.q.inv_scale);
}

// Rows of up to kRegChunks * 256 columns: a grid that fits on the device at once, each warp
// striding over rows with its next row's input loaded before the current row is normalised;
// gamma and beta are read once per block into shared memory (instead of again for every row, or
// held in registers, which would halve the warps resident to hide the loads' latency).
constexpr int kRegChunks = 4;
constexpr int kStridedMinRowsPerWarp = 4;

template <typename T, int N>
__global__ void __launch_bounds__(kRowsPerBlock * 32, N <= 2 ? 8 : (N == 3 ? 6 : 4))
    LayerNormStridedKernel(LayerNormArgs a) {
  const int lane = threadIdx.x & 31;
  const int cols = a.cols;
  __shared__ __align__(16) float gamma_beta[2][N * 256];
  for (int c = threadIdx.x * 4; c < cols; c += blockDim.x * 4) {
    *reinterpret_cast<float4*>(&gamma_beta[0][c]) = *reinterpret_cast<const float4*>(a.gamma + c);
    *reinterpret_cast<float4*>(&gamma_beta[1][c]) = *reinterpret_cast<const float4*>(a.beta + c);
  }
  __syncthreads();
  WaitForPriorGrids();  // gamma and beta are weights: read before the previous kernel ends
  AllowDependentLaunch();
  const int64_t step = static_cast<int64_t>(gridDim.x) * kRowsPerBlock;
  int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  const T* x = static_cast<const T*>(a.x);
  const T* skip = static_cast<const T*>(a.skip);
  const T* bias = static_cast<const T*>(a.bias);
  int4 xr[N], sr[N];
  auto load = [&](int64_t r) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int c = (i * 32 + lane) * 8;
      if (c < cols) {
        xr[i] = *reinterpret_cast<const int4*>(x + r * cols + c);
        if (skip) sr[i] = *reinterpret_cast<const int4*>(skip + r * cols + c);
      }
    }
  };
  if (row < a.rows) load(row);
  for (; row < a.rows; row += step) {
    float v[N][8];
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int c = (i * 32 + lane) * 8;
      if (c < cols) {
        Unpack8<T>(xr[i], v[i]);
        if (skip) AddUnpacked8<T>(sr[i], v[i]);
        if (bias) AddLoaded8(bias + c, v[i]);
      }
    }
    if (row + step < a.rows) load(row + step);
    const int64_t off = row * cols;
    if (a.sum_out) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const int c = (i * 32 + lane) * 8;
        if (c < cols) Store8(static_cast<T*>(a.sum_out) + off + c, v[i]);
      }
    }
    const float2 stats = WarpRowStats<N>(v, cols, lane, a.epsilon);
    T* y = static_cast<T*>(a.y) + off;
    uint8_t* q = a.q.y ? static_cast<uint8_t*>(a.q.y) + off : nullptr;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int c = (i * 32 + lane) * 8;
      if (c < cols) {
        float gs[8], bs[8];
        LoadFloat8(&gamma_beta[0][c], gs);
        LoadFloat8(&gamma_beta[1][c], bs);
        StoreNormalized8(v[i], stats, gs, bs, y + c, q ? q + c : nullptr, a.q.type, a.q.inv_scale);
      }
    }
  }
}

// Any column count: one block per row, one column per thread per step (the path for rows that
// are not a multiple of 8 columns or not 16-byte aligned).
template <typename T, int kPerThread>
__global__ void LayerNormScalarKernel(LayerNormArgs a) {
  WaitForPriorGrids();
  AllowDependentLaunch();
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int cols = a.cols;
  const T* x = static_cast<const T*>(a.x) + row * cols;
  const T* skip = a.skip ? static_cast<const T*>(a.skip) + row * cols : nullptr;
  const T* bias = static_cast<const T*>(a.bias);
  float v[kPerThread];
  float local = 0.f;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int c = threadIdx.x + i * blockDim.x;
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
  for (int i = 0; i < kPerThread; ++i) {
    const int c = threadIdx.x + i * blockDim.x;
    if (c < cols) local += (v[i] - mean) * (v[i] - mean);
  }
  const float inv = rsqrtf(BlockSum(local, scratch) / static_cast<float>(cols) + a.epsilon);
  T* y = static_cast<T*>(a.y) + row * cols;
  T* sum_out = a.sum_out ? static_cast<T*>(a.sum_out) + row * cols : nullptr;
  uint8_t* q = a.q.y ? static_cast<uint8_t*>(a.q.y) + row * cols : nullptr;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int c = threadIdx.x + i * blockDim.x;
    if (c < cols) {
      if (sum_out) sum_out[c] = FromFloat<T>(v[i]);
      const T out = FromFloat<T>((v[i] - mean) * inv * a.gamma[c] + a.beta[c]);
      y[c] = out;
      if (q) q[c] = QuantizeByte(a.q.type, ToFloat(out) * a.q.inv_scale);
    }
  }
}

// One block per row (the rows are few: one [CLS] vector per sequence); each thread strides over
// the columns twice, so any column count works.
template <typename T>
__global__ void L2NormalizeKernel(L2NormalizeArgs a) {
  WaitForPriorGrids();
  AllowDependentLaunch();
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* x = static_cast<const T*>(a.x) + row * a.cols;
  float local = 0.f;
  for (int c = threadIdx.x; c < a.cols; c += blockDim.x) {
    const float v = ToFloat(x[c]);
    local += v * v;
  }
  const float ss = BlockSum(local, scratch);
  const float inv = a.eps_max ? 1.f / fmaxf(sqrtf(ss), a.epsilon) : rsqrtf(ss + a.epsilon);
  T* y = static_cast<T*>(a.y) + row * a.cols;
  for (int c = threadIdx.x; c < a.cols; c += blockDim.x) y[c] = FromFloat<T>(ToFloat(x[c]) * inv);
}

// Blocks of LayerNormStridedKernel<T, N> resident on the device at once (the grid is capped
// there; any grid size gives the same results).
template <typename T, int N>
int64_t StridedGrid() {
  static const int64_t blocks = [] {
    int dev = 0, sms = 1, per_sm = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, LayerNormStridedKernel<T, N>,
                                                  kRowsPerBlock * 32, 0);
    return static_cast<int64_t>(std::max(1, sms * per_sm));
  }();
  return blocks;
}

bool Aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T>
cudaError_t Launch(const LayerNormArgs& a, cudaStream_t stream) {
  const bool vec = a.cols % 8 == 0 && Aligned16(a.x) && Aligned16(a.skip) && Aligned16(a.bias) &&
                   Aligned16(a.y) && Aligned16(a.sum_out) && Aligned16(a.gamma) &&
                   Aligned16(a.beta) &&
                   (a.q.y == nullptr || reinterpret_cast<uintptr_t>(a.q.y) % 8 == 0) &&
                   WarpRowChunks(a.cols) > 0;
  if (vec) {
    const int64_t blocks = (a.rows + kRowsPerBlock - 1) / kRowsPerBlock;
    return DispatchChunks(WarpRowChunks(a.cols), [&]<int N>() {
      if constexpr (N <= kRegChunks) {
        // Strided once every warp gets at least kStridedMinRowsPerWarp rows (H200, 768 columns:
        // 16.8-17.7 us against 19.2-19.6 us at 16384 rows); below that, one row per warp on
        // more warps finishes sooner.
        const int64_t resident = StridedGrid<T, N>();
        if (a.rows >= resident * kRowsPerBlock * kStridedMinRowsPerWarp) {
          return LaunchKernel(LayerNormStridedKernel<T, N>, dim3(static_cast<unsigned>(resident)),
                              dim3(kRowsPerBlock * 32), 0, stream, a);
        }
      }
      return LaunchKernel(LayerNormWarpKernel<T, N>, dim3(static_cast<unsigned>(blocks)),
                          dim3(kRowsPerBlock * 32), 0, stream, a);
    });
  }
  return LaunchKernel(LayerNormScalarKernel<T, kMaxCols / 256>, dim3(static_cast<unsigned>(a.rows)),
                      dim3(256), 0, stream, a);
}

}  // namespace

bool L2NormalizeCanImplement(const L2NormalizeArgs& a) {
  return a.cols >= 1 && a.rows >= 0 && a.x && a.y && a.epsilon >= 0.f;
}

cudaError_t L2NormalizeRun(const L2NormalizeArgs& a, void*, cudaStream_t stream) {
  if (a.rows == 0) return cudaSuccess;
  const unsigned rows = static_cast<unsigned>(a.rows);
  if (a.dtype == DataType::kF16) {
    return LaunchKernel(L2NormalizeKernel<__half>, dim3(rows), dim3(256), 0, stream, a);
  }
  return LaunchKernel(L2NormalizeKernel<__nv_bfloat16>, dim3(rows), dim3(256), 0, stream, a);
}

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
