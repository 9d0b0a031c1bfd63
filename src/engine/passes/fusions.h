// The individual fusion passes that Optimize() runs, in this order. Each rewrites matches in place,
// leaves the graph valid and topologically sorted, and returns how many matches it fused. They rely
// on value shapes where shape inference provided them and fall back to constant attributes and
// shape tensors otherwise. Exposed for tests; the builder calls Optimize().
#pragma once

#include "core/status.h"
#include "engine/ir/graph.h"

namespace surge::engine::passes {

// Removes Identity, inference-mode Dropout and same-dtype Cast nodes.
Result<int> RemoveIdentities(ir::Graph& g);
// ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div(/Mul/Add) and LayerNormalization → surge::LayerNorm.
Result<int> FuseLayerNorm(ir::Graph& g);
// x / Sqrt(ReduceSum(x*x) + eps) and F.normalize's x / Clip(ReduceL2(x), eps) over the last axis
// → surge::L2Normalize.
Result<int> FuseL2Normalize(ir::Graph& g);
// Erf and tanh GELU forms, and ONNX Gelu → surge::Gelu.
Result<int> FuseGelu(ir::Graph& g);
// MatMul(X, W const [K,N]) (+ Add bias), Gemm → surge::Linear; a Linear between a flattening
// Reshape and its inverse (a decomposed 3-D linear) then reads the un-flattened input.
Result<int> FuseLinear(ir::Graph& g);
// Linear followed by Gelu / Tanh / Relu → Linear{activation}.
Result<int> FuseLinearActivation(ir::Graph& g);
// Self-attention subgraphs over three Linears of one input → merged QKV Linear + surge::Attention.
Result<int> FuseAttention(ir::Graph& g);
// LayerNorm(Add(x, skip)) → surge::SkipLayerNorm.
Result<int> FuseSkipLayerNorm(ir::Graph& g);
// Gathers of word/position/type embeddings + LayerNorm → surge::EmbedLayerNorm.
Result<int> FuseEmbedLayerNorm(ir::Graph& g);
// Linear + residual Add → Linear with R (only where no SkipLayerNorm takes the Add).
Result<int> FuseLinearResidual(ir::Graph& g);

}  // namespace surge::engine::passes
