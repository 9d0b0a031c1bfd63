// GELU (Surge op Gelu): erf form through a vectorised erfc, or the tanh form.
#include <algorithm>

#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/parallel.h"

#define SURGE_SIMD_BODY                                                              \
  static void GeluRange(const float* x, float* y, int64_t b, int64_t e, bool tanh) { \
    int64_t i = b;                                                                   \
    for (; i + S::kW <= e; i += S::kW) {                                             \
      const S::V v = S::Load(x + i);                                                 \
      S::Store(y + i, tanh ? GeluTanh(v) : GeluErf(v));                              \
    }                                                                                \
    if (i < e) {                                                                     \
      const int n = static_cast<int>(e - i);                                         \
      const S::V v = S::LoadN(x + i, n);                                             \
      S::StoreN(y + i, tanh ? GeluTanh(v) : GeluErf(v), n);                          \
    }                                                                                \
  }

#define SURGE_SIMD_AVX512 1
// clang-format off
#include "engine/backends/cpu/simd_begin.inc"
SURGE_SIMD_BODY
#include "engine/backends/cpu/simd_end.inc"
// clang-format on
#undef SURGE_SIMD_AVX512

#define SURGE_SIMD_AVX512 0
// clang-format off
#include "engine/backends/cpu/simd_begin.inc"
SURGE_SIMD_BODY
#include "engine/backends/cpu/simd_end.inc"
// clang-format on
#undef SURGE_SIMD_AVX512
#undef SURGE_SIMD_BODY

namespace surge::engine::cpu {

void GeluKernel(Isa isa, const float* x, float* y, int64_t n, bool approximate_tanh) {
  ParallelFor(n, 16384, [&](int64_t b, int64_t e) {
    if (isa == Isa::kAvx512) {
      simd_avx512::GeluRange(x, y, b, e, approximate_tanh);
    } else {
      simd_avx2::GeluRange(x, y, b, e, approximate_tanh);
    }
  });
}

}  // namespace surge::engine::cpu
