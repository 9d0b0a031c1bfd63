// Fused multi-head self-attention, flash-attention style: one pass over the keys per 64-query tile
// with an online softmax in registers (running max in float32; each weight one FFMA and one
// MUFU.EX2), Q·Kᵀ and P·V on tensor cores (mma.sync m16n8k16, FP16/BF16 operands, float32
// accumulators in registers; Q held in registers, K/V tiles double-buffered in shared memory
// through cp.async). Scores and probabilities never reach memory; probabilities are rounded to
// the I/O type for P·V, and the row sums that normalise them are P·1 on the tensor cores (the
// same rounded weights, float32 sums).
//
// Layout (the surge::Attention contract): QKV rows are [Q | K | V], each head-major, so head h of
// token t reads qkv[t*3H + h*d .. +d] (Q), +H (K), +2H (V); output row t is [H] head-major.
//
// Two forms:
//   packed (cu_seqlens != null): sequence b owns token rows cu_seqlens[b] .. cu_seqlens[b+1]-1 of a
//     [T, 3H] tensor (padding-free; no mask needed);
//   padded (cu_seqlens == null): batch b owns rows b*seq .. b*seq+seq-1; key_mask[b*seq+k] == 0
//     marks padding keys. A row whose keys are all padding averages every key (as the reference).
#pragma once

#include "engine/backends/cuda/kernel_common.h"

namespace surge::engine::cuda {

struct AttentionArgs {
  DataType dtype = DataType::kF16;
  int batch = 0;
  int seq = 0;  // padded: sequence length; packed: the longest sequence (grid size)
  int num_heads = 0;
  int head_dim = 0;  // 16, 32, 64 or 128
  float scale = 0.f;
  const int32_t* cu_seqlens = nullptr;  // [batch+1] or null (padded)
  const int32_t* key_mask = nullptr;    // padded only: [batch*seq] or null (all real)
  const void* qkv = nullptr;            // [rows, 3*num_heads*head_dim]
  void* out = nullptr;                  // [rows, num_heads*head_dim]; may be null with q.y set
  QuantizedCopy q;                      // optional quantised copy of out (bytes, same layout)
  // Only each sequence's first query (its [CLS] token): out and q.y then hold one row per
  // sequence, [batch, num_heads*head_dim]. Keys and values are all of the sequence's as before.
  bool first_query_only = false;
};

// Head dims the kernel is built for (16, 32, 64, 128).
bool AttentionHeadDimSupported(int head_dim);
// Also needs qkv and out 16-byte aligned (q.y 8-byte aligned), and out or q.y.
bool AttentionCanImplement(const AttentionArgs& args);
size_t AttentionWorkspaceSize(const AttentionArgs& args);
cudaError_t AttentionRun(const AttentionArgs& args, void* workspace, cudaStream_t stream);

}  // namespace surge::engine::cuda
