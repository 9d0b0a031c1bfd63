#include "engine/backends/cpu/cpu_backend.h"
#ifdef SURGE_WITH_CUDA
#include "engine/backends/cuda/cuda_backend.h"
#endif
#include "engine/runtime/backend.h"

namespace surge::engine {

void RegisterBuiltinBackends() {
  RegisterBackend(cpu::CreateCpuBackend());
#ifdef SURGE_WITH_CUDA
  RegisterBackend(cuda::CreateCudaBackend());
#endif
}

}  // namespace surge::engine
