// The generic kernel: every op without a fused CPU kernel runs through the reference evaluator.
#include "engine/backends/cpu/node_kernels.h"
#include "engine/ir/eval.h"

namespace surge::engine::cpu {

Status RunGenericNode(const ir::Node& node, std::span<const Tensor* const> in,
                      std::vector<Tensor>* out) {
  std::vector<Tensor> inputs;
  inputs.reserve(in.size());
  for (const Tensor* t : in) inputs.push_back(t ? *t : Tensor());
  return ir::EvalNode(node, inputs, out);
}

}  // namespace surge::engine::cpu
