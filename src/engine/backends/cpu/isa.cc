#include "engine/backends/cpu/isa.h"

#include <cpuid.h>

#include <cstdlib>

namespace surge::engine::cpu {

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kNone:
      break;
  }
  return "none";
}

Result<Isa> ParseIsa(std::string_view name) {
  if (name == "avx512") return Isa::kAvx512;
  if (name == "avx2") return Isa::kAvx2;
  return InvalidArgumentError("unknown CPU ISA '{}' (valid: avx512, avx2)", name);
}

bool CpuSupports(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("fma");
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::kNone:
      return true;
  }
  return false;
}

namespace {
// Leaf 7 sub-leaf 0/1 feature bits (the compiler's __builtin_cpu_supports does not know all).
bool Cpuid7(int subleaf, int reg, int bit) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, subleaf, a, b, c, d);
  const unsigned regs[4] = {a, b, c, d};
  return (regs[reg] >> bit) & 1u;
}
}  // namespace

bool CpuHasVnni() { return CpuSupports(Isa::kAvx512) && Cpuid7(0, 2, 11); }
bool CpuHasBf16() { return CpuSupports(Isa::kAvx512) && Cpuid7(1, 0, 5); }
bool CpuHasAmx() { return Cpuid7(0, 3, 24) && Cpuid7(0, 3, 25); }

Isa DetectIsa() {
  if (CpuSupports(Isa::kAvx512)) return Isa::kAvx512;
  if (CpuSupports(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kNone;
}

Isa DefaultIsa() {
  Isa isa = DetectIsa();
  if (const char* env = std::getenv("SURGE_CPU_ISA")) {
    Result<Isa> want = ParseIsa(env);
    if (want.ok() && static_cast<int>(*want) < static_cast<int>(isa)) isa = *want;
  }
  return isa;
}

}  // namespace surge::engine::cpu
