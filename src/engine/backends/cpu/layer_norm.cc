// LayerNorm over the last axis (Surge op LayerNorm).
#include <cmath>

#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/parallel.h"

#define SURGE_SIMD_BODY                                                                      \
  static void LayerNormRows(const float* x, const float* gamma, const float* beta, float* y, \
                            int64_t r0, int64_t r1, int64_t h, float eps) {                  \
    for (int64_t r = r0; r < r1; ++r) {                                                      \
      float mean, rstd;                                                                      \
      RowStats(x + r * h, h, eps, &mean, &rstd);                                             \
      RowNormalize(x + r * h, gamma, beta, y + r * h, h, mean, rstd);                        \
    }                                                                                        \
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

void LayerNormKernel(Isa isa, const float* x, const float* gamma, const float* beta, float* y,
                     int64_t rows, int64_t h, float epsilon) {
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(h, 1));
  ParallelFor(rows, grain, [&](int64_t r0, int64_t r1) {
    if (isa == Isa::kAvx512) {
      simd_avx512::LayerNormRows(x, gamma, beta, y, r0, r1, h, epsilon);
    } else {
      simd_avx2::LayerNormRows(x, gamma, beta, y, r0, r1, h, epsilon);
    }
  });
}

}  // namespace surge::engine::cpu
