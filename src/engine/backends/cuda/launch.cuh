// Kernel launches with programmatic dependent launch (PDL, sm_90).
//
// With PDL a kernel may start while the kernel before it in the stream is still finishing, so its
// launch latency and prologue overlap the previous kernel's tail (in a CUDA-graph replay too:
// stream capture records the launches as programmatic edges). Every kernel launched through
// LaunchKernel keeps one protocol, which makes the overlap safe whatever runs before or after it:
//   1. before WaitForPriorGrids() it reads only data no kernel of the stream writes (weights) and
//      writes nothing to global memory;
//   2. WaitForPriorGrids() returns once every prior grid has completed and its writes are visible
//      (a no-op when the kernel was launched without PDL);
//   3. AllowDependentLaunch() comes after WaitForPriorGrids(), so a dependent kernel never starts
//      before this kernel's own predecessors have completed.
// Kernels launched any other way (cuBLASLt's, <<<>>>) keep the stream's full ordering.
// SURGE_CUDA_PDL=0 turns PDL off (for comparisons).
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <utility>

namespace surge::engine::cuda {

__device__ __forceinline__ void WaitForPriorGrids() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

__device__ __forceinline__ void AllowDependentLaunch() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

inline bool PdlEnabled() {
  static const bool on = [] {
    const char* env = std::getenv("SURGE_CUDA_PDL");
    return !(env && env[0] == '0');
  }();
  return on;
}

// Launches kernel<<<grid, block, smem, stream>>>(args...), with PDL when enabled.
template <typename... KernelArgs, typename... Args>
cudaError_t LaunchKernel(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem,
                         cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute pdl;
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &pdl;
  config.numAttrs = PdlEnabled() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace surge::engine::cuda
