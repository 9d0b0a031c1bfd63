// Residual + LayerNorm: LayerNorm(Add(x, skip)) → surge::SkipLayerNorm(x, skip, gamma, beta), and
// LayerNorm(Add(Add(x, bias[H]), skip)) → SkipLayerNorm(x, skip, gamma, beta, bias). When the sum
// has other readers (the next residual in post-norm stacks, or a model output) the fused node
// also produces it as its second output.
#include <vector>

#include "core/logging.h"
#include "engine/passes/fusions.h"
#include "engine/passes/pattern.h"

namespace surge::engine::passes {

Result<int> FuseSkipLayerNorm(ir::Graph& g) {
  Matcher m(g);
  int fused = 0;
  const int num_nodes = static_cast<int>(g.nodes.size());
  for (int i = 0; i < num_nodes; ++i) {
    if (m.IsClaimed(i)) continue;
    const ir::Node ln = g.nodes[i];
    if (ln.domain != ir::kSurgeDomain || ln.op_type != "LayerNorm") continue;
    int sum = ln.input(0);
    const ir::Node* add = m.Producer(sum, "Add");
    if (!add) continue;
    int a = add->input(0), b = add->input(1);
    if (a == b || m.IsConst(a) || m.IsConst(b)) continue;
    const auto& sa = m.value(a).shape;
    const auto& sb = m.value(b).shape;
    if (!sa || !sb || *sa != *sb) {
      SURGE_LOG_DEBUG("SkipLayerNorm fusion: operands of '{}' differ in shape or are unknown; kept",
                      add->name);
      continue;
    }
    std::vector<int> nodes{i, m.ProducerIndex(sum)};
    int bias = -1;
    // x + bias folded in front of the residual: take the bias as SkipLayerNorm's 5th input.
    for (int k = 0; k < 2 && bias < 0; ++k) {
      int v = k == 0 ? a : b;
      const ir::Node* inner = m.Producer(v, "Add");
      if (!inner || m.Uses(v) != 1 || m.IsGraphOutput(v)) continue;
      for (int j = 0; j < 2; ++j) {
        int c = inner->input(j);
        if (!m.IsConst(c) || !sa || sa->empty()) continue;
        const Tensor& t = m.value(c).constant;
        if (!sa->back().IsStatic() || t.numel() != sa->back().StaticValue() ||
            t.dim(t.rank() - 1) != t.numel() || !IsFloating(t.dtype())) {
          continue;
        }
        Tensor f = t.ToFloat32();
        auto r = f.Reshaped({f.numel()});
        bias = g.AddConstant(m.value(c).name, r.ok() ? std::move(r).value() : f);
        nodes.push_back(m.ProducerIndex(v));
        (k == 0 ? a : b) = inner->input(1 - j);
        break;
      }
    }
    bool keep_sum = m.Uses(sum) > 1 || m.IsGraphOutput(sum);
    std::vector<int> inputs{a, b, ln.input(1), ln.input(2)};
    if (bias >= 0) inputs.push_back(bias);
    auto out = m.AddNode("SkipLayerNorm", ir::kSurgeDomain, ln.name, inputs, keep_sum ? 2 : 1,
                         {{"epsilon", ln.GetFloat("epsilon", 1e-5)}});
    m.Replace(ln.outputs[0], out[0]);
    if (keep_sum) m.Replace(sum, out[1]);
    m.Claim(nodes);
    ++fused;
  }
  if (fused > 0) SURGE_RETURN_IF_ERROR(FinishPass(g));
  return fused;
}

}  // namespace surge::engine::passes
