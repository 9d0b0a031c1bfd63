// GELU in the forms exporters write it, as products in any order and grouping:
//   erf:  x * 0.5 * (1 + erf(x / sqrt2))        (x / sqrt2 also as x * (1/sqrt2))
//   tanh: x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))   (x^3 as Pow or products)
// and the ONNX Gelu op (opset 20) → surge::Gelu{approximate}.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "core/logging.h"
#include "engine/passes/fusions.h"
#include "engine/passes/pattern.h"

namespace surge::engine::passes {
namespace {

struct Factors {
  double constant = 1.0;
  std::vector<int> leaves;  // non-constant factors
  std::vector<int> nodes;   // Mul (and Pow) nodes walked
};

// Flattens a product tree rooted at `v`: inner Mul nodes must have one use. Pow(x, 3) expands to
// three factors when `expand_cube`.
void Flatten(const Matcher& m, int v, bool root, bool expand_cube, Factors* f) {
  if (auto c = m.ScalarConst(v)) {
    f->constant *= *c;
    return;
  }
  if (root || (m.Uses(v) == 1 && !m.IsGraphOutput(v))) {
    if (const ir::Node* mul = m.Producer(v, "Mul")) {
      f->nodes.push_back(m.ProducerIndex(v));
      Flatten(m, mul->input(0), false, expand_cube, f);
      Flatten(m, mul->input(1), false, expand_cube, f);
      return;
    }
    if (const ir::Node* pow = m.Producer(v, "Pow"); pow && expand_cube) {
      auto e = m.ScalarConst(pow->input(1));
      if (e && *e == 3.0) {
        f->nodes.push_back(m.ProducerIndex(v));
        for (int i = 0; i < 3; ++i) f->leaves.push_back(pow->input(0));
        return;
      }
    }
  }
  f->leaves.push_back(v);
}

// `v` = Add(a, 1) with a single use; returns a.
int MatchOnePlus(const Matcher& m, int v, std::vector<int>* nodes) {
  if (m.Uses(v) != 1 || m.IsGraphOutput(v)) return -1;
  const ir::Node* add = m.Producer(v, "Add");
  if (!add) return -1;
  for (int k = 0; k < 2; ++k) {
    auto one = m.ScalarConst(add->input(k));
    if (one && *one == 1.0 && !m.IsConst(add->input(1 - k))) {
      nodes->push_back(m.ProducerIndex(v));
      return add->input(1 - k);
    }
  }
  return -1;
}

// erf(x / sqrt2) → true for `x`.
bool MatchErfArg(const Matcher& m, int v, int x, std::vector<int>* nodes) {
  if (m.Uses(v) != 1) return false;
  if (const ir::Node* div = m.Producer(v, "Div")) {
    auto c = m.ScalarConst(div->input(1));
    if (div->input(0) == x && c && Near(*c, std::numbers::sqrt2, 1e-6)) {
      nodes->push_back(m.ProducerIndex(v));
      return true;
    }
    return false;
  }
  Factors f;
  Flatten(m, v, true, false, &f);
  if (f.leaves.size() != 1 || f.leaves[0] != x || f.nodes.empty()) return false;
  if (!Near(f.constant, 1.0 / std::numbers::sqrt2, 1e-6)) return false;
  nodes->insert(nodes->end(), f.nodes.begin(), f.nodes.end());
  return true;
}

// sqrt(2/pi) * (x + 0.044715 * x^3) → true for `x`.
bool MatchTanhArg(const Matcher& m, int v, int x, std::vector<int>* nodes) {
  if (m.Uses(v) != 1) return false;
  Factors outer;
  Flatten(m, v, true, false, &outer);
  if (outer.leaves.size() != 1 || !Near(outer.constant, std::sqrt(2.0 / std::numbers::pi), 1e-6)) {
    return false;
  }
  int u = outer.leaves[0];
  if (m.Uses(u) != 1) return false;
  const ir::Node* add = m.Producer(u, "Add");
  if (!add) return false;
  int cube = add->input(0) == x ? add->input(1) : add->input(1) == x ? add->input(0) : -1;
  if (cube < 0 || m.Uses(cube) != 1) return false;
  Factors inner;
  Flatten(m, cube, true, true, &inner);
  if (inner.leaves.size() != 3 || !Near(inner.constant, 0.044715, 1e-5)) return false;
  for (int l : inner.leaves) {
    if (l != x) return false;
  }
  nodes->insert(nodes->end(), outer.nodes.begin(), outer.nodes.end());
  nodes->push_back(m.ProducerIndex(u));
  nodes->insert(nodes->end(), inner.nodes.begin(), inner.nodes.end());
  return true;
}

}  // namespace

Result<int> FuseGelu(ir::Graph& g) {
  Matcher m(g);
  int fused = 0;
  const int num_nodes = static_cast<int>(g.nodes.size());
  for (int i = 0; i < num_nodes; ++i) {
    if (m.IsClaimed(i)) continue;
    const ir::Node node = g.nodes[i];
    if (!node.domain.empty()) continue;
    if (node.op_type == "Gelu") {
      std::string approx = node.GetString("approximate", "none");
      auto out = m.AddNode("Gelu", ir::kSurgeDomain, node.name, {node.input(0)}, 1,
                           {{"approximate", approx}});
      m.Replace(node.outputs[0], out[0]);
      m.Claim(i);
      ++fused;
      continue;
    }
    if (node.op_type != "Mul") continue;
    Factors f;
    Flatten(m, node.outputs[0], true, false, &f);
    if (f.leaves.size() != 2 || !Near(f.constant, 0.5, 1e-7)) continue;
    for (int k = 0; k < 2; ++k) {
      int x = f.leaves[k];
      std::vector<int> nodes = f.nodes;
      int inner = MatchOnePlus(m, f.leaves[1 - k], &nodes);
      if (inner < 0 || m.Uses(inner) != 1) continue;
      std::string approx;
      if (const ir::Node* erf = m.Producer(inner, "Erf")) {
        if (!MatchErfArg(m, erf->input(0), x, &nodes)) continue;
        approx = "none";
      } else if (const ir::Node* tanh = m.Producer(inner, "Tanh")) {
        if (!MatchTanhArg(m, tanh->input(0), x, &nodes)) continue;
        approx = "tanh";
      } else {
        continue;
      }
      nodes.push_back(m.ProducerIndex(inner));
      if (std::any_of(nodes.begin(), nodes.end(), [&](int n) { return m.IsClaimed(n); })) continue;
      // Intermediates: only the root may be used outside the pattern.
      bool escapes = false;
      for (int n : nodes) {
        int o = g.nodes[n].outputs[0];
        if (o == node.outputs[0]) continue;
        for (int c : m.Consumers(o)) {
          escapes |= std::find(nodes.begin(), nodes.end(), c) == nodes.end();
        }
        escapes |= m.IsGraphOutput(o);
      }
      if (escapes) continue;
      auto out = m.AddNode("Gelu", ir::kSurgeDomain, node.name.empty() ? "Gelu" : node.name, {x}, 1,
                           {{"approximate", approx}});
      m.Replace(node.outputs[0], out[0]);
      m.Claim(nodes);
      ++fused;
      break;
    }
  }
  if (fused > 0) SURGE_RETURN_IF_ERROR(FinishPass(g));
  return fused;
}

}  // namespace surge::engine::passes
