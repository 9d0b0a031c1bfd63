// Padding-mask recognition by evaluation: the subgraph that turns a [B,S] attention_mask into an
// additive bias or a Where condition varies by exporter and library version (Unsqueeze/Cast/Sub/Mul
// chains, finfo.min Where forms, index-arithmetic gathers from a flattened mask), so instead of
// matching its layout the pass runs it with ir::EvalNode on several concrete masks and sizes and
// checks the result against the definition of a key-padding mask.
#include <algorithm>
#include <vector>

#include "core/logging.h"
#include "engine/ir/eval.h"
#include "engine/passes/pattern.h"

namespace surge::engine::passes {
namespace {

constexpr size_t kMaxConeNodes = 400;

bool IsShapeNode(const ir::Node& n) { return n.domain.empty() && n.op_type == "Shape"; }

// Shape(x) from x's symbolic shape (or computed tensor) under `bindings`.
Result<Tensor> EvalShapeNode(const ir::Graph& g, const ir::Node& n, const Tensor* computed,
                             const ir::SymbolBindings& bindings) {
  Shape full;
  if (computed && computed->defined()) {
    full = computed->shape();
  } else {
    const auto& s = g.values[n.input(0)].shape;
    if (!s) return InvalidArgumentError("shape of '{}' unknown", g.values[n.input(0)].name);
    SURGE_ASSIGN_OR_RETURN(full, ir::EvalShape(*s, bindings));
  }
  const int64_t rank = static_cast<int64_t>(full.size());
  int64_t start = n.GetInt("start", 0), end = n.GetInt("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  Tensor t(DType::kInt64, {end - start});
  for (int64_t i = start; i < end; ++i) t.data_as<int64_t>()[i - start] = full[i];
  return t;
}

}  // namespace

std::optional<int> ProbeMask(const ir::Graph& g, int v, MaskRole role, std::string* why) {
  // 1. The cone of `v`: nodes it depends on through data (Shape nodes are leaves).
  std::vector<bool> in_cone(g.nodes.size(), false);
  std::vector<int> stack{v};
  std::vector<bool> seen(g.values.size(), false);
  int mask_input = -1;
  size_t cone_nodes = 0;
  while (!stack.empty()) {
    int x = stack.back();
    stack.pop_back();
    if (x < 0 || seen[x]) continue;
    seen[x] = true;
    const ir::Value& val = g.values[x];
    if (val.is_constant()) continue;
    if (std::find(g.inputs.begin(), g.inputs.end(), x) != g.inputs.end()) {
      if (mask_input >= 0 && mask_input != x) {
        *why = "mask depends on more than one graph input";
        return std::nullopt;
      }
      mask_input = x;
      continue;
    }
    int p = val.producer;
    if (p < 0) {
      *why = fmt::format("'{}' has no producer", val.name);
      return std::nullopt;
    }
    if (in_cone[p]) continue;
    in_cone[p] = true;
    if (++cone_nodes > kMaxConeNodes) {
      *why = "mask subgraph too large";
      return std::nullopt;
    }
    const ir::Node& n = g.nodes[p];
    if (IsShapeNode(n)) continue;
    if (!ir::CanEval(n)) {
      *why = fmt::format("mask subgraph has {} which cannot be evaluated", n.op_type);
      return std::nullopt;
    }
    for (int in : n.inputs) stack.push_back(in);
  }
  if (mask_input < 0) {
    *why = "no graph input reaches the mask";
    return std::nullopt;
  }
  const ir::Value& mv = g.values[mask_input];
  if (!mv.shape || mv.shape->size() != 2 || !(*mv.shape)[0].IsSymbol() ||
      !(*mv.shape)[1].IsSymbol() || (*mv.shape)[0] == (*mv.shape)[1]) {
    *why = fmt::format("'{}' is not a [batch, seq] input with symbolic dims", mv.name);
    return std::nullopt;
  }
  const std::string batch_sym = (*mv.shape)[0].Symbols()[0];
  const std::string seq_sym = (*mv.shape)[1].Symbols()[0];
  // 2. Probes: sizes and masks with per-row differences and holes, not only prefixes.
  struct Probe {
    int64_t b, s;
  };
  for (Probe pr : {Probe{2, 3}, Probe{3, 5}, Probe{1, 4}}) {
    ir::SymbolBindings bindings{{batch_sym, pr.b}, {seq_sym, pr.s}};
    std::vector<int> bits(static_cast<size_t>(pr.b * pr.s));
    for (int64_t b = 0; b < pr.b; ++b) {
      for (int64_t k = 0; k < pr.s; ++k) {
        bits[b * pr.s + k] = k == 0 || (b * 7 + k * 3 + pr.s) % 4 != 0;
      }
    }
    Tensor mask(mv.dtype, {pr.b, pr.s});
    {
      Tensor f(DType::kFloat32, {pr.b, pr.s});
      for (size_t i = 0; i < bits.size(); ++i) f.data_as<float>()[i] = static_cast<float>(bits[i]);
      if (mv.dtype == DType::kFloat32) {
        mask = f;
      } else if (mv.dtype == DType::kInt64 || mv.dtype == DType::kInt32 ||
                 mv.dtype == DType::kBool) {
        for (size_t i = 0; i < bits.size(); ++i) {
          if (mv.dtype == DType::kInt64) mask.data_as<int64_t>()[i] = bits[i];
          if (mv.dtype == DType::kInt32) mask.data_as<int32_t>()[i] = bits[i];
          if (mv.dtype == DType::kBool) mask.data_as<uint8_t>()[i] = static_cast<uint8_t>(bits[i]);
        }
      } else {
        *why = fmt::format("mask dtype {} not probed", DTypeName(mv.dtype));
        return std::nullopt;
      }
    }
    std::vector<Tensor> vals(g.values.size());
    vals[mask_input] = mask;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (!in_cone[i]) continue;
      const ir::Node& n = g.nodes[i];
      std::vector<Tensor> outs;
      if (IsShapeNode(n)) {
        auto t =
            EvalShapeNode(g, n, vals[n.input(0)].defined() ? &vals[n.input(0)] : nullptr, bindings);
        if (!t.ok()) {
          *why = t.status().message();
          return std::nullopt;
        }
        outs.push_back(std::move(t).value());
      } else {
        std::vector<Tensor> ins;
        for (int in : n.inputs) {
          if (in < 0) {
            ins.emplace_back();
          } else {
            ins.push_back(g.values[in].is_constant() ? g.values[in].constant : vals[in]);
          }
        }
        Status s = ir::EvalNode(n, ins, &outs);
        if (!s.ok()) {
          *why = "evaluating the mask failed: " + s.message();
          return std::nullopt;
        }
      }
      for (size_t k = 0; k < n.outputs.size() && k < outs.size(); ++k) vals[n.outputs[k]] = outs[k];
    }
    const Tensor& r = g.values[v].is_constant() ? g.values[v].constant : vals[v];
    if (!r.defined() || r.rank() > 4) {
      *why = "mask result missing or of rank > 4";
      return std::nullopt;
    }
    Shape rs(4 - r.rank(), 1);
    rs.insert(rs.end(), r.shape().begin(), r.shape().end());
    // [B or 1, 1, S or 1, S]: one bias per key, shared by heads (and queries).
    if (!(rs[0] == pr.b || rs[0] == 1) || rs[1] != 1 || !(rs[2] == pr.s || rs[2] == 1) ||
        rs[3] != pr.s) {
      *why = fmt::format("mask result has shape {}", ShapeToString(r.shape()));
      return std::nullopt;
    }
    for (int64_t b = 0; b < pr.b; ++b) {
      for (int64_t q = 0; q < pr.s; ++q) {
        for (int64_t k = 0; k < pr.s; ++k) {
          int64_t idx = ((rs[0] == 1 ? 0 : b) * rs[2] + (rs[2] == 1 ? 0 : q)) * rs[3] + k;
          double x = r.GetDouble(idx);
          bool attend = bits[b * pr.s + k] != 0;
          bool ok = false;
          switch (role) {
            case MaskRole::kAdditiveBias:
              ok = attend ? x == 0.0 : x <= -1e4;
              break;
            case MaskRole::kTrueAtPadding:
              ok = attend ? x == 0.0 : x != 0.0;
              break;
            case MaskRole::kTrueAtAttended:
              ok = attend ? x != 0.0 : x == 0.0;
              break;
          }
          if (!ok) {
            *why = fmt::format("mask value {} at batch {} key {} does not mark {} key", x, b, k,
                               attend ? "an attended" : "a padded");
            return std::nullopt;
          }
        }
      }
    }
  }
  return mask_input;
}

}  // namespace surge::engine::passes
