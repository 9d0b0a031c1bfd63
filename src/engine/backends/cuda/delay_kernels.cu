#include "engine/backends/cuda/delay_kernels.h"

namespace surge::engine::cuda {
namespace {

__device__ __forceinline__ uint64_t GlobalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

__global__ void DelayKernel(int64_t ns) {
  const uint64_t start = GlobalTimer();
  while (GlobalTimer() - start < static_cast<uint64_t>(ns)) __nanosleep(1000);
}

}  // namespace

bool DelayCanImplement(const DelayArgs& a) {
  return a.nanoseconds >= 0 && a.nanoseconds <= 1000000000;
}

size_t DelayWorkspaceSize(const DelayArgs&) { return 0; }

cudaError_t DelayRun(const DelayArgs& a, void*, cudaStream_t stream) {
  if (!DelayCanImplement(a)) return cudaErrorInvalidValue;
  DelayKernel<<<1, 1, 0, stream>>>(a.nanoseconds);
  return cudaGetLastError();
}

}  // namespace surge::engine::cuda
