// Reference evaluation of single ops on concrete tensors: the semantics of every supported ONNX op
// and Surge fused op, in plain C++. Used by constant folding at build time and by backends as the
// generic kernel for ops they have no fused kernel for. Correct first; not tuned.
#pragma once

#include <span>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "engine/ir/graph.h"

namespace surge::engine::ir {

// True when EvalNode supports this op (domain, type).
bool CanEval(const Node& node);
// Computes `node` on `inputs` (in node input order; an undefined Tensor for an omitted optional
// input). Fills `outputs` with newly owned tensors, one per node output.
Status EvalNode(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs);

}  // namespace surge::engine::ir
