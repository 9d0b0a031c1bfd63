#include "engine/backends/cuda/bias_act_kernels.h"
#include "engine/backends/cuda/device_math.cuh"
#include "engine/backends/cuda/launch.cuh"

namespace surge::engine::cuda {
namespace {

constexpr int kThreads = 128;
constexpr unsigned kMaxGridRows = 65535;

// One thread per V consecutive columns of a row (16-byte accesses when V == 8); blocks walk rows
// (grid y) so no thread divides a flat index by the column count.
template <typename T, int V>
__global__ void __launch_bounds__(kThreads) BiasActKernel(BiasActArgs a) {
  WaitForPriorGrids();
  AllowDependentLaunch();
  const int c0 = (blockIdx.x * kThreads + threadIdx.x) * V;
  if (c0 >= a.cols) return;
  float bias[V];
#pragma unroll
  for (int j = 0; j < V; ++j)
    bias[j] = a.bias ? ToFloat(static_cast<const T*>(a.bias)[c0 + j]) : 0.f;
  for (int64_t r = blockIdx.y; r < a.rows; r += gridDim.y) {
    const int64_t at = r * a.cols + c0;
    alignas(16) T x[V], res[V];
    if constexpr (V == 8) {
      *reinterpret_cast<int4*>(x) = *reinterpret_cast<const int4*>(static_cast<const T*>(a.x) + at);
      if (a.residual) {
        *reinterpret_cast<int4*>(res) =
            *reinterpret_cast<const int4*>(static_cast<const T*>(a.residual) + at);
      }
    } else {
      x[0] = static_cast<const T*>(a.x)[at];
      if (a.residual) res[0] = static_cast<const T*>(a.residual)[at];
    }
    alignas(16) T y[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float v = ApplyActivation(a.activation, ToFloat(x[j]) + bias[j]);
      if (a.residual) v += ToFloat(res[j]);
      y[j] = FromFloat<T>(v);
    }
    if constexpr (V == 8) {
      *reinterpret_cast<int4*>(static_cast<T*>(a.y) + at) = *reinterpret_cast<const int4*>(y);
    } else {
      static_cast<T*>(a.y)[at] = y[0];
    }
  }
}

bool Aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T>
cudaError_t Launch(const BiasActArgs& a, cudaStream_t stream) {
  const bool vec = a.cols % 8 == 0 && Aligned16(a.x) && Aligned16(a.y) && Aligned16(a.residual) &&
                   Aligned16(a.bias);
  const int width = vec ? 8 : 1;
  const int per_row = (a.cols / width + kThreads - 1) / kThreads;
  const unsigned rows = static_cast<unsigned>(a.rows < kMaxGridRows ? a.rows : kMaxGridRows);
  const dim3 grid(per_row, rows);
  if (vec) return LaunchKernel(BiasActKernel<T, 8>, grid, dim3(kThreads), 0, stream, a);
  return LaunchKernel(BiasActKernel<T, 1>, grid, dim3(kThreads), 0, stream, a);
}

}  // namespace

bool BiasActCanImplement(const BiasActArgs& a) { return a.cols >= 1 && a.rows >= 0 && a.x && a.y; }

size_t BiasActWorkspaceSize(const BiasActArgs&) { return 0; }

cudaError_t BiasActRun(const BiasActArgs& a, void*, cudaStream_t stream) {
  if (a.rows == 0 || a.cols == 0) return cudaSuccess;
  if (a.dtype == DataType::kF16) return Launch<__half>(a, stream);
  return Launch<__nv_bfloat16>(a, stream);
}

}  // namespace surge::engine::cuda
