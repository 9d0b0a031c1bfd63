// L2 normalisation over the last axis, in the forms exporters write it:
//   x / Sqrt(ReduceSum(x * x, [-1]) [+ eps])                     eps_mode "add" (eps 0 if absent)
//   x / [Expand](Clip|Max(ReduceL2(x, [-1]) | Sqrt(sum), eps))   eps_mode "max" (F.normalize)
// where the sum of squares is ReduceSum(Mul(x, x) | Pow(x, 2)) or ReduceSumSquare(x), all with
// keepdims = 1. → surge::L2Normalize{epsilon, eps_mode}.
#include <algorithm>
#include <optional>
#include <vector>

#include "engine/passes/fusions.h"
#include "engine/passes/pattern.h"

namespace surge::engine::passes {
namespace {

struct Match {
  int x = -1;
  double eps = 0;
  bool max_mode = false;
  std::vector<int> nodes;
};

// Appends the producer of `v` to `nodes` and returns it when it is an `op` node.
const ir::Node* Take(const Matcher& m, int v, std::string_view op, std::vector<int>* nodes) {
  const ir::Node* n = m.Producer(v, op);
  if (n) nodes->push_back(m.ProducerIndex(v));
  return n;
}

// Sum of squares of x over its last axis (keepdims): ReduceSum(x*x | x^2) or ReduceSumSquare(x).
// Sets *x when it is still unknown, else requires the same x.
bool MatchSumSquares(const Matcher& m, int v, int* x, std::vector<int>* nodes) {
  int sq_of = -1;
  const ir::Node* r = Take(m, v, "ReduceSumSquare", nodes);
  if (r) {
    sq_of = r->input(0);
  } else if ((r = Take(m, v, "ReduceSum", nodes))) {
    const int sq = r->input(0);
    if (const ir::Node* mul = Take(m, sq, "Mul", nodes)) {
      if (mul->input(0) != mul->input(1)) return false;
      sq_of = mul->input(0);
    } else if (const ir::Node* pow = Take(m, sq, "Pow", nodes)) {
      auto e = m.ScalarConst(pow->input(1));
      if (!e || *e != 2.0) return false;
      sq_of = pow->input(0);
    } else {
      return false;
    }
  } else {
    return false;
  }
  if (*x >= 0 && *x != sq_of) return false;
  *x = sq_of;
  return ReducesLastAxis(m, *r, sq_of);
}

// The norm: Sqrt(sum [+ eps]) (add mode), or Clip/Max(ReduceL2(x) | Sqrt(sum), eps) (max mode).
bool MatchNorm(const Matcher& m, int v, Match* out) {
  if (const ir::Node* sqrt = Take(m, v, "Sqrt", &out->nodes)) {
    const int s = sqrt->input(0);
    if (const ir::Node* add = Take(m, s, "Add", &out->nodes)) {
      for (int k = 0; k < 2; ++k) {
        auto eps = m.ScalarConst(add->input(k));
        if (eps && *eps >= 0 && MatchSumSquares(m, add->input(1 - k), &out->x, &out->nodes)) {
          out->eps = *eps;
          return true;
        }
      }
      return false;
    }
    return MatchSumSquares(m, s, &out->x, &out->nodes);  // no epsilon
  }
  int norm = -1;
  std::optional<double> eps;
  if (const ir::Node* clip = Take(m, v, "Clip", &out->nodes)) {
    // Clip(norm, min = eps): opset 11+ passes min as input 1 (max absent), older as attribute.
    if (clip->inputs.size() > 2 && clip->input(2) >= 0) return false;
    if (clip->HasAttr("max")) return false;
    eps = clip->input(1) >= 0
              ? m.ScalarConst(clip->input(1))
              : (clip->HasAttr("min") ? std::optional<double>(clip->GetFloat("min", 0.0))
                                      : std::nullopt);
    norm = clip->input(0);
  } else if (const ir::Node* mx = Take(m, v, "Max", &out->nodes)) {
    if (mx->inputs.size() != 2) return false;
    for (int k = 0; k < 2 && !eps; ++k) {
      if ((eps = m.ScalarConst(mx->input(k)))) norm = mx->input(1 - k);
    }
  }
  if (!eps || *eps < 0 || norm < 0) return false;
  out->eps = *eps;
  out->max_mode = true;
  if (const ir::Node* l2 = Take(m, norm, "ReduceL2", &out->nodes)) {
    if (out->x >= 0 && out->x != l2->input(0)) return false;
    out->x = l2->input(0);
    return ReducesLastAxis(m, *l2, out->x);
  }
  const ir::Node* sqrt = Take(m, norm, "Sqrt", &out->nodes);
  return sqrt && MatchSumSquares(m, sqrt->input(0), &out->x, &out->nodes);
}

bool SameShape(const Matcher& m, int a, int b) {
  const auto& sa = m.value(a).shape;
  const auto& sb = m.value(b).shape;
  return sa && sb && *sa == *sb;
}

}  // namespace

Result<int> FuseL2Normalize(ir::Graph& g) {
  Matcher m(g);
  int fused = 0;
  const int num_nodes = static_cast<int>(g.nodes.size());
  for (int i = 0; i < num_nodes; ++i) {
    if (m.IsClaimed(i)) continue;
    const ir::Node node = g.nodes[i];  // copy: AddNode may grow the node vector
    if (!node.domain.empty() || node.op_type != "Div") continue;
    Match match;
    match.nodes.push_back(i);
    int norm = node.input(1);
    if (const ir::Node* expand = m.Producer(norm, "Expand")) {
      // The norm broadcast to x's shape explicitly (as torch exports F.normalize).
      if (!SameShape(m, expand->outputs[0], node.input(0))) continue;
      match.nodes.push_back(m.ProducerIndex(norm));
      norm = expand->input(0);
    }
    match.x = node.input(0);
    if (!MatchNorm(m, norm, &match) || match.x != node.input(0)) continue;
    // The result must have x's shape (no broadcasting beyond the kept axis).
    if (!SameShape(m, node.outputs[0], match.x)) continue;
    std::sort(match.nodes.begin(), match.nodes.end());
    match.nodes.erase(std::unique(match.nodes.begin(), match.nodes.end()), match.nodes.end());
    if (std::any_of(match.nodes.begin(), match.nodes.end(),
                    [&](int n) { return m.IsClaimed(n); })) {
      continue;
    }
    // Every intermediate stays inside the pattern.
    bool escapes = false;
    for (int n : match.nodes) {
      if (n == i) continue;
      for (int o : g.nodes[n].outputs) escapes |= !UsesWithin(m, o, match.nodes);
    }
    if (escapes) continue;
    auto out = m.AddNode(
        "L2Normalize", ir::kSurgeDomain, node.name.empty() ? "L2Normalize" : node.name, {match.x},
        1, {{"epsilon", match.eps}, {"eps_mode", std::string(match.max_mode ? "max" : "add")}});
    m.Replace(node.outputs[0], out[0]);
    m.Claim(match.nodes);
    ++fused;
  }
  if (fused > 0) SURGE_RETURN_IF_ERROR(FinishPass(g));
  return fused;
}

}  // namespace surge::engine::passes
