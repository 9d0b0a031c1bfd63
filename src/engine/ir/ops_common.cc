#include "engine/ir/ops_common.h"

#include <cmath>

namespace surge::engine::ir::ops {

const Value* Input(const Graph& g, const Node& n, size_t i) {
  int id = n.input(i);
  return id >= 0 ? &g.values[id] : nullptr;
}

Value& Output(Graph& g, const Node& n, size_t i) { return g.values[n.outputs[i]]; }

std::optional<std::vector<Dim>> SymData(const Graph& g, int value_id) {
  if (value_id < 0) return std::nullopt;
  const Value& v = g.values[value_id];
  if (v.sym_data) return v.sym_data;
  if (!v.is_constant()) return std::nullopt;
  const Tensor& t = v.constant;
  if (t.rank() > 1 || t.numel() > kMaxSymDataElements) return std::nullopt;
  std::vector<Dim> out;
  out.reserve(t.numel());
  switch (t.dtype()) {
    case DType::kInt64:
    case DType::kInt32:
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      for (int64_t i = 0; i < t.numel(); ++i) out.emplace_back(t.GetInt(i));
      return out;
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat16:
    case DType::kBFloat16:
      // Integer-valued floats (shape arithmetic done in float) are still exact.
      for (int64_t i = 0; i < t.numel(); ++i) {
        double d = t.GetDouble(i);
        if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) return std::nullopt;
        out.emplace_back(static_cast<int64_t>(d));
      }
      return out;
    default:
      return std::nullopt;
  }
}

std::optional<std::vector<int64_t>> StaticData(const Graph& g, int value_id) {
  auto d = SymData(g, value_id);
  if (!d) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(d->size());
  for (const Dim& x : *d) {
    if (!x.IsStatic()) return std::nullopt;
    out.push_back(x.StaticValue());
  }
  return out;
}

std::optional<std::vector<Dim>> InputSymData(const Graph& g, const Node& n, size_t i) {
  return SymData(g, n.input(i));
}

std::optional<std::vector<int64_t>> InputStaticData(const Graph& g, const Node& n, size_t i) {
  return StaticData(g, n.input(i));
}

Result<Dim> BroadcastDim(const Node& n, const Dim& a, const Dim& b) {
  if (a == b) return a;
  if (a == Dim(1)) return b;
  if (b == Dim(1)) return a;
  if (a.IsStatic() && b.IsStatic()) {
    return NodeError(n, "cannot broadcast dimension {} with {}", a.ToString(), b.ToString());
  }
  if (a.IsStatic()) return a;
  return b.IsStatic() ? b : a;
}

Result<SymShape> BroadcastShapes(const Node& n, const SymShape& a, const SymShape& b) {
  size_t rank = std::max(a.size(), b.size());
  SymShape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    Dim da = i < rank - a.size() ? Dim(1) : a[i - (rank - a.size())];
    Dim db = i < rank - b.size() ? Dim(1) : b[i - (rank - b.size())];
    auto d = BroadcastDim(n, da, db);
    if (!d.ok()) {
      return NodeError(n, "cannot broadcast shapes {} and {}", SymShapeToString(a),
                       SymShapeToString(b));
    }
    out[i] = *d;
  }
  return out;
}

Result<int64_t> NormalizeAxis(const Node& n, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    return NodeError(n, "axis {} is out of range for rank {}", axis, rank);
  }
  return a;
}

void SetOutput(Graph& g, const Node& n, size_t i, DType dtype, std::optional<SymShape> shape) {
  if (i >= n.outputs.size() || n.outputs[i] < 0) return;
  Value& v = g.values[n.outputs[i]];
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.sym_data.reset();
}

void SetSymData(Graph& g, const Node& n, size_t i, std::vector<Dim> data) {
  if (i >= n.outputs.size() || n.outputs[i] < 0) return;
  g.values[n.outputs[i]].sym_data = std::move(data);
}

void Define(std::string_view domain, std::string_view op, int min_in, int max_in, int min_out,
            int max_out, InferFn infer) {
  OpSchema s;
  s.domain = std::string(domain);
  s.op_type = std::string(op);
  s.min_inputs = min_in;
  s.max_inputs = max_in;
  s.min_outputs = min_out;
  s.max_outputs = max_out;
  s.infer = std::move(infer);
  RegisterOpSchema(std::move(s));
}

}  // namespace surge::engine::ir::ops

namespace surge::engine::ir {

std::optional<std::vector<int64_t>> AxesOf(const Graph& g, const Node& n, size_t input) {
  if (n.input(input) >= 0) return ops::InputStaticData(g, n, input);
  if (n.HasAttr("axes")) return n.GetInts("axes");
  return std::vector<int64_t>{};
}

}  // namespace surge::engine::ir
