// Constant folding and no-op removal.
//
// A node folds when every input is a constant and ir::EvalNode supports it, when shape inference
// knows every output element statically (sym_data, e.g. Shape of a static-shape tensor), or when it
// is an ONNX Constant. Growth ops are not folded past kMaxFoldGrowthBytes unless only shape ops
// read the result, so a model does not balloon with materialised broadcasts.
#include <algorithm>
#include <vector>

#include "core/logging.h"
#include "engine/ir/eval.h"
#include "engine/passes/fusions.h"
#include "engine/passes/passes.h"
#include "engine/passes/pattern.h"

namespace surge::engine::passes {
namespace {

bool IsShapeOnlyReader(const ir::Node& n) {
  return n.domain.empty() && (n.op_type == "Shape" || n.op_type == "Size");
}

// The constant an ONNX Constant node holds, or an undefined tensor.
Tensor ConstantNodeValue(const ir::Node& n) {
  if (const Tensor* t = n.GetTensor("value")) return *t;
  if (n.HasAttr("value_float")) {
    float f = static_cast<float>(n.GetFloat("value_float", 0));
    return ConstFloat({}, std::span<const float>(&f, 1));
  }
  auto ints = [](const std::vector<int64_t>& v, Shape shape) {
    Tensor t(DType::kInt64, std::move(shape));
    std::copy(v.begin(), v.end(), t.data_as<int64_t>());
    return t;
  };
  if (n.HasAttr("value_int")) return ints({n.GetInt("value_int", 0)}, {});
  if (n.HasAttr("value_ints")) {
    auto v = n.GetInts("value_ints");
    return ints(v, {static_cast<int64_t>(v.size())});
  }
  if (n.HasAttr("value_floats")) {
    auto d = n.GetFloats("value_floats");
    std::vector<float> f(d.begin(), d.end());
    return ConstFloat({static_cast<int64_t>(f.size())}, f);
  }
  return Tensor();
}

// Statically known elements of every output, as int64 constants; empty when any is unknown.
std::vector<Tensor> StaticSymData(const ir::Graph& g, const ir::Node& n) {
  std::vector<Tensor> out;
  for (int o : n.outputs) {
    const ir::Value& v = g.values[o];
    if (!v.sym_data || v.dtype != DType::kInt64 || !v.shape) return {};
    for (const ir::Dim& d : *v.sym_data) {
      if (!d.IsStatic()) return {};
    }
    Shape shape;
    for (const ir::Dim& d : *v.shape) {
      if (!d.IsStatic()) return {};
      shape.push_back(d.StaticValue());
    }
    Tensor t(DType::kInt64, shape);
    if (t.numel() != static_cast<int64_t>(v.sym_data->size())) return {};
    for (size_t i = 0; i < v.sym_data->size(); ++i) {
      t.data_as<int64_t>()[i] = (*v.sym_data)[i].StaticValue();
    }
    out.push_back(std::move(t));
  }
  return out;
}

// Shape(x) of a fully static x, honouring start/end (opset 15).
Tensor StaticShapeOf(const ir::Graph& g, const ir::Node& n) {
  if (!n.domain.empty() || n.op_type != "Shape" || n.input(0) < 0) return Tensor();
  const auto& s = g.values[n.input(0)].shape;
  if (!s) return Tensor();
  const int64_t rank = static_cast<int64_t>(s->size());
  int64_t start = n.GetInt("start", 0), end = n.GetInt("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  Tensor t(DType::kInt64, {end - start});
  for (int64_t i = start; i < end; ++i) {
    if (!(*s)[i].IsStatic()) return Tensor();
    t.data_as<int64_t>()[i - start] = (*s)[i].StaticValue();
  }
  return t;
}

}  // namespace

Result<int> FoldConstants(ir::Graph& g) {
  auto consumers = g.Consumers();
  std::vector<bool> is_output(g.values.size(), false);
  for (int o : g.outputs) is_output[o] = true;
  std::vector<bool> folded(g.nodes.size(), false);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (n.outputs.empty()) continue;
    bool feeds_output = false;
    for (int o : n.outputs) feeds_output |= is_output[o];
    if (feeds_output) continue;
    std::vector<Tensor> results;
    if (n.domain.empty() && n.op_type == "Constant") {
      Tensor t = ConstantNodeValue(n);
      if (t.defined()) results.push_back(std::move(t));
    }
    if (results.empty()) {
      Tensor t = StaticShapeOf(g, n);
      if (t.defined()) results.push_back(std::move(t));
    }
    if (results.empty()) results = StaticSymData(g, n);
    if (results.empty()) {
      bool all_const = !n.inputs.empty();
      size_t in_bytes = 0;
      std::vector<Tensor> inputs;
      for (int in : n.inputs) {
        if (in < 0) {
          inputs.emplace_back();
          continue;
        }
        all_const &= g.values[in].is_constant();
        if (!all_const) break;
        inputs.push_back(g.values[in].constant);
        in_bytes += g.values[in].constant.nbytes();
      }
      if (!all_const || !ir::CanEval(n)) continue;
      std::vector<Tensor> outs;
      Status s = ir::EvalNode(n, inputs, &outs);
      if (!s.ok()) {
        SURGE_LOG_DEBUG("fold: '{}' ({}) not folded: {}", n.name, n.op_type, s.ToString());
        continue;
      }
      if (outs.size() != n.outputs.size()) continue;
      size_t out_bytes = 0;
      for (const Tensor& t : outs) out_bytes += t.nbytes();
      // Growth beyond a dtype widening (fp16 → fp32 weights) means a materialised broadcast.
      if (out_bytes > kMaxFoldGrowthBytes && out_bytes > 2 * in_bytes) {
        bool shape_only = true;
        for (int o : n.outputs) {
          for (int c : consumers[o]) shape_only &= IsShapeOnlyReader(g.nodes[c]);
        }
        if (!shape_only) {
          SURGE_LOG_DEBUG("fold: '{}' ({}) would make {} bytes of constant; kept", n.name,
                          n.op_type, out_bytes);
          continue;
        }
      }
      results = std::move(outs);
    }
    if (results.size() != n.outputs.size()) continue;
    for (size_t k = 0; k < results.size(); ++k) {
      ir::Value& v = g.values[n.outputs[k]];
      v.dtype = results[k].dtype();
      v.shape = ir::StaticShape(results[k].shape());
      v.constant = std::move(results[k]);
      v.producer = -1;
    }
    folded[i] = true;
    ++count;
  }
  if (count == 0) return 0;
  std::vector<ir::Node> kept;
  kept.reserve(g.nodes.size() - count);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!folded[i]) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
  for (auto& v : g.values) v.producer = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int o : g.nodes[i].outputs) g.values[o].producer = static_cast<int>(i);
  }
  SURGE_RETURN_IF_ERROR(g.TopoSort());
  g.RemoveDeadNodes();
  return count;
}

Result<int> RemoveIdentities(ir::Graph& g) {
  Matcher m(g);
  int removed = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (!n.domain.empty() || n.inputs.empty() || n.input(0) < 0) continue;
    bool identity = n.op_type == "Identity";
    if (n.op_type == "Dropout") {
      // Inference: Dropout is the identity unless training_mode is a true constant.
      auto training = m.ScalarConst(n.input(2));
      bool mask_used = n.outputs.size() > 1 && m.Uses(n.outputs[1]) > 0;
      identity = !mask_used && (n.input(2) < 0 || (training && *training == 0));
    }
    if (n.op_type == "Cast") {
      DType in = g.values[n.input(0)].dtype;
      identity = in != DType::kUndefined && static_cast<int64_t>(in) == n.GetInt("to", -1);
    }
    if (!identity) continue;
    int from = n.outputs[0], to = n.input(0);
    if (m.IsGraphOutput(from)) {
      // A model output keeps its name: the value computed before the Identity takes it, unless
      // that value is itself a graph input, a constant or another output (then the node stays).
      ir::Value& src = g.values[to];
      if (src.producer < 0 || src.is_constant() || m.IsGraphOutput(to)) continue;
      std::string name = g.values[from].name;
      g.values[from].name = g.UniqueName(name + ".identity");
      src.name = std::move(name);
    }
    g.ReplaceAllUses(from, to);
    ++removed;
  }
  if (removed > 0) SURGE_RETURN_IF_ERROR(FinishPass(g));
  return removed;
}

}  // namespace surge::engine::passes
