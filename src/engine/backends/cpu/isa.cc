#include "engine/backends/cpu/isa.h"

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
