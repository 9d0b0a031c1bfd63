// Dense layers: MatMul(X, W[K,N]) [+ bias], Gemm(X, W, C){transB} and a Transpose of a constant
// weight become surge::Linear(X, W[K,N], B[N]); then activations (Gelu/Tanh/Relu) and residual Adds
// move into Linear's epilogue.
#include <algorithm>
#include <vector>

#include "core/logging.h"
#include "engine/passes/fusions.h"
#include "engine/passes/pattern.h"

namespace surge::engine::passes {
namespace {

// A [N]-shaped bias constant (any leading dims of size 1).
bool IsBias(const Matcher& m, int v, int64_t n) {
  if (!m.IsConst(v)) return false;
  const Tensor& t = m.value(v).constant;
  if (!IsFloating(t.dtype()) || t.rank() < 1 || t.numel() != n || t.dim(t.rank() - 1) != n) {
    return false;
  }
  return true;
}

int AddBiasConstant(ir::Graph& g, const ir::Value& v) {
  Tensor f = v.constant.ToFloat32();
  auto r = f.Reshaped({f.numel()});
  return g.AddConstant(v.name, r.ok() ? std::move(r).value() : f);
}

// The [K,N] float32 weight for `w` read as MatMul's right operand (transposed when `trans`), or -1.
int WeightFor(Matcher& m, int w, bool trans) {
  ir::Graph& g = m.graph();
  if (!trans) {
    if (const ir::Node* t = m.Producer(w, "Transpose")) {
      std::vector<int64_t> perm = t->GetInts("perm", {1, 0});
      if (m.IsConst(t->input(0)) && m.value(t->input(0)).constant.rank() == 2 &&
          perm == std::vector<int64_t>{1, 0}) {
        w = t->input(0);
        trans = true;
      }
    }
  }
  if (!m.IsConst(w)) return -1;
  const Tensor& t = m.value(w).constant;
  if (t.rank() != 2 || !IsFloating(t.dtype())) return -1;
  if (!trans && t.dtype() == DType::kFloat32) return w;
  Tensor f = t.ToFloat32();
  return g.AddConstant(m.value(w).name + (trans ? ".T" : ""), trans ? Transpose2D(f) : f);
}

// Reshape(x[d..., K] → [prod(d), K]) → Linear → Reshape(→ [d..., N]): the 2-D GEMM that a linear
// on a 3-D input decomposes into (aten addmm). Linear takes any leading dims, so both reshapes go.
int CollapseReshapes(ir::Graph& g) {
  Matcher m(g);
  int collapsed = 0;
  const int num_nodes = static_cast<int>(g.nodes.size());
  for (int i = 0; i < num_nodes; ++i) {
    const ir::Node node = g.nodes[i];
    if (node.domain != ir::kSurgeDomain || node.op_type != "Linear" || node.input(3) >= 0) continue;
    int x2 = node.input(0), y2 = node.outputs[0];
    const ir::Node* pre = m.Producer(x2, "Reshape");
    if (!pre || m.Uses(x2) != 1 || m.Uses(y2) != 1 || m.IsGraphOutput(y2)) continue;
    int post_index = m.Consumers(y2)[0];
    const ir::Node& post = g.nodes[post_index];
    if (m.IsClaimed(post_index) || !post.domain.empty() || post.op_type != "Reshape") continue;
    int x = pre->input(0);
    const auto& sx = m.value(x).shape;
    const auto& sx2 = m.value(x2).shape;
    const auto& sy = m.value(post.outputs[0]).shape;
    const auto& sy2 = m.value(y2).shape;
    if (!sx || !sx2 || !sy || !sy2 || sx->size() < 2 || sx2->size() != 2 || sy2->size() != 2) {
      continue;
    }
    ir::Dim rows(1);
    for (size_t k = 0; k + 1 < sx->size(); ++k) rows = rows * (*sx)[k];
    if ((*sx2)[0] != rows || (*sx2)[1] != sx->back()) continue;
    ir::SymShape want(sx->begin(), sx->end() - 1);
    want.push_back((*sy2)[1]);
    if (*sy != want) continue;
    const int y = post.outputs[0];
    const int pre_index = m.ProducerIndex(x2);
    std::vector<int> inputs = node.inputs;
    inputs[0] = x;
    auto out = m.AddNode("Linear", ir::kSurgeDomain, node.name, inputs, 1, node.attrs);
    m.Replace(y, out[0]);
    m.Claim(std::vector<int>{i, pre_index, post_index});
    ++collapsed;
  }
  return collapsed;
}

}  // namespace

Result<int> FuseLinear(ir::Graph& g) {
  Matcher m(g);
  int fused = 0;
  const int num_nodes = static_cast<int>(g.nodes.size());
  for (int i = 0; i < num_nodes; ++i) {
    if (m.IsClaimed(i)) continue;
    const ir::Node node = g.nodes[i];
    if (!node.domain.empty()) continue;
    int x = -1, w = -1, bias = -1;
    std::vector<int> nodes{i};
    if (node.op_type == "MatMul") {
      x = node.input(0);
      if (m.IsConst(x)) continue;
      w = WeightFor(m, node.input(1), false);
      if (w < 0) continue;
    } else if (node.op_type == "Gemm") {
      if (node.GetInt("transA", 0) != 0 || node.GetFloat("alpha", 1.0) != 1.0) continue;
      x = node.input(0);
      if (m.IsConst(x)) continue;
      w = WeightFor(m, node.input(1), node.GetInt("transB", 0) != 0);
      if (w < 0) continue;
      int c = node.input(2);
      if (c >= 0) {
        if (node.GetFloat("beta", 1.0) != 1.0) continue;
        if (!IsBias(m, c, m.value(w).constant.dim(1))) continue;
        bias = AddBiasConstant(g, m.value(c));
      }
    } else {
      continue;
    }
    const int64_t n = m.value(w).constant.dim(1);
    int out = node.outputs[0];
    if (bias < 0 && m.Uses(out) == 1 && !m.IsGraphOutput(out)) {
      int c = m.Consumers(out)[0];
      const ir::Node& add = g.nodes[c];
      if (!m.IsClaimed(c) && add.domain.empty() && add.op_type == "Add") {
        int other = add.input(0) == out ? add.input(1) : add.input(0);
        if (other != out && IsBias(m, other, n)) {
          bias = AddBiasConstant(g, m.value(other));
          out = add.outputs[0];
          nodes.push_back(c);
        }
      }
    }
    std::vector<int> inputs{x, w};
    if (bias >= 0) inputs.push_back(bias);
    auto y = m.AddNode("Linear", ir::kSurgeDomain, node.name.empty() ? "Linear" : node.name, inputs,
                       1, {{"activation", std::string("none")}});
    m.Replace(out, y[0]);
    m.Claim(nodes);
    ++fused;
  }
  if (fused > 0) SURGE_RETURN_IF_ERROR(FinishPass(g));
  if (int c = CollapseReshapes(g); c > 0) {
    fused += c;
    SURGE_RETURN_IF_ERROR(FinishPass(g));
  }
  return fused;
}

Result<int> FuseLinearActivation(ir::Graph& g) {
  Matcher m(g);
  int fused = 0;
  const int num_nodes = static_cast<int>(g.nodes.size());
  for (int i = 0; i < num_nodes; ++i) {
    const ir::Node node = g.nodes[i];
    if (node.domain != ir::kSurgeDomain || node.op_type != "Linear") continue;
    if (node.GetString("activation", "none") != "none" || node.input(3) >= 0) continue;
    int out = node.outputs[0];
    if (m.Uses(out) != 1 || m.IsGraphOutput(out)) continue;
    int c = m.Consumers(out)[0];
    if (m.IsClaimed(c)) continue;
    const ir::Node& act = g.nodes[c];
    std::string activation;
    if (act.domain == ir::kSurgeDomain && act.op_type == "Gelu") {
      activation = act.GetString("approximate", "none") == "tanh" ? "gelu_tanh" : "gelu";
    } else if (act.domain.empty() && act.op_type == "Tanh") {
      activation = "tanh";
    } else if (act.domain.empty() && act.op_type == "Relu") {
      activation = "relu";
    } else {
      continue;
    }
    int act_out = act.outputs[0];
    auto y = m.AddNode("Linear", ir::kSurgeDomain, node.name, node.inputs, 1,
                       {{"activation", activation}});
    m.Replace(act_out, y[0]);
    m.Claim(i);
    m.Claim(c);
    ++fused;
  }
  if (fused > 0) SURGE_RETURN_IF_ERROR(FinishPass(g));
  return fused;
}

Result<int> FuseLinearResidual(ir::Graph& g) {
  Matcher m(g);
  int fused = 0;
  const int num_nodes = static_cast<int>(g.nodes.size());
  for (int i = 0; i < num_nodes; ++i) {
    const ir::Node node = g.nodes[i];
    if (node.domain != ir::kSurgeDomain || node.op_type != "Linear" || node.input(3) >= 0) continue;
    int out = node.outputs[0];
    if (m.Uses(out) != 1 || m.IsGraphOutput(out)) continue;
    int c = m.Consumers(out)[0];
    if (m.IsClaimed(c)) continue;
    const ir::Node& add = g.nodes[c];
    if (!add.domain.empty() || add.op_type != "Add") continue;
    int r = add.input(0) == out ? add.input(1) : add.input(0);
    if (r == out || m.IsConst(r)) continue;
    // Same shape on both sides: Linear's R does not broadcast.
    const auto& so = m.value(out).shape;
    const auto& sr = m.value(r).shape;
    if (!so || !sr || *so != *sr) continue;
    // A LayerNorm reading the sum belongs to SkipLayerNorm.
    bool feeds_norm = false;
    for (int k : m.Consumers(add.outputs[0])) {
      const std::string& op = g.nodes[k].op_type;
      feeds_norm |= op == "LayerNorm" || op == "SkipLayerNorm" || op == "LayerNormalization";
    }
    if (feeds_norm) continue;
    const int sum = add.outputs[0];  // `add` dangles once a node is appended
    std::vector<int> inputs = node.inputs;
    inputs.resize(3, -1);
    inputs.push_back(r);
    auto y = m.AddNode("Linear", ir::kSurgeDomain, node.name, inputs, 1,
                       {{"activation", node.GetString("activation", "none")}});
    m.Replace(sum, y[0]);
    m.Claim(i);
    m.Claim(c);
    ++fused;
  }
  if (fused > 0) SURGE_RETURN_IF_ERROR(FinishPass(g));
  return fused;
}

}  // namespace surge::engine::passes
