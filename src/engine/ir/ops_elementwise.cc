// Elementwise ONNX ops: unary math, broadcasting binary/variadic arithmetic, comparisons, logic,
// Where, Cast/CastLike, Clip. Arithmetic on symbolic data (shape computations) is propagated.
#include <functional>
#include <optional>

#include "engine/ir/ops_common.h"

namespace surge::engine::ir::ops {
namespace {

// Applies `f` elementwise to two sym_data vectors with rank-0/1 broadcasting; nullopt when `f`
// cannot express a result or sizes disagree.
using DimBinary = std::function<std::optional<Dim>(const Dim&, const Dim&)>;

std::optional<std::vector<Dim>> ZipData(const std::vector<Dim>& a, const std::vector<Dim>& b,
                                        const DimBinary& f) {
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1) return std::nullopt;
  size_t n = std::max(a.size(), b.size());
  std::vector<Dim> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    auto r = f(a[a.size() == 1 ? 0 : i], b[b.size() == 1 ? 0 : i]);
    if (!r) return std::nullopt;
    out.push_back(*r);
  }
  return out;
}

// Rank of a shape with at most one dimension, or -1.
bool IsSmallRank(const std::optional<SymShape>& s) { return s && s->size() <= 1; }

Status InferUnary(Graph& g, Node& n, DType dtype_override = DType::kUndefined) {
  const Value* x = Input(g, n, 0);
  SetOutput(g, n, 0, dtype_override == DType::kUndefined ? x->dtype : dtype_override, x->shape);
  return Status::Ok();
}

// Broadcast shape of every present input (unknown when any is unknown).
Result<std::optional<SymShape>> BroadcastInputs(Graph& g, Node& n, size_t first = 0) {
  std::optional<SymShape> shape;
  for (size_t i = first; i < n.inputs.size(); ++i) {
    const Value* v = Input(g, n, i);
    if (v == nullptr) continue;
    if (!v->shape) return std::optional<SymShape>();
    if (!shape) {
      shape = v->shape;
    } else {
      SURGE_ASSIGN_OR_RETURN(SymShape s, BroadcastShapes(n, *shape, *v->shape));
      shape = std::move(s);
    }
  }
  return shape;
}

InferFn Binary(DimBinary data_fn, bool bool_out) {
  return [data_fn, bool_out](Graph& g, Node& n) -> Status {
    const Value* a = Input(g, n, 0);
    const Value* b = Input(g, n, 1);
    if (!bool_out && a->dtype != DType::kUndefined && b->dtype != DType::kUndefined &&
        a->dtype != b->dtype && n.op_type != "Pow") {
      return NodeError(n, "input dtypes differ: {} and {}", DTypeName(a->dtype),
                       DTypeName(b->dtype));
    }
    SURGE_ASSIGN_OR_RETURN(std::optional<SymShape> shape, BroadcastInputs(g, n));
    SetOutput(g, n, 0, bool_out ? DType::kBool : a->dtype, shape);
    if (data_fn && IsSmallRank(shape)) {
      auto da = InputSymData(g, n, 0);
      auto db = InputSymData(g, n, 1);
      if (da && db) {
        if (auto r = ZipData(*da, *db, data_fn)) SetSymData(g, n, 0, std::move(*r));
      }
    }
    return Status::Ok();
  };
}

std::optional<Dim> StaticOnly(const Dim& a, const Dim& b,
                              const std::function<int64_t(int64_t, int64_t)>& f) {
  if (!a.IsStatic() || !b.IsStatic()) return std::nullopt;
  return Dim(f(a.StaticValue(), b.StaticValue()));
}

// True when every coefficient of `d` is non-negative (ToString() writes '-' for negative ones).
bool IsNonNegative(const Dim& d) { return d.ToString().find('-') == std::string::npos; }

std::optional<Dim> DivDims(const Dim& a, const Dim& b) {
  if (a.IsStatic() && b.IsStatic()) {
    if (b.StaticValue() == 0) return std::nullopt;
    return Dim(a.StaticValue() / b.StaticValue());
  }
  return a.DivExact(b);
}

Status InferVariadic(Graph& g, Node& n, bool minmax_data, bool is_max) {
  SURGE_ASSIGN_OR_RETURN(std::optional<SymShape> shape, BroadcastInputs(g, n));
  SetOutput(g, n, 0, Input(g, n, 0)->dtype, shape);
  if (minmax_data && IsSmallRank(shape)) {
    std::optional<std::vector<Dim>> acc;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      auto d = InputSymData(g, n, i);
      if (!d) return Status::Ok();
      if (!acc) {
        acc = d;
        continue;
      }
      acc = ZipData(*acc, *d, [is_max](const Dim& x, const Dim& y) -> std::optional<Dim> {
        if (x == y) return x;
        return StaticOnly(x, y, [is_max](int64_t p, int64_t q) {
          return is_max ? std::max(p, q) : std::min(p, q);
        });
      });
      if (!acc) return Status::Ok();
    }
    if (acc) SetSymData(g, n, 0, std::move(*acc));
  }
  return Status::Ok();
}

Status InferWhere(Graph& g, Node& n) {
  const Value* x = Input(g, n, 1);
  const Value* y = Input(g, n, 2);
  if (x->dtype != DType::kUndefined && y->dtype != DType::kUndefined && x->dtype != y->dtype) {
    return NodeError(n, "X and Y dtypes differ: {} and {}", DTypeName(x->dtype),
                     DTypeName(y->dtype));
  }
  SURGE_ASSIGN_OR_RETURN(std::optional<SymShape> shape, BroadcastInputs(g, n));
  SetOutput(g, n, 0, x->dtype != DType::kUndefined ? x->dtype : y->dtype, shape);
  if (!IsSmallRank(shape)) return Status::Ok();
  auto c = InputSymData(g, n, 0);
  auto dx = InputSymData(g, n, 1);
  auto dy = InputSymData(g, n, 2);
  if (!c || !dx || !dy) return Status::Ok();
  size_t len = std::max({c->size(), dx->size(), dy->size()});
  std::vector<Dim> out;
  for (size_t i = 0; i < len; ++i) {
    auto at = [&](const std::vector<Dim>& v) -> const Dim* {
      if (v.size() == 1) return &v[0];
      return i < v.size() ? &v[i] : nullptr;
    };
    const Dim* ci = at(*c);
    const Dim* xi = at(*dx);
    const Dim* yi = at(*dy);
    if (!ci || !xi || !yi || !ci->IsStatic()) return Status::Ok();
    out.push_back(ci->StaticValue() != 0 ? *xi : *yi);
  }
  SetSymData(g, n, 0, std::move(out));
  return Status::Ok();
}

Status InferCast(Graph& g, Node& n, DType to) {
  const Value* x = Input(g, n, 0);
  SetOutput(g, n, 0, to, x->shape);
  if (auto d = InputSymData(g, n, 0)) {
    if (to == DType::kBool) {
      for (Dim& v : *d) {
        if (!v.IsStatic()) return Status::Ok();
        v = Dim(v.StaticValue() != 0 ? 1 : 0);
      }
    }
    SetSymData(g, n, 0, std::move(*d));
  }
  return Status::Ok();
}

void DefineUnary(std::string_view op) {
  Define("", op, 1, 1, 1, 1, [](Graph& g, Node& n) { return InferUnary(g, n); });
}

}  // namespace

void RegisterElementwiseOps() {
  for (std::string_view op :
       {"Sqrt", "Erf",      "Tanh",  "Relu", "Reciprocal", "Exp",         "Log",
        "Abs",  "Sigmoid",  "Floor", "Ceil", "Round",      "Sign",        "Sin",
        "Cos",  "Softplus", "Gelu",  "Elu",  "LeakyRelu",  "HardSigmoid", "Selu"}) {
    DefineUnary(op);
  }
  Define("", "Neg", 1, 1, 1, 1, [](Graph& g, Node& n) -> Status {
    SURGE_RETURN_IF_ERROR(InferUnary(g, n));
    if (auto d = InputSymData(g, n, 0)) {
      for (Dim& v : *d) v = Dim(0) - v;
      SetSymData(g, n, 0, std::move(*d));
    }
    return Status::Ok();
  });
  Define("", "Not", 1, 1, 1, 1, [](Graph& g, Node& n) -> Status {
    SURGE_RETURN_IF_ERROR(InferUnary(g, n, DType::kBool));
    if (auto d = InputStaticData(g, n, 0)) {
      std::vector<Dim> out;
      for (int64_t v : *d) out.emplace_back(v == 0 ? 1 : 0);
      SetSymData(g, n, 0, std::move(out));
    }
    return Status::Ok();
  });
  for (std::string_view op : {"IsNaN", "IsInf"}) {
    Define("", op, 1, 1, 1, 1, [](Graph& g, Node& n) { return InferUnary(g, n, DType::kBool); });
  }

  Define("", "Add", 2, 2, 1, 1,
         Binary([](const Dim& a, const Dim& b) -> std::optional<Dim> { return a + b; }, false));
  Define("", "Sub", 2, 2, 1, 1,
         Binary([](const Dim& a, const Dim& b) -> std::optional<Dim> { return a - b; }, false));
  Define("", "Mul", 2, 2, 1, 1,
         Binary([](const Dim& a, const Dim& b) -> std::optional<Dim> { return a * b; }, false));
  Define("", "Div", 2, 2, 1, 1, Binary(DivDims, false));
  Define("", "Mod", 2, 2, 1, 1, Binary(nullptr, false));
  Define("", "Pow", 2, 2, 1, 1, Binary(nullptr, false));

  Define("", "Equal", 2, 2, 1, 1,
         Binary(
             [](const Dim& a, const Dim& b) -> std::optional<Dim> {
               if (a == b) return Dim(1);
               if (a.IsStatic() && b.IsStatic()) return Dim(0);
               // Symbols are sizes (>= 0), so a polynomial with no negative coefficient never
               // equals a negative constant (how exporters test shapes against -1).
               auto differ = [](const Dim& sym, const Dim& c) {
                 return c.IsStatic() && c.StaticValue() < 0 && IsNonNegative(sym);
               };
               if (differ(a, b) || differ(b, a)) return Dim(0);
               return std::nullopt;
             },
             true));
  Define("", "Less", 2, 2, 1, 1,
         Binary(
             [](const Dim& a, const Dim& b) {
               return StaticOnly(a, b, [](int64_t x, int64_t y) { return int64_t{x < y}; });
             },
             true));
  Define("", "LessOrEqual", 2, 2, 1, 1,
         Binary(
             [](const Dim& a, const Dim& b) {
               return StaticOnly(a, b, [](int64_t x, int64_t y) { return int64_t{x <= y}; });
             },
             true));
  Define("", "Greater", 2, 2, 1, 1,
         Binary(
             [](const Dim& a, const Dim& b) {
               return StaticOnly(a, b, [](int64_t x, int64_t y) { return int64_t{x > y}; });
             },
             true));
  Define("", "GreaterOrEqual", 2, 2, 1, 1,
         Binary(
             [](const Dim& a, const Dim& b) {
               return StaticOnly(a, b, [](int64_t x, int64_t y) { return int64_t{x >= y}; });
             },
             true));
  Define("", "And", 2, 2, 1, 1,
         Binary(
             [](const Dim& a, const Dim& b) {
               return StaticOnly(a, b, [](int64_t x, int64_t y) { return int64_t{x && y}; });
             },
             true));
  Define("", "Or", 2, 2, 1, 1,
         Binary(
             [](const Dim& a, const Dim& b) {
               return StaticOnly(a, b, [](int64_t x, int64_t y) { return int64_t{x || y}; });
             },
             true));
  Define("", "Xor", 2, 2, 1, 1, Binary(nullptr, true));

  Define("", "Max", 1, -1, 1, 1, [](Graph& g, Node& n) { return InferVariadic(g, n, true, true); });
  Define("", "Min", 1, -1, 1, 1,
         [](Graph& g, Node& n) { return InferVariadic(g, n, true, false); });
  Define("", "Sum", 1, -1, 1, 1,
         [](Graph& g, Node& n) { return InferVariadic(g, n, false, false); });
  Define("", "Mean", 1, -1, 1, 1,
         [](Graph& g, Node& n) { return InferVariadic(g, n, false, false); });

  Define("", "Where", 3, 3, 1, 1, InferWhere);
  Define("", "Cast", 1, 1, 1, 1, [](Graph& g, Node& n) -> Status {
    if (!n.HasAttr("to")) return NodeError(n, "missing attribute 'to'");
    auto to = DTypeFromOnnx(static_cast<int>(n.GetInt("to", 0)));
    if (!to.ok()) return NodeError(n, "{}", to.status().message());
    return InferCast(g, n, *to);
  });
  Define("", "CastLike", 2, 2, 1, 1,
         [](Graph& g, Node& n) { return InferCast(g, n, Input(g, n, 1)->dtype); });
  Define("", "Clip", 1, 3, 1, 1, [](Graph& g, Node& n) { return InferUnary(g, n); });
}

}  // namespace surge::engine::ir::ops
