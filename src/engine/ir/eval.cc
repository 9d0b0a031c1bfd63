#include "engine/ir/eval.h"

#include <cmath>
#include <map>
#include <mutex>
#include <utility>

#include "engine/ir/eval_internal.h"

namespace surge::engine::ir {

namespace eval_internal {
namespace {

using Key = std::pair<std::string, std::string>;

std::map<Key, EvalFn>& Registry() {
  static std::map<Key, EvalFn> registry;
  return registry;
}

const std::map<Key, EvalFn>& FilledRegistry() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterElementwiseEvaluators();
    RegisterShapeEvaluators();
    RegisterReduceEvaluators();
    RegisterMatMulEvaluators();
    RegisterFusedEvaluators();
  });
  return Registry();
}

template <typename To, typename From>
void ConvertLoop(const From* in, To* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<To, bool>) {
      out[i] = in[i] != From{};
    } else {
      out[i] = static_cast<To>(in[i]);
    }
  }
}

// Ops whose inputs must not be widened from half types (they look at dtypes themselves).
bool KeepsHalfInputs(const Node& node) {
  if (!node.domain.empty()) return false;
  return node.op_type == "Cast" || node.op_type == "CastLike" || node.op_type == "Shape" ||
         node.op_type == "Size" || node.op_type == "Constant" || node.op_type == "ConstantOfShape";
}

bool IsHalf(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

}  // namespace

void RegisterEvaluator(std::string_view domain, std::string_view op_type, EvalFn fn) {
  Registry()[{std::string(domain), std::string(op_type)}] = std::move(fn);
}

std::string NodeLabel(const Node& node) {
  std::string op = node.domain.empty() ? node.op_type : node.domain + "::" + node.op_type;
  return fmt::format("{} '{}'", op, node.name);
}

const Tensor* OptionalInput(std::span<const Tensor> inputs, size_t i) {
  if (i >= inputs.size() || !inputs[i].defined()) return nullptr;
  return &inputs[i];
}

Result<const Tensor*> RequiredInput(const Node& node, std::span<const Tensor> inputs, size_t i) {
  const Tensor* t = OptionalInput(inputs, i);
  if (t == nullptr) {
    return InvalidArgumentError("{}: required input {} is missing ({} inputs given)",
                                NodeLabel(node), i, inputs.size());
  }
  if (t->empty()) {
    return InvalidArgumentError("{}: input {} has no data", NodeLabel(node), i);
  }
  return t;
}

std::vector<int64_t> ToInt64Vector(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.GetInt(i);
  return v;
}

Result<int64_t> NormalizeAxis(const Node& node, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank || (rank == 0 && axis != 0 && axis != -1)) {
    return InvalidArgumentError("{}: axis {} is out of range for rank {} (valid: [{}, {}])",
                                NodeLabel(node), axis, rank, -rank, rank - 1);
  }
  return axis < 0 ? axis + rank : axis;
}

Result<Shape> BroadcastShapes(const Node& node, std::span<const Shape> shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (size_t ax = 0; ax < rank; ++ax) {
    for (const Shape& s : shapes) {
      int64_t off = static_cast<int64_t>(ax) - static_cast<int64_t>(rank - s.size());
      if (off < 0) continue;
      int64_t d = s[off];
      if (d == out[ax] || d == 1) continue;
      if (out[ax] == 1) {
        out[ax] = d;
        continue;
      }
      std::string list;
      for (const Shape& t : shapes) list += (list.empty() ? "" : " and ") + ShapeToString(t);
      return InvalidArgumentError("{}: shapes {} cannot be broadcast (axis {}: {} vs {})",
                                  NodeLabel(node), list, ax, out[ax], d);
    }
  }
  return out;
}

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) {
    s[i] = s[i + 1] * shape[i + 1];
  }
  return s;
}

std::vector<int64_t> BroadcastStrides(const Shape& in_shape, const Shape& out_shape) {
  std::vector<int64_t> in_strides = Strides(in_shape);
  std::vector<int64_t> s(out_shape.size(), 0);
  size_t lead = out_shape.size() - in_shape.size();
  for (size_t i = 0; i < in_shape.size(); ++i) {
    s[lead + i] = in_shape[i] == 1 ? 0 : in_strides[i];
  }
  return s;
}

Result<Tensor> ConvertTo(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  if (IsHalf(t.dtype())) {
    Tensor f = t.ToFloat32();
    return ConvertTo(f, dtype);
  }
  if (IsHalf(dtype)) {
    SURGE_ASSIGN_OR_RETURN(Tensor f, ConvertTo(t, DType::kFloat32));
    return f.CastFromFloat32(dtype);
  }
  Tensor out(dtype, t.shape());
  bool ok = false;
  DispatchDType(t.dtype(), [&](auto from) {
    using From = decltype(from);
    ok = DispatchDType(dtype, [&](auto to) {
      using To = decltype(to);
      ConvertLoop<To, From>(t.data_as<From>(), out.data_as<To>(), t.numel());
    });
  });
  if (!ok) {
    return InvalidArgumentError("cannot convert {} to {}", DTypeName(t.dtype()), DTypeName(dtype));
  }
  return out;
}

Status UnsupportedDType(const Node& node, DType dtype, std::string_view what) {
  return InvalidArgumentError("{}: {} dtype {} is not supported", NodeLabel(node), what,
                              DTypeName(dtype));
}

double GeluErf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

double GeluTanh(double x) {
  constexpr double kC = 0.7978845608028654;  // sqrt(2/pi)
  return 0.5 * x * (1.0 + std::tanh(kC * (x + 0.044715 * x * x * x)));
}

}  // namespace eval_internal

bool CanEval(const Node& node) {
  const auto& registry = eval_internal::FilledRegistry();
  return registry.count({node.domain, node.op_type}) > 0;
}

Status EvalNode(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  using namespace eval_internal;
  const auto& registry = FilledRegistry();
  auto it = registry.find({node.domain, node.op_type});
  if (it == registry.end()) {
    return UnimplementedError("{}: no reference evaluator for this op", NodeLabel(node));
  }
  outputs->clear();
  // float16/bfloat16 are computed in float32 and converted back.
  DType half = DType::kUndefined;
  if (!KeepsHalfInputs(node)) {
    for (const Tensor& t : inputs) {
      if (t.defined() && IsHalf(t.dtype())) half = t.dtype();
    }
  }
  Status status;
  if (half == DType::kUndefined) {
    status = it->second(node, inputs, outputs);
  } else {
    std::vector<Tensor> widened(inputs.begin(), inputs.end());
    for (Tensor& t : widened) {
      if (t.defined() && IsHalf(t.dtype())) t = t.ToFloat32();
    }
    status = it->second(node, widened, outputs);
    if (status.ok()) {
      for (Tensor& t : *outputs) {
        if (t.defined() && t.dtype() == DType::kFloat32) t = t.CastFromFloat32(half);
      }
    }
  }
  // Exactly one tensor per node output: optional outputs the node does not name are dropped,
  // and ones an evaluator does not compute stay undefined.
  if (status.ok() && !node.outputs.empty()) outputs->resize(node.outputs.size());
  return status;
}

}  // namespace surge::engine::ir
