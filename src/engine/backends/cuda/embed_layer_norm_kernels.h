// EmbedLayerNorm: word + position (+ token type) embedding lookup, summed in float32 and layer-
// normalised, one output row per token. With `row_index` the output is packed: output row r is
// token row_index[r] of the [batch, seq] inputs, so padding never gets embedded (the pack step of
// padding-free execution). Ids are int32 and already range-checked by the caller.
#pragma once

#include "engine/backends/cuda/kernel_common.h"

namespace surge::engine::cuda {

struct EmbedLayerNormArgs {
  DataType dtype = DataType::kF16;
  int64_t rows = 0;  // output rows: batch*seq, or the packed token count
  int hidden = 0;
  const int32_t* input_ids = nullptr;  // [batch*seq]
  const int32_t* type_ids = nullptr;   // [batch*seq] or null (type 0 when type_emb is given)
  const int32_t* positions = nullptr;  // [batch*seq] position id of each token
  const int32_t* row_index = nullptr;  // [rows] token of each output row, or null (identity)
  const void* word_emb = nullptr;      // [vocab, hidden]
  const void* pos_emb = nullptr;       // [max_pos, hidden]
  const void* type_emb = nullptr;      // [types, hidden] or null
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float epsilon = 1e-12f;
  void* y = nullptr;  // [rows, hidden]
};

// hidden in [1, 4096].
bool EmbedLayerNormCanImplement(const EmbedLayerNormArgs& args);
size_t EmbedLayerNormWorkspaceSize(const EmbedLayerNormArgs& args);
cudaError_t EmbedLayerNormRun(const EmbedLayerNormArgs& args, void* workspace, cudaStream_t stream);

}  // namespace surge::engine::cuda
