// The Linear epilogue as a separate pass (bias, activation, residual) for the cases oneDNN's
// post-ops do not cover.
#include <algorithm>

#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/parallel.h"

#define SURGE_SIMD_BODY                                                                          \
  static inline S::V Act(S::V v, int act) {                                                      \
    switch (act) {                                                                               \
      case 1:                                                                                    \
        return GeluErf(v);                                                                       \
      case 2:                                                                                    \
        return GeluTanh(v);                                                                      \
      case 3:                                                                                    \
        return Tanh(v);                                                                          \
      case 4:                                                                                    \
        return S::Max(v, S::Zero());                                                             \
      default:                                                                                   \
        return v;                                                                                \
    }                                                                                            \
  }                                                                                              \
  static void BiasActRows(float* y, const float* bias, const float* res, int64_t r0, int64_t r1, \
                          int64_t n, int act) {                                                  \
    for (int64_t r = r0; r < r1; ++r) {                                                          \
      float* yr = y + r * n;                                                                     \
      const float* rr = res ? res + r * n : nullptr;                                             \
      int64_t j = 0;                                                                             \
      for (; j + S::kW <= n; j += S::kW) {                                                       \
        S::V v = S::Load(yr + j);                                                                \
        if (bias) v = S::Add(v, S::Load(bias + j));                                              \
        v = Act(v, act);                                                                         \
        if (rr) v = S::Add(v, S::Load(rr + j));                                                  \
        S::Store(yr + j, v);                                                                     \
      }                                                                                          \
      if (j < n) {                                                                               \
        const int k = static_cast<int>(n - j);                                                   \
        S::V v = S::LoadN(yr + j, k);                                                            \
        if (bias) v = S::Add(v, S::LoadN(bias + j, k));                                          \
        v = Act(v, act);                                                                         \
        if (rr) v = S::Add(v, S::LoadN(rr + j, k));                                              \
        S::StoreN(yr + j, v, k);                                                                 \
      }                                                                                          \
    }                                                                                            \
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

void BiasActivationKernel(Isa isa, float* y, const float* bias, const float* residual, int64_t rows,
                          int64_t n, Activation act) {
  const int a = static_cast<int>(act);
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1));
  ParallelFor(rows, grain, [&](int64_t r0, int64_t r1) {
    if (isa == Isa::kAvx512) {
      simd_avx512::BiasActRows(y, bias, residual, r0, r1, n, a);
    } else {
      simd_avx2::BiasActRows(y, bias, residual, r0, r1, n, a);
    }
  });
}

}  // namespace surge::engine::cpu
