// The CPU backend: oneDNN GEMMs with weights pre-packed at build time, fused AVX-512/AVX2 kernels
// chosen at run time, generic kernels for every other imported op, and one planned activation
// arena per execution context.
#pragma once

#include <memory>

#include "engine/runtime/backend.h"

namespace surge::engine::cpu {

std::unique_ptr<Backend> CreateCpuBackend();

}  // namespace surge::engine::cpu
