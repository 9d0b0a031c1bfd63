// EmbedLayerNorm: word + position (+ token type) embedding rows, summed and normalised.
#include <cmath>
#include <vector>

#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/parallel.h"

#define SURGE_SIMD_BODY                                                                     \
  static void EmbedRows(const float* w, const float* p, const float* t, const float* gamma, \
                        const float* beta, float* y, int64_t h, float eps) {                \
    int64_t j = 0;                                                                          \
    for (; j + S::kW <= h; j += S::kW) {                                                    \
      S::V v = S::Add(S::Load(w + j), S::Load(p + j));                                      \
      if (t) v = S::Add(v, S::Load(t + j));                                                 \
      S::Store(y + j, v);                                                                   \
    }                                                                                       \
    if (j < h) {                                                                            \
      const int n = static_cast<int>(h - j);                                                \
      S::V v = S::Add(S::LoadN(w + j, n), S::LoadN(p + j, n));                              \
      if (t) v = S::Add(v, S::LoadN(t + j, n));                                             \
      S::StoreN(y + j, v, n);                                                               \
    }                                                                                       \
    float mean, rstd;                                                                       \
    RowStats(y, h, eps, &mean, &rstd);                                                      \
    RowNormalize(y, gamma, beta, y, h, mean, rstd);                                         \
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

bool EmbedLayerNormKernel(Isa isa, const EmbedLayerNormArgs& a, float* y, int64_t* bad_index,
                          int* bad_kind) {
  const int64_t n = a.batch * a.seq;
  std::vector<int64_t> pos(static_cast<size_t>(n));
  for (int64_t b = 0; b < a.batch; ++b) {
    int64_t running = 0;
    for (int64_t s = 0; s < a.seq; ++s) {
      const int64_t i = b * a.seq + s;
      if (a.position_ids) {
        pos[i] = a.position_ids[i];
      } else if (!a.roberta_positions) {
        pos[i] = s;
      } else {
        const bool real = a.input_ids[i] != a.padding_idx;
        running += real;
        pos[i] = real ? running + a.padding_idx : a.padding_idx;
      }
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    int kind = -1;
    if (a.input_ids[i] < 0 || a.input_ids[i] >= a.vocab) {
      kind = 0;
    } else if (pos[i] < 0 || pos[i] >= a.max_pos) {
      kind = 1;
    } else if (a.type_emb && a.token_type_ids &&
               (a.token_type_ids[i] < 0 || a.token_type_ids[i] >= a.type_vocab)) {
      kind = 2;
    }
    if (kind >= 0) {
      *bad_index = i;
      *bad_kind = kind;
      return false;
    }
  }
  const int64_t h = a.hidden;
  ParallelFor(n, std::max<int64_t>(1, 8192 / std::max<int64_t>(h, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      const float* w = a.word_emb + a.input_ids[i] * h;
      const float* p = a.pos_emb + pos[i] * h;
      const float* t = nullptr;
      if (a.type_emb) t = a.type_emb + (a.token_type_ids ? a.token_type_ids[i] : 0) * h;
      if (isa == Isa::kAvx512) {
        simd_avx512::EmbedRows(w, p, t, a.gamma, a.beta, y + i * h, h, a.epsilon);
      } else {
        simd_avx2::EmbedRows(w, p, t, a.gamma, a.beta, y + i * h, h, a.epsilon);
      }
    }
  });
  return true;
}

}  // namespace surge::engine::cpu
