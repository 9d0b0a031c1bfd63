// The CPU backend's fused kernels on raw float32 buffers (row-major). Each takes the ISA to run
// (cpu::Isa; kAvx512 or kAvx2, never above what the CPU has) and parallelises over rows or
// (batch, head) pairs with ParallelFor. Shapes are checked by the callers (cpu_backend.cc).
#pragma once

#include <cstdint>

#include "engine/backends/cpu/isa.h"

namespace surge::engine::cpu {

// y = LayerNorm(x) over rows of h: mean and variance in float32, two passes over the row in L1.
void LayerNormKernel(Isa isa, const float* x, const float* gamma, const float* beta, float* y,
                     int64_t rows, int64_t h, float epsilon);

// s = x + skip (+ bias); y = LayerNorm(s). `sum_out` (optional, may be nullptr) receives s. y may
// alias x or skip (in place).
void SkipLayerNormKernel(Isa isa, const float* x, const float* skip, const float* bias,
                         const float* gamma, const float* beta, float* y, float* sum_out,
                         int64_t rows, int64_t h, float epsilon);

// y = GELU(x), erf form (approximate_tanh=false) or tanh form; y may alias x.
void GeluKernel(Isa isa, const float* x, float* y, int64_t n, bool approximate_tanh);

// In-place activation on rows×n with an optional bias[n] added first and an optional residual
// (rows×n) added last: the Linear epilogue when oneDNN's post-ops do not take it.
enum class Activation { kNone, kGelu, kGeluTanh, kTanh, kRelu };
void BiasActivationKernel(Isa isa, float* y, const float* bias, const float* residual, int64_t rows,
                          int64_t n, Activation act);

struct EmbedLayerNormArgs {
  const int64_t* input_ids = nullptr;       // [B,S]
  const int64_t* token_type_ids = nullptr;  // [B,S] or nullptr (type row 0 when type_emb is set)
  const int64_t* position_ids = nullptr;    // [B,S] or nullptr (computed per position_mode)
  const float* word_emb = nullptr;          // [V,H]
  const float* pos_emb = nullptr;           // [P,H]
  const float* type_emb = nullptr;          // [T,H] or nullptr
  const float* gamma = nullptr;
  const float* beta = nullptr;
  int64_t batch = 0, seq = 0, hidden = 0, vocab = 0, max_pos = 0, type_vocab = 0;
  bool roberta_positions = false;  // cumsum(ids != padding_idx) + padding_idx
  int64_t padding_idx = 1;
  float epsilon = 1e-12f;
};
// Y[B,S,H]. Ids are checked first; an out-of-range id returns false with *bad_index set to the
// flat position and *bad_kind to 0 (word), 1 (position) or 2 (type); nothing is written then.
bool EmbedLayerNormKernel(Isa isa, const EmbedLayerNormArgs& args, float* y, int64_t* bad_index,
                          int* bad_kind);

// Multi-head attention over QKV[B,S,3H] (columns [Q|K|V], head-major) → Y[B,S,H]. mask[B,S]
// (nullptr: all keys real; nonzero = real key). Every query row attends over the real keys only;
// a sequence with no real key attends uniformly over all keys (as an additive-mask model does).
void AttentionKernel(Isa isa, const float* qkv, const int64_t* mask, float* y, int64_t batch,
                     int64_t seq, int64_t hidden, int64_t heads, float scale);

}  // namespace surge::engine::cpu
