// CPU instruction-set selection for the fused kernels: AVX-512 (F/BW/DQ/VL) where the CPU has it,
// else AVX2+FMA. Plans record the ISA they were built for; a plan needs that ISA at load.
#pragma once

#include <string_view>

#include "core/status.h"

namespace surge::engine::cpu {

enum class Isa { kNone = 0, kAvx2 = 1, kAvx512 = 2 };

std::string_view IsaName(Isa isa);  // "avx2", "avx512", "none"
Result<Isa> ParseIsa(std::string_view name);
// The best ISA this CPU supports.
Isa DetectIsa();
// The ISA kernels use: DetectIsa(), lowered by the environment variable SURGE_CPU_ISA=avx2 (used
// by tests and benchmarks to exercise the AVX2 path on AVX-512 machines). Never higher than the
// CPU.
Isa DefaultIsa();
bool CpuSupports(Isa isa);
// Extensions the low-precision Linear kernels rely on: AVX-512 VNNI (INT8 dot products without
// 16-bit saturation), AVX-512 BF16 (BF16 GEMMs), AMX tiles (oneDNN uses them when present).
bool CpuHasVnni();
bool CpuHasBf16();
bool CpuHasAmx();

}  // namespace surge::engine::cpu
