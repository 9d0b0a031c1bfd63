#include "engine/backends/cpu/cpu_backend.h"
#include "engine/runtime/backend.h"

namespace surge::engine {

void RegisterBuiltinBackends() {
  RegisterBackend(cpu::CreateCpuBackend());
#ifdef SURGE_WITH_CUDA
  // The CUDA backend registers here once it exists.
#endif
}

}  // namespace surge::engine
