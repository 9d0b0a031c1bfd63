#include "engine/backends/cuda/device_math.cuh"
#include "engine/backends/cuda/launch.cuh"
#include "engine/backends/cuda/pack_kernels.h"

namespace surge::engine::cuda {
namespace {

// W: the widest word (16, 4 or 2 bytes) that divides the row size and both base addresses.
template <typename W>
__global__ void GatherRowsKernel(RowMoveArgs a) {
  WaitForPriorGrids();
  AllowDependentLaunch();
  const int64_t words = a.row_bytes / sizeof(W);
  const int64_t r = blockIdx.x;
  const W* src = static_cast<const W*>(a.src) + a.index[r] * words;
  W* dst = static_cast<W*>(a.dst) + r * words;
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
}

template <typename W>
__global__ void ScatterRowsKernel(RowMoveArgs a) {
  WaitForPriorGrids();
  AllowDependentLaunch();
  const int64_t words = a.row_bytes / sizeof(W);
  const int64_t r = blockIdx.x;
  const W* src = static_cast<const W*>(a.src) + r * words;
  W* dst = static_cast<W*>(a.dst) + a.index[r] * words;
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
}

int WordBytes(const RowMoveArgs& a) {
  const uintptr_t bits = reinterpret_cast<uintptr_t>(a.src) | reinterpret_cast<uintptr_t>(a.dst) |
                         static_cast<uintptr_t>(a.row_bytes);
  return bits % 16 == 0 ? 16 : bits % 4 == 0 ? 4 : 2;
}

// Launches GatherRowsKernel<W> or ScatterRowsKernel<W> for the word size.
template <bool kScatter>
cudaError_t LaunchRows(const RowMoveArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.rows));
  switch (WordBytes(a)) {
    case 16:
      return LaunchKernel(kScatter ? ScatterRowsKernel<uint4> : GatherRowsKernel<uint4>, grid,
                          dim3(64), 0, stream, a);
    case 4:
      return LaunchKernel(kScatter ? ScatterRowsKernel<uint32_t> : GatherRowsKernel<uint32_t>, grid,
                          dim3(128), 0, stream, a);
    default:
      return LaunchKernel(kScatter ? ScatterRowsKernel<uint16_t> : GatherRowsKernel<uint16_t>, grid,
                          dim3(128), 0, stream, a);
  }
}

template <typename T>
__global__ void FromF32Kernel(const float* src, T* dst, int64_t n) {
  WaitForPriorGrids();
  AllowDependentLaunch();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = FromFloat<T>(src[i]);
  }
}

template <typename T>
__global__ void ToF32Kernel(const T* src, float* dst, int64_t n) {
  WaitForPriorGrids();
  AllowDependentLaunch();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = ToFloat(src[i]);
  }
}

unsigned GridFor(int64_t n) {
  const int64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

}  // namespace

bool RowMoveCanImplement(const RowMoveArgs& a) {
  return a.row_bytes > 0 && a.row_bytes % 2 == 0 && a.rows >= 0 && a.src && a.dst && a.index &&
         WordBytes(a) >= 2 && reinterpret_cast<uintptr_t>(a.src) % 2 == 0 &&
         reinterpret_cast<uintptr_t>(a.dst) % 2 == 0;
}

size_t RowMoveWorkspaceSize(const RowMoveArgs&) { return 0; }

cudaError_t GatherRowsRun(const RowMoveArgs& a, void*, cudaStream_t stream) {
  if (a.rows == 0) return cudaSuccess;
  return LaunchRows<false>(a, stream);
}

cudaError_t ScatterRowsRun(const RowMoveArgs& a, void*, cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(a.dst, 0, a.dst_rows * a.row_bytes, stream);
  if (err != cudaSuccess || a.rows == 0) return err;
  return LaunchRows<true>(a, stream);
}

cudaError_t ConvertFromFloat32(DataType to, const float* src, void* dst, int64_t n,
                               cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (to == DataType::kF16) {
    return LaunchKernel(FromF32Kernel<__half>, dim3(GridFor(n)), dim3(256), 0, stream, src,
                        static_cast<__half*>(dst), n);
  }
  return LaunchKernel(FromF32Kernel<__nv_bfloat16>, dim3(GridFor(n)), dim3(256), 0, stream, src,
                      static_cast<__nv_bfloat16*>(dst), n);
}

cudaError_t ConvertToFloat32(DataType from, const void* src, float* dst, int64_t n,
                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (from == DataType::kF16) {
    return LaunchKernel(ToF32Kernel<__half>, dim3(GridFor(n)), dim3(256), 0, stream,
                        static_cast<const __half*>(src), dst, n);
  }
  return LaunchKernel(ToF32Kernel<__nv_bfloat16>, dim3(GridFor(n)), dim3(256), 0, stream,
                      static_cast<const __nv_bfloat16*>(src), dst, n);
}

}  // namespace surge::engine::cuda
