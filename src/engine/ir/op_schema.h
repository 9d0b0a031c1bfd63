// Op schemas: for each op (ONNX domain "" or Surge domain "surge"), its arity and its shape/dtype
// inference function. The registry is filled once, on first lookup, by RegisterBuiltinOpSchemas()
// (ops_*.cc), and is read-only afterwards.
//
// Fused Surge ops (domain "surge"), shared by every backend:
//   Linear(X[...,K], W[K,N], B[N]?, R[...,N]?) -> Y[...,N]
//       attrs: activation = "none" | "gelu" | "gelu_tanh" | "tanh" | "relu" (applied after bias,
//              before residual)
//   Gelu(X) -> Y                      attrs: approximate = "none" | "tanh"
//   LayerNorm(X, gamma[H], beta[H]) -> Y         attrs: epsilon (over the last axis)
//   L2Normalize(X) -> Y               attrs: epsilon (default 1e-12), eps_mode = "add" | "max"
//       over the last axis: Y = X / sqrt(sum(X^2) + epsilon) ("add"), or
//       Y = X / max(sqrt(sum(X^2)), epsilon) ("max", as torch.nn.functional.normalize)
//   SkipLayerNorm(X, skip, gamma, beta, bias?) -> Y, Sum?
//       Y = LayerNorm(X + skip + bias); optional 2nd output is the pre-norm sum
//   EmbedLayerNorm(input_ids[B,S], token_type_ids[B,S]?, position_ids[B,S]?, word_emb[V,H],
//                  pos_emb[P,H], type_emb[T,H]?, gamma[H], beta[H], attention_mask[B,S]?) ->
//                  Y[B,S,H]
//       attrs: epsilon, position_mode = "arange" (ids 0..S-1) | "roberta" (cumsum of
//              input_ids != padding_idx, offset by padding_idx), padding_idx
//   Attention(QKV[B,S,3H], mask[B,S]?) -> Y[B,S,H]
//       attrs: num_heads, scale (default 1/sqrt(H/num_heads)); mask: nonzero = attend, 0 = padding
//       key; QKV columns are [Q | K | V], each head-major (head h uses columns h*d .. h*d+d-1).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/ir/graph.h"

namespace surge::engine::ir {

// Given a node whose input values have dtype/shape set (shape may be unknown), sets dtype and
// shape of its outputs in the graph. Returns an error naming the node on invalid inputs.
using InferFn = std::function<Status(Graph& g, Node& node)>;

struct OpSchema {
  std::string domain;
  std::string op_type;
  int min_inputs = 0;
  int max_inputs = 0;  // -1: variadic
  int min_outputs = 1;
  int max_outputs = 1;
  InferFn infer;  // may be empty: outputs stay unknown
};

void RegisterOpSchema(OpSchema schema);
// Registers every built-in schema (defined in ops_*.cc); called once by the registry itself.
void RegisterBuiltinOpSchemas();
// nullptr when unknown.
const OpSchema* FindOpSchema(std::string_view domain, std::string_view op_type);
// Every registered op, sorted by (domain, op_type).
std::vector<const OpSchema*> AllOpSchemas();

// Checks the node's arity against its schema; error names op, node and the valid range.
Status CheckArity(const Node& node, int64_t opset);

// The axes of a Squeeze/Unsqueeze/Reduce* node: its constant input `input` (opset 13+; nullopt
// when that input is not a known constant) or its "axes" attribute; empty when neither is given.
std::optional<std::vector<int64_t>> AxesOf(const Graph& g, const Node& n, size_t input);

// surge::L2Normalize's epsilon mode: true for "max", false for "add"; an error naming the node
// for another mode or a negative epsilon.
Result<bool> L2NormalizeMaxMode(const Node& n);

}  // namespace surge::engine::ir
