// LayerNorm over the last axis, from LayerNormalization or from its decomposition
//   mean = ReduceMean(x, [-1]); d = x - mean; var = ReduceMean(d^2, [-1]);
//   y = d / Sqrt(var + eps) [* gamma] [+ beta]
// (exporters write d^2 as Pow(d, 2) or Mul(d, d), and may compute x - mean twice).
#include <algorithm>
#include <vector>

#include "core/logging.h"
#include "engine/passes/fusions.h"
#include "engine/passes/pattern.h"

namespace surge::engine::passes {
namespace {

// Last dimension when static, else -1.
int64_t LastDim(const Matcher& m, int v) {
  const auto& s = m.value(v).shape;
  if (!s || s->empty() || !s->back().IsStatic()) return -1;
  return s->back().StaticValue();
}

struct Decomposed {
  int x = -1;
  int out = -1;  // value replaced by the fused LayerNorm
  int gamma = -1;
  int beta = -1;
  double eps = 0;
  std::vector<int> nodes;
};

// The Sub(x, mean) with mean = ReduceMean(x, last axis); fills x and the nodes.
bool MatchCentered(const Matcher& m, int v, int* x, int* mean, std::vector<int>* nodes) {
  const ir::Node* sub = m.Producer(v, "Sub");
  if (!sub) return false;
  const ir::Node* rm = m.Producer(sub->input(1), "ReduceMean");
  if (!rm || rm->input(0) != sub->input(0)) return false;
  if (!ReducesLastAxis(m, *rm, sub->input(0))) return false;
  if (*x >= 0 && (*x != sub->input(0) || *mean != sub->input(1))) return false;
  *x = sub->input(0);
  *mean = sub->input(1);
  nodes->push_back(m.ProducerIndex(v));
  nodes->push_back(m.ProducerIndex(sub->input(1)));
  return true;
}

bool MatchDecomposed(const Matcher& m, int div_node, Decomposed* d) {
  const ir::Node& div = m.graph().nodes[div_node];
  std::vector<int> nodes{div_node};
  int x = -1, mean = -1;
  if (!MatchCentered(m, div.input(0), &x, &mean, &nodes)) return false;
  const ir::Node* sqrt = m.Producer(div.input(1), "Sqrt");
  if (!sqrt) return false;
  nodes.push_back(m.ProducerIndex(div.input(1)));
  const ir::Node* add = m.Producer(sqrt->input(0), "Add");
  if (!add) return false;
  nodes.push_back(m.ProducerIndex(sqrt->input(0)));
  int var = add->input(0);
  auto eps = m.ScalarConst(add->input(1));
  if (!eps) {
    var = add->input(1);
    eps = m.ScalarConst(add->input(0));
  }
  if (!eps || *eps < 0) return false;
  const ir::Node* rm = m.Producer(var, "ReduceMean");
  if (!rm || !ReducesLastAxis(m, *rm, x)) return false;
  nodes.push_back(m.ProducerIndex(var));
  int sq = rm->input(0);
  if (const ir::Node* pow = m.Producer(sq, "Pow")) {
    auto e = m.ScalarConst(pow->input(1));
    if (!e || *e != 2.0) return false;
    if (!MatchCentered(m, pow->input(0), &x, &mean, &nodes)) return false;
  } else if (const ir::Node* mul = m.Producer(sq, "Mul")) {
    if (mul->input(0) != mul->input(1)) return false;
    if (!MatchCentered(m, mul->input(0), &x, &mean, &nodes)) return false;
  } else {
    return false;
  }
  nodes.push_back(m.ProducerIndex(sq));
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  for (int n : nodes) {
    if (m.IsClaimed(n)) return false;
  }
  // Every intermediate stays inside the pattern.
  for (int n : nodes) {
    if (n == div_node) continue;
    for (int o : m.graph().nodes[n].outputs) {
      if (!UsesWithin(m, o, nodes)) return false;
    }
  }
  d->x = x;
  d->eps = *eps;
  d->out = div.outputs[0];
  // Optional affine part: * gamma, + beta, with per-channel constants.
  const int64_t h = LastDim(m, x);
  auto channel_const = [&](int v) {
    if (!m.IsConst(v)) return false;
    const Tensor& t = m.value(v).constant;
    if (!IsFloating(t.dtype()) || (h > 0 && t.numel() != h)) return false;
    for (size_t i = 0; i + 1 < t.rank(); ++i) {
      if (t.dim(i) != 1) return false;
    }
    return t.rank() >= 1;
  };
  if (m.Uses(d->out) == 1 && !m.IsGraphOutput(d->out)) {
    int consumer = m.Consumers(d->out)[0];
    const ir::Node& mul = m.graph().nodes[consumer];
    if (!m.IsClaimed(consumer) && mul.domain.empty() && mul.op_type == "Mul") {
      int other = mul.input(0) == d->out ? mul.input(1) : mul.input(0);
      if (other != d->out && channel_const(other)) {
        d->gamma = other;
        d->out = mul.outputs[0];
        nodes.push_back(consumer);
      }
    }
  }
  if (d->gamma >= 0 && m.Uses(d->out) == 1 && !m.IsGraphOutput(d->out)) {
    int consumer = m.Consumers(d->out)[0];
    const ir::Node& add2 = m.graph().nodes[consumer];
    if (!m.IsClaimed(consumer) && add2.domain.empty() && add2.op_type == "Add") {
      int other = add2.input(0) == d->out ? add2.input(1) : add2.input(0);
      if (other != d->out && channel_const(other)) {
        d->beta = other;
        d->out = add2.outputs[0];
        nodes.push_back(consumer);
      }
    }
  }
  d->nodes = std::move(nodes);
  return true;
}

// A per-channel constant as a float32 [H] tensor.
Tensor ChannelVector(const Tensor& t) {
  Tensor f = t.ToFloat32();
  auto r = f.Reshaped({f.numel()});
  return r.ok() ? std::move(r).value() : f;
}

}  // namespace

Result<int> FuseLayerNorm(ir::Graph& g) {
  Matcher m(g);
  int fused = 0;
  const int num_nodes = static_cast<int>(g.nodes.size());
  for (int i = 0; i < num_nodes; ++i) {
    if (m.IsClaimed(i)) continue;
    const ir::Node node = g.nodes[i];  // copy: AddNode may grow the node vector
    if (!node.domain.empty()) continue;
    if (node.op_type == "LayerNormalization") {
      int x = node.input(0);
      int64_t axis = node.GetInt("axis", -1);
      int64_t rank = RankOf(m, x);
      if (axis != -1 && !(rank > 0 && axis == rank - 1)) {
        SURGE_LOG_DEBUG("LayerNorm fusion: '{}' normalises axis {} (not the last); kept", node.name,
                        axis);
        continue;
      }
      bool extra_used = false;
      for (size_t o = 1; o < node.outputs.size(); ++o) extra_used |= m.Uses(node.outputs[o]) > 0;
      if (extra_used) continue;
      int gamma = node.input(1);
      int beta = node.input(2);
      if (beta < 0) {
        int64_t h = LastDim(m, x);
        if (m.IsConst(gamma)) h = m.value(gamma).constant.numel();
        if (h <= 0) continue;
        std::vector<float> zeros(static_cast<size_t>(h), 0.0f);
        beta = g.AddConstant(node.name + ".beta", ConstFloat({h}, zeros));
      }
      auto out =
          m.AddNode("LayerNorm", ir::kSurgeDomain, node.name.empty() ? "LayerNorm" : node.name,
                    {x, gamma, beta}, 1, {{"epsilon", node.GetFloat("epsilon", 1e-5)}});
      m.Replace(node.outputs[0], out[0]);
      m.Claim(i);
      ++fused;
      continue;
    }
    if (node.op_type != "Div") continue;
    Decomposed d;
    if (!MatchDecomposed(m, i, &d)) continue;
    int64_t h = LastDim(m, d.x);
    if (h <= 0 && d.gamma >= 0) h = m.value(d.gamma).constant.numel();
    if (h <= 0) {
      SURGE_LOG_DEBUG("LayerNorm fusion: width of '{}' unknown; kept", m.value(d.x).name);
      continue;
    }
    std::vector<float> ones(static_cast<size_t>(h), 1.0f), zeros(static_cast<size_t>(h), 0.0f);
    int gamma = d.gamma >= 0
                    ? g.AddConstant(m.value(d.gamma).name, ChannelVector(m.value(d.gamma).constant))
                    : g.AddConstant(node.name + ".gamma", ConstFloat({h}, ones));
    int beta = d.beta >= 0
                   ? g.AddConstant(m.value(d.beta).name, ChannelVector(m.value(d.beta).constant))
                   : g.AddConstant(node.name + ".beta", ConstFloat({h}, zeros));
    auto out = m.AddNode("LayerNorm", ir::kSurgeDomain, node.name.empty() ? "LayerNorm" : node.name,
                         {d.x, gamma, beta}, 1, {{"epsilon", d.eps}});
    m.Replace(d.out, out[0]);
    m.Claim(d.nodes);
    ++fused;
  }
  if (fused > 0) SURGE_RETURN_IF_ERROR(FinishPass(g));
  return fused;
}

}  // namespace surge::engine::passes
