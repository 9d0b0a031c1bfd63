// Multi-head self-attention with a key padding mask (Surge op Attention). Per (batch, head):
// pack the real keys (K transposed, V) once, then for blocks of 4 queries Q·Kᵀ over real keys
// only, a max-subtracted softmax, and P·V, all with register-blocked FMA micro-kernels.
#include <algorithm>
#include <vector>

#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/parallel.h"

#define SURGE_SIMD_AVX512 1
// clang-format off
#include "engine/backends/cpu/simd_begin.inc"
#include "engine/backends/cpu/attention_simd.inc"
#include "engine/backends/cpu/simd_end.inc"
// clang-format on
#undef SURGE_SIMD_AVX512

#define SURGE_SIMD_AVX512 0
// clang-format off
#include "engine/backends/cpu/simd_begin.inc"
#include "engine/backends/cpu/attention_simd.inc"
#include "engine/backends/cpu/simd_end.inc"
// clang-format on
#undef SURGE_SIMD_AVX512

namespace surge::engine::cpu {

void AttentionKernel(Isa isa, const float* qkv, const int64_t* mask, float* y, int64_t batch,
                     int64_t seq, int64_t hidden, int64_t heads, float scale) {
  const int64_t d = hidden / heads;
  // Attended keys per sequence; a sequence without real keys attends to all, uniformly.
  std::vector<std::vector<int64_t>> keys(static_cast<size_t>(batch));
  std::vector<float> scales(static_cast<size_t>(batch), scale);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seq; ++s) {
      if (mask == nullptr || mask[b * seq + s] != 0) keys[b].push_back(s);
    }
    if (keys[b].empty()) {
      for (int64_t s = 0; s < seq; ++s) keys[b].push_back(s);
      scales[b] = 0.0f;
    }
  }
  const int64_t row_stride = 3 * hidden;
  const int64_t pad = 16;
  const int64_t lp = (seq + pad - 1) / pad * pad;
  const int64_t dp = (d + pad - 1) / pad * pad;
  ParallelFor(batch * heads, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> kt(static_cast<size_t>(d * lp)), vc(static_cast<size_t>(lp * dp)),
        scores(static_cast<size_t>(4 * lp));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / heads, h = t % heads;
      const float* base = qkv + b * seq * row_stride;
      float* out = y + b * seq * hidden + h * d;
      const auto& k = keys[b];
      const int64_t l = static_cast<int64_t>(k.size());
      if (isa == Isa::kAvx512) {
        simd_avx512::AttendHead(base, row_stride, seq, d, h * d, hidden + h * d, 2 * hidden + h * d,
                                k.data(), l, scales[b], out, hidden, kt.data(), vc.data(),
                                scores.data());
      } else {
        simd_avx2::AttendHead(base, row_stride, seq, d, h * d, hidden + h * d, 2 * hidden + h * d,
                              k.data(), l, scales[b], out, hidden, kt.data(), vc.data(),
                              scores.data());
      }
    }
  });
}

}  // namespace surge::engine::cpu
