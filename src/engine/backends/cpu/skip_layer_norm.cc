// SkipLayerNorm: y = LayerNorm(x + skip + bias), optionally also returning the sum.
#include <cmath>

#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/parallel.h"

#define SURGE_SIMD_BODY                                                                       \
  static void SkipLayerNormRows(const float* x, const float* skip, const float* bias,         \
                                const float* gamma, const float* beta, float* y, float* sum,  \
                                int64_t r0, int64_t r1, int64_t h, float eps) {               \
    for (int64_t r = r0; r < r1; ++r) {                                                       \
      const float* xr = x + r * h;                                                            \
      const float* sr = skip + r * h;                                                         \
      /* The sum goes to `sum` when asked for, else straight into y (normalised in place). */ \
      float* s = sum ? sum + r * h : y + r * h;                                               \
      int64_t j = 0;                                                                          \
      for (; j + S::kW <= h; j += S::kW) {                                                    \
        S::V v = S::Add(S::Load(xr + j), S::Load(sr + j));                                    \
        if (bias) v = S::Add(v, S::Load(bias + j));                                           \
        S::Store(s + j, v);                                                                   \
      }                                                                                       \
      if (j < h) {                                                                            \
        const int n = static_cast<int>(h - j);                                                \
        S::V v = S::Add(S::LoadN(xr + j, n), S::LoadN(sr + j, n));                            \
        if (bias) v = S::Add(v, S::LoadN(bias + j, n));                                       \
        S::StoreN(s + j, v, n);                                                               \
      }                                                                                       \
      float mean, rstd;                                                                       \
      RowStats(s, h, eps, &mean, &rstd);                                                      \
      RowNormalize(s, gamma, beta, y + r * h, h, mean, rstd);                                 \
    }                                                                                         \
  }

#define SURGE_SIMD_AVX512 1
// clang-format off
#include "engine/backends/cpu/simd_begin.inc"
#include "engine/backends/cpu/norm_simd.inc"
SURGE_SIMD_BODY
#include "engine/backends/cpu/simd_end.inc"
// clang-format on
#undef SURGE_SIMD_AVX512

#define SURGE_SIMD_AVX512 0
// clang-format off
#include "engine/backends/cpu/simd_begin.inc"
#include "engine/backends/cpu/norm_simd.inc"
SURGE_SIMD_BODY
#include "engine/backends/cpu/simd_end.inc"
// clang-format on
#undef SURGE_SIMD_AVX512
#undef SURGE_SIMD_BODY

namespace surge::engine::cpu {

void SkipLayerNormKernel(Isa isa, const float* x, const float* skip, const float* bias,
                         const float* gamma, const float* beta, float* y, float* sum_out,
                         int64_t rows, int64_t h, float epsilon) {
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(h, 1));
  ParallelFor(rows, grain, [&](int64_t r0, int64_t r1) {
    if (isa == Isa::kAvx512) {
      simd_avx512::SkipLayerNormRows(x, skip, bias, gamma, beta, y, sum_out, r0, r1, h, epsilon);
    } else {
      simd_avx2::SkipLayerNormRows(x, skip, bias, gamma, beta, y, sum_out, r0, r1, h, epsilon);
    }
  });
}

}  // namespace surge::engine::cpu
