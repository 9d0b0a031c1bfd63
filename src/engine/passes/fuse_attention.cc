// Multi-head self-attention → merged QKV Linear + surge::Attention(QKV, mask).
//
// Matched from each Softmax backwards, in the layouts both torch.onnx exporters write:
//   Qh = Transpose(Reshape(Linear_q(x), [B,S,h,d]), [0,2,1,3])     (any chain of Transposes)
//   Kt = the same for K, laid out [B,h,d,S] (one [0,2,3,1] or two Transposes)
//   scores = MatMul(Qh, Kt), scaled by scalar Mul/Div anywhere on Q, K or the scores
//            (Div by sqrt(d), Mul by 1/sqrt(d), or sqrt(1/sqrt(d)) on both Q and K)
//   masked = scores + bias(mask)  or  Where(cond(mask), very_negative, scores)
//   ctx = Reshape(Transpose(MatMul(Softmax(masked, -1), Vh), [0,2,1,3]), [B,S,H])
// The padding mask must come from one [B,S] graph input through elementwise and broadcast ops; it
// is checked by evaluating that chain on the two mask values {1, 0}: attended keys must get bias 0
// and padding keys a bias that softmax turns into an exact 0 (≤ -1e4). Otherwise the generic graph
// stays (correctness first) and the reason is logged.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

#include "core/logging.h"
#include "engine/passes/fusions.h"
#include "engine/passes/pattern.h"

namespace surge::engine::passes {
namespace {

constexpr double kMaskNegative = -1e4;

// Elements of a Reshape target: >= 0 static, -1 "infer", -2 known to exist but symbolic.
// Prefers the inferred output shape; falls back to the shape operand.
std::optional<std::vector<int64_t>> ReshapeDims(const Matcher& m, const ir::Node& r) {
  std::vector<int64_t> dims;
  if (const auto& s = m.value(r.outputs[0]).shape) {
    for (const ir::Dim& d : *s) dims.push_back(d.IsStatic() ? d.StaticValue() : -2);
    return dims;
  }
  int shape = r.input(1);
  if (auto c = m.IntsConst(shape)) return c;
  if (const auto& sd = m.value(shape).sym_data) {
    for (const ir::Dim& d : *sd) dims.push_back(d.IsStatic() ? d.StaticValue() : -2);
    return dims;
  }
  if (const ir::Node* cat = m.Producer(shape, "Concat")) {
    for (int in : cat->inputs) {
      if (auto c = m.IntsConst(in)) {
        dims.insert(dims.end(), c->begin(), c->end());
      } else if (const auto& sd = m.value(in).sym_data) {
        for (const ir::Dim& d : *sd) dims.push_back(d.IsStatic() ? d.StaticValue() : -2);
      } else if (const auto& s = m.value(in).shape; s && s->size() == 1 && (*s)[0].IsStatic()) {
        dims.insert(dims.end(), static_cast<size_t>((*s)[0].StaticValue()), -2);
      } else if (m.Producer(in, "Unsqueeze")) {
        dims.push_back(-2);  // a scalar made 1-D: one element
      } else {
        return std::nullopt;
      }
    }
    return dims;
  }
  return std::nullopt;
}

// A Q/K/V projection seen through its head split.
struct HeadPath {
  int linear = -1;          // node index of the surge::Linear
  std::vector<int> layout;  // logical axes (0=b, 1=s, 2=head, 3=d) of the traced value
  double scale = 1.0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  std::vector<int> nodes;
};

// The scalar factor a Mul/Div node applies to `v` (its non-constant operand), or nullopt.
std::optional<double> ScalarFactor(const Matcher& m, const ir::Node& n, int* operand) {
  if (n.op_type == "Mul") {
    for (int k = 0; k < 2; ++k) {
      if (auto c = m.ScalarConst(n.input(k)); c && !m.IsConst(n.input(1 - k))) {
        *operand = n.input(1 - k);
        return *c;
      }
    }
  } else if (n.op_type == "Div") {
    if (auto c = m.ScalarConst(n.input(1)); c && *c != 0 && !m.IsConst(n.input(0))) {
      *operand = n.input(0);
      return 1.0 / *c;
    }
  }
  return std::nullopt;
}

// Reshape([a*b, c, d]) → Transpose([0,2,1]) → Reshape([a,b,d,c]) of t[a,b,c,d]: the last-two-axes
// swap of ONNX's SDPA function for a 4-D key. Sets *t and appends the two inner nodes.
bool SwapsLastTwo(const Matcher& m, const ir::Node& outer, int* t, std::vector<int>* nodes) {
  int tv = outer.input(0);
  const ir::Node* tr = m.Producer(tv, "Transpose");
  if (!tr || m.Uses(tv) != 1 || tr->GetInts("perm") != std::vector<int64_t>{0, 2, 1}) return false;
  int rv = tr->input(0);
  const ir::Node* r3 = m.Producer(rv, "Reshape");
  if (!r3 || m.Uses(rv) != 1) return false;
  const auto& st = m.value(r3->input(0)).shape;
  const auto& s3 = m.value(rv).shape;
  const auto& so = m.value(outer.outputs[0]).shape;
  if (!st || !s3 || !so || st->size() != 4 || s3->size() != 3 || so->size() != 4) return false;
  const ir::SymShape& a = *st;
  if ((*s3)[0] != a[0] * a[1] || (*s3)[1] != a[2] || (*s3)[2] != a[3]) return false;
  if ((*so)[0] != a[0] || (*so)[1] != a[1] || (*so)[2] != a[3] || (*so)[3] != a[2]) return false;
  *t = r3->input(0);
  nodes->push_back(m.ProducerIndex(tv));
  nodes->push_back(m.ProducerIndex(rv));
  return true;
}

bool TraceHead(const Matcher& m, int v, HeadPath* p) {
  std::vector<std::vector<int64_t>> perms;  // in backward order
  while (true) {
    if (m.Uses(v) != 1 || m.IsGraphOutput(v)) return false;
    int pi = m.ProducerIndex(v);
    if (pi < 0 || m.IsClaimed(pi)) return false;
    const ir::Node& n = m.graph().nodes[pi];
    if (!n.domain.empty()) return false;
    p->nodes.push_back(pi);
    int operand = -1;
    if (n.op_type == "Transpose") {
      perms.push_back(n.GetInts("perm"));
      v = n.input(0);
    } else if (auto f = ScalarFactor(m, n, &operand)) {
      p->scale *= *f;
      v = operand;
    } else if (int t = -1; n.op_type == "Reshape" && SwapsLastTwo(m, n, &t, &p->nodes)) {
      perms.push_back({0, 1, 3, 2});
      v = t;
    } else if (n.op_type == "Reshape") {
      auto dims = ReshapeDims(m, n);
      if (!dims || dims->size() != 4) return false;
      int src = n.input(0);
      if (m.Uses(src) != 1 || m.IsGraphOutput(src)) return false;
      int li = m.ProducerIndex(src);
      if (li < 0 || m.IsClaimed(li)) return false;
      const ir::Node& lin = m.graph().nodes[li];
      if (lin.domain != ir::kSurgeDomain || lin.op_type != "Linear" || lin.input(3) >= 0 ||
          lin.GetString("activation", "none") != "none" || !m.IsConst(lin.input(1))) {
        return false;
      }
      const int64_t hidden = m.value(lin.input(1)).constant.dim(1);
      int64_t h = (*dims)[2], d = (*dims)[3];
      if (h <= 0) return false;
      if (d == -1 && hidden % h == 0) d = hidden / h;
      if (d <= 0 || h * d != hidden) return false;
      p->linear = li;
      p->heads = h;
      p->head_dim = d;
      p->layout = {0, 1, 2, 3};
      for (auto it = perms.rbegin(); it != perms.rend(); ++it) {
        if (it->size() != 4) return false;
        std::vector<int> next(4);
        for (int i = 0; i < 4; ++i) {
          if ((*it)[i] < 0 || (*it)[i] > 3) return false;
          next[i] = p->layout[(*it)[i]];
        }
        p->layout = next;
      }
      return true;
    } else {
      return false;
    }
  }
}

// Two-point evaluation of the mask chain: each value is (its value where mask = 1, where mask = 0).
struct MaskEval {
  const Matcher& m;
  int input = -1;  // the [B,S] graph input reached
  std::vector<int> graph_inputs;
  int depth = 0;

  std::optional<std::pair<double, double>> Eval(int v) {
    if (++depth > 64) return std::nullopt;
    if (auto c = m.ScalarConst(v)) return std::make_pair(*c, *c);
    if (m.IsConst(v)) return std::nullopt;
    if (std::find(graph_inputs.begin(), graph_inputs.end(), v) != graph_inputs.end()) {
      const auto& s = m.value(v).shape;
      if (s && s->size() != 2) return std::nullopt;
      if (input >= 0 && input != v) return std::nullopt;
      input = v;
      return std::make_pair(1.0, 0.0);
    }
    int pi = m.ProducerIndex(v);
    if (pi < 0) return std::nullopt;
    const ir::Node& n = m.graph().nodes[pi];
    if (!n.domain.empty()) return std::nullopt;
    const std::string& op = n.op_type;
    if (op == "Unsqueeze" || op == "Expand" || op == "Identity") return Eval(n.input(0));
    if (op == "Reshape" || op == "Squeeze") {
      // Only reshapes that add or drop unit dims (an Unsqueeze in disguise) keep the key axis.
      const auto& si = m.value(n.input(0)).shape;
      const auto& so = m.value(n.outputs[0]).shape;
      if (!si || !so) return std::nullopt;
      auto squeeze = [](const ir::SymShape& s) {
        ir::SymShape r;
        for (const ir::Dim& d : s) {
          if (d != ir::Dim(1)) r.push_back(d);
        }
        return r;
      };
      if (squeeze(*si) != squeeze(*so)) return std::nullopt;
      return Eval(n.input(0));
    }
    if (op == "Slice") {
      // Only slices that keep every element from the start ([:, None, None, :] in dynamo graphs).
      auto starts = m.IntsConst(n.input(1));
      auto steps = n.input(4) >= 0 ? m.IntsConst(n.input(4)) : std::vector<int64_t>{};
      if (!starts || !steps) return std::nullopt;
      for (int64_t s : *starts) {
        if (s != 0) return std::nullopt;
      }
      for (int64_t s : *steps) {
        if (s != 1) return std::nullopt;
      }
      auto ends = m.IntsConst(n.input(2));
      if (ends) {
        for (int64_t e : *ends) {
          if (e < (int64_t{1} << 30)) return std::nullopt;
        }
      }
      return Eval(n.input(0));
    }
    if (op == "Cast") {
      auto a = Eval(n.input(0));
      if (!a) return std::nullopt;
      auto to = static_cast<DType>(n.GetInt("to", 0));
      auto conv = [&](double x) {
        if (to == DType::kBool) return x != 0 ? 1.0 : 0.0;
        if (IsFloating(to)) return x;
        return std::trunc(x);
      };
      return std::make_pair(conv(a->first), conv(a->second));
    }
    if (op == "Not") {
      auto a = Eval(n.input(0));
      if (!a) return std::nullopt;
      return std::make_pair(a->first == 0 ? 1.0 : 0.0, a->second == 0 ? 1.0 : 0.0);
    }
    if (op == "Neg") {
      auto a = Eval(n.input(0));
      if (!a) return std::nullopt;
      return std::make_pair(-a->first, -a->second);
    }
    if (op == "Where") {
      auto c = Eval(n.input(0));
      if (!c) return std::nullopt;
      auto a = Eval(n.input(1));
      auto b = Eval(n.input(2));
      if (!a || !b) return std::nullopt;
      return std::make_pair(c->first != 0 ? a->first : b->first,
                            c->second != 0 ? a->second : b->second);
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal") {
      auto a = Eval(n.input(0));
      if (!a) return std::nullopt;
      auto b = Eval(n.input(1));
      if (!b) return std::nullopt;
      auto f = [&](double x, double y) {
        if (op == "Add") return x + y;
        if (op == "Sub") return x - y;
        if (op == "Mul") return x * y;
        if (op == "Equal") return x == y ? 1.0 : 0.0;
        return x / y;
      };
      return std::make_pair(f(a->first, b->first), f(a->second, b->second));
    }
    return std::nullopt;
  }
};

bool VeryNegative(double x) { return x <= kMaskNegative; }

struct Match {
  HeadPath q, k, v;
  double scale = 1.0;
  int mask = -1;  // graph input, or -1 when unmasked
  int out = -1;
  std::vector<int> nodes;
};

// From the softmax input back to MatMul(Qh, Kt): scalar scales and one mask.
bool TraceScores(const Matcher& m, int v, Match* mt, std::string* why) {
  bool masked = false;
  while (true) {
    if (m.Uses(v) != 1 || m.IsGraphOutput(v)) {
      *why = "scores are read elsewhere";
      return false;
    }
    int pi = m.ProducerIndex(v);
    if (pi < 0 || m.IsClaimed(pi)) return false;
    const ir::Node& n = m.graph().nodes[pi];
    if (!n.domain.empty()) return false;
    mt->nodes.push_back(pi);
    int operand = -1;
    if (n.op_type == "MatMul") {
      if (!TraceHead(m, n.input(0), &mt->q) || !TraceHead(m, n.input(1), &mt->k)) {
        *why = "Q/K are not head-split projections";
        return false;
      }
      return true;
    }
    if (auto f = ScalarFactor(m, n, &operand)) {
      mt->scale *= *f;
      v = operand;
      continue;
    }
    if (masked) return false;
    if (n.op_type == "Add") {
      std::string last_why;
      for (int k = 0; k < 2; ++k) {
        MaskEval me{m, -1, m.graph().inputs};
        auto bias = me.Eval(n.input(1 - k));
        if (!bias || me.input < 0) {
          // Not a simple elementwise chain: check the subgraph by evaluating it.
          std::string probe_why;
          auto in = ProbeMask(m.graph(), n.input(1 - k), MaskRole::kAdditiveBias, &probe_why);
          if (!in) {
            if (k == 0 || last_why.empty()) last_why = "mask bias: " + probe_why;
            continue;
          }
          mt->mask = *in;
          v = n.input(k);
          masked = true;
          break;
        }
        if (bias->first != 0 || !VeryNegative(bias->second)) {
          last_why = fmt::format("mask bias is {} for attended and {} for padded keys", bias->first,
                                 bias->second);
          continue;
        }
        mt->mask = me.input;
        v = n.input(k);
        masked = true;
        break;
      }
      if (!masked) {
        *why = last_why;
        return false;
      }
      continue;
    }
    if (n.op_type == "Where") {
      // Where(padding, very_negative, scores) or Where(attend, scores, very_negative).
      auto c1 = m.ScalarConst(n.input(1)), c2 = m.ScalarConst(n.input(2));
      int scores = -1;
      MaskRole role = MaskRole::kTrueAtPadding;
      if (c1 && VeryNegative(*c1)) {
        scores = n.input(2);
      } else if (c2 && VeryNegative(*c2)) {
        scores = n.input(1);
        role = MaskRole::kTrueAtAttended;
      }
      if (scores < 0 || m.IsConst(scores)) {
        *why = "Where does not mask keys with a very negative score";
        return false;
      }
      MaskEval me{m, -1, m.graph().inputs};
      auto cond = me.Eval(n.input(0));
      int mask = -1;
      if (cond && me.input >= 0) {
        bool at_padding = cond->first == 0 && cond->second != 0;
        bool at_attended = cond->first != 0 && cond->second == 0;
        if ((role == MaskRole::kTrueAtPadding && at_padding) ||
            (role == MaskRole::kTrueAtAttended && at_attended)) {
          mask = me.input;
        }
      } else {
        std::string probe_why;
        auto in = ProbeMask(m.graph(), n.input(0), role, &probe_why);
        if (in) mask = *in;
        if (!in) *why = "mask condition: " + probe_why;
      }
      if (mask < 0) {
        if (why->empty()) *why = "Where condition is not the padding mask";
        return false;
      }
      mt->mask = mask;
      v = scores;
      masked = true;
      continue;
    }
    *why = fmt::format("unexpected {} between the scores MatMul and Softmax", n.op_type);
    return false;
  }
}

bool MatchAttention(const Matcher& m, int softmax_node, Match* mt, std::string* why) {
  const ir::Graph& g = m.graph();
  const ir::Node& sm = g.nodes[softmax_node];
  int64_t axis = sm.GetInt("axis", -1);
  const auto& in_shape = m.value(sm.input(0)).shape;
  if (!(axis == -1 || (axis == 3 && (!in_shape || in_shape->size() == 4)))) return false;
  mt->nodes.push_back(softmax_node);
  if (!TraceScores(m, sm.input(0), mt, why)) return false;
  // Softmax [→ Where(IsNaN(P), 0, P)] → MatMul(P, Vh) → Transpose(s) → Reshape [B,S,H].
  int p = sm.outputs[0];
  if (m.Uses(p) == 2 && !m.IsGraphOutput(p)) {
    // The NaN guard the exporters add for fully masked rows: a no-op for a finite mask bias.
    const auto& cs = m.Consumers(p);
    int isnan = -1, where = -1;
    for (int c : cs) {
      const ir::Node& n = g.nodes[c];
      if (m.IsClaimed(c) || !n.domain.empty()) continue;
      if (n.op_type == "IsNaN") isnan = c;
      if (n.op_type == "Where") where = c;
    }
    if (isnan < 0 || where < 0) return false;
    const ir::Node& w = g.nodes[where];
    auto zero = m.ScalarConst(w.input(1));
    int flag = g.nodes[isnan].outputs[0];
    if (w.input(0) != flag || w.input(2) != p || !zero || *zero != 0 || m.Uses(flag) != 1) {
      return false;
    }
    mt->nodes.push_back(isnan);
    mt->nodes.push_back(where);
    p = w.outputs[0];
  }
  if (m.Uses(p) != 1 || m.IsGraphOutput(p)) return false;
  int ci = m.Consumers(p)[0];
  const ir::Node& ctx = g.nodes[ci];
  if (m.IsClaimed(ci) || !ctx.domain.empty() || ctx.op_type != "MatMul" || ctx.input(0) != p) {
    *why = "softmax output does not feed MatMul(P, V)";
    return false;
  }
  mt->nodes.push_back(ci);
  if (!TraceHead(m, ctx.input(1), &mt->v)) {
    *why = "V is not a head-split projection";
    return false;
  }
  const std::vector<int> kBHSD{0, 2, 1, 3}, kBHDS{0, 2, 3, 1};
  if (mt->q.layout != kBHSD || mt->k.layout != kBHDS || mt->v.layout != kBHSD) {
    *why = "Q/K/V head layouts are not [B,h,S,d]/[B,h,d,S]/[B,h,S,d]";
    return false;
  }
  if (mt->v.scale != 1.0) {
    *why = "V is scaled";
    return false;
  }
  if (mt->q.heads != mt->k.heads || mt->q.heads != mt->v.heads ||
      mt->q.head_dim != mt->k.head_dim || mt->q.head_dim != mt->v.head_dim) {
    *why = "Q/K/V head splits differ";
    return false;
  }
  std::vector<int> layout = kBHSD;
  int v = ctx.outputs[0];
  while (true) {
    if (m.Uses(v) != 1 || m.IsGraphOutput(v)) return false;
    int ni = m.Consumers(v)[0];
    const ir::Node& n = g.nodes[ni];
    if (m.IsClaimed(ni) || !n.domain.empty()) return false;
    mt->nodes.push_back(ni);
    if (n.op_type == "Transpose") {
      auto perm = n.GetInts("perm");
      if (perm.size() != 4) return false;
      std::vector<int> next(4);
      for (int i = 0; i < 4; ++i) {
        if (perm[i] < 0 || perm[i] > 3) return false;
        next[i] = layout[perm[i]];
      }
      layout = next;
      v = n.outputs[0];
      continue;
    }
    if (n.op_type != "Reshape" || n.input(0) != v) return false;
    auto dims = ReshapeDims(m, n);
    const int64_t hidden = mt->q.heads * mt->q.head_dim;
    if (layout != std::vector<int>{0, 1, 2, 3} || !dims || dims->size() != 3 ||
        !((*dims)[2] == hidden || (*dims)[2] == -1)) {
      *why = "context is not merged back to [B,S,H]";
      return false;
    }
    mt->out = n.outputs[0];
    break;
  }
  // Q, K and V project the same input.
  const ir::Node& lq = g.nodes[mt->q.linear];
  const ir::Node& lk = g.nodes[mt->k.linear];
  const ir::Node& lv = g.nodes[mt->v.linear];
  if (lq.input(0) != lk.input(0) || lq.input(0) != lv.input(0)) {
    *why = "Q, K and V read different inputs (not self-attention)";
    return false;
  }
  if (mt->q.linear == mt->k.linear || mt->q.linear == mt->v.linear ||
      mt->k.linear == mt->v.linear) {
    return false;
  }
  for (const HeadPath* hp : {&mt->q, &mt->k, &mt->v}) {
    mt->nodes.insert(mt->nodes.end(), hp->nodes.begin(), hp->nodes.end());
    mt->nodes.push_back(hp->linear);
  }
  return true;
}

// Concatenates the columns of three [K,N] weights (and their [N] biases).
void MergeQkv(Matcher& m, const Match& mt, int* w_out, int* b_out) {
  ir::Graph& g = m.graph();
  const ir::Node* lins[3] = {&g.nodes[mt.q.linear], &g.nodes[mt.k.linear], &g.nodes[mt.v.linear]};
  std::vector<Tensor> ws, bs;
  for (const ir::Node* l : lins) {
    ws.push_back(g.values[l->input(1)].constant.ToFloat32());
    bs.push_back(l->input(2) >= 0 ? g.values[l->input(2)].constant.ToFloat32() : Tensor());
  }
  const int64_t k = ws[0].dim(0), n = ws[0].dim(1);
  Tensor w(DType::kFloat32, {k, 3 * n});
  Tensor b(DType::kFloat32, {3 * n});
  for (int p = 0; p < 3; ++p) {
    const float* src = ws[p].data_as<float>();
    for (int64_t r = 0; r < k; ++r) {
      std::copy(src + r * n, src + (r + 1) * n, w.data_as<float>() + r * 3 * n + p * n);
    }
    if (bs[p].defined()) {
      std::copy(bs[p].data_as<float>(), bs[p].data_as<float>() + n, b.data_as<float>() + p * n);
    }
  }
  std::string base = lins[0]->name.empty() ? "qkv" : lins[0]->name + ".qkv";
  *w_out = g.AddConstant(base + ".weight", std::move(w));
  *b_out = g.AddConstant(base + ".bias", std::move(b));
}

}  // namespace

Result<int> FuseAttention(ir::Graph& g) {
  Matcher m(g);
  int fused = 0;
  const int num_nodes = static_cast<int>(g.nodes.size());
  for (int i = 0; i < num_nodes; ++i) {
    if (m.IsClaimed(i)) continue;
    if (!g.nodes[i].domain.empty() || g.nodes[i].op_type != "Softmax") continue;
    Match mt;
    std::string why;
    if (!MatchAttention(m, i, &mt, &why)) {
      SURGE_LOG_INFO("attention fusion: softmax '{}' kept unfused: {}", g.nodes[i].name,
                     why.empty() ? "pattern does not match" : why);
      continue;
    }
    std::set<int> unique(mt.nodes.begin(), mt.nodes.end());
    if (unique.size() != mt.nodes.size()) continue;
    const double scale = mt.scale * mt.q.scale * mt.k.scale;
    int w = -1, b = -1;
    MergeQkv(m, mt, &w, &b);
    const ir::Node& lq = g.nodes[mt.q.linear];
    int x = lq.input(0);
    std::string name = lq.name.empty() ? "attention" : lq.name;
    auto qkv = m.AddNode("Linear", ir::kSurgeDomain, name + ".qkv", {x, w, b}, 1,
                         {{"activation", std::string("none")}});
    if (const auto& xs = g.values[x].shape; xs && !xs->empty()) {
      ir::SymShape qs = *xs;
      qs.back() = ir::Dim(3 * mt.q.heads * mt.q.head_dim);
      g.values[qkv[0]].shape = qs;
      g.values[qkv[0]].dtype = DType::kFloat32;
    }
    std::vector<int> att_inputs{qkv[0]};
    if (mt.mask >= 0) att_inputs.push_back(mt.mask);
    auto y = m.AddNode("Attention", ir::kSurgeDomain,
                       g.nodes[i].name.empty() ? "Attention" : g.nodes[i].name, att_inputs, 1,
                       {{"num_heads", mt.q.heads}, {"scale", scale}});
    m.Replace(mt.out, y[0]);
    m.Claim(mt.nodes);
    ++fused;
  }
  if (fused > 0) SURGE_RETURN_IF_ERROR(FinishPass(g));
  return fused;
}

}  // namespace surge::engine::passes
