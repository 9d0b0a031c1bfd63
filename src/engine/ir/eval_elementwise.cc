// Reference evaluators: elementwise ONNX ops with numpy-style broadcasting.
#include <cmath>
#include <limits>
#include <type_traits>

#include "engine/ir/eval_internal.h"

namespace surge::engine::ir::eval_internal {
namespace {

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;

// Evaluates out[i] = op(a[i'], b[i'']) over the broadcast of a and b; Out is the output C++ type.
template <typename T, typename Out, typename Op>
Result<Tensor> BinaryLoop(const Node& node, const Tensor& a, const Tensor& b, DType out_dtype,
                          Op op) {
  std::array<Shape, 2> shapes{a.shape(), b.shape()};
  SURGE_ASSIGN_OR_RETURN(Shape out_shape, BroadcastShapes(node, shapes));
  Tensor out(out_dtype, out_shape);
  const T* pa = a.data_as<T>();
  const T* pb = b.data_as<T>();
  Out* po = out.data_as<Out>();
  const int64_t n = out.numel();
  if (a.shape() == out_shape && b.shape() == out_shape) {
    for (int64_t i = 0; i < n; ++i) po[i] = static_cast<Out>(op(pa[i], pb[i]));
  } else if (a.shape() == out_shape && b.numel() == 1) {
    const T s = pb[0];
    for (int64_t i = 0; i < n; ++i) po[i] = static_cast<Out>(op(pa[i], s));
  } else {
    std::array<std::vector<int64_t>, 2> strides{BroadcastStrides(a.shape(), out_shape),
                                                BroadcastStrides(b.shape(), out_shape)};
    ForEachBroadcast<2>(out_shape, strides, [&](int64_t i, const std::array<int64_t, 2>& o) {
      po[i] = static_cast<Out>(op(pa[o[0]], pb[o[1]]));
    });
  }
  return out;
}

Status SameDType(const Node& node, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    return InvalidArgumentError("{}: inputs have different dtypes ({} and {}); they must match",
                                NodeLabel(node), DTypeName(a.dtype()), DTypeName(b.dtype()));
  }
  return Status::Ok();
}

enum class Arith { kAdd, kSub, kMul, kDiv, kMin, kMax, kMod };

template <typename T>
Result<Tensor> ArithTyped(const Node& node, const Tensor& a, const Tensor& b, Arith kind) {
  switch (kind) {
    case Arith::kAdd:
      return BinaryLoop<T, T>(node, a, b, a.dtype(), [](T x, T y) { return x + y; });
    case Arith::kSub:
      return BinaryLoop<T, T>(node, a, b, a.dtype(), [](T x, T y) { return x - y; });
    case Arith::kMul:
      return BinaryLoop<T, T>(node, a, b, a.dtype(), [](T x, T y) { return x * y; });
    case Arith::kDiv:
      if constexpr (!kIsFloat<T>) {
        for (int64_t i = 0; i < b.numel(); ++i) {
          if (b.data_as<T>()[i] == T{}) {
            return InvalidArgumentError("{}: integer division by zero", NodeLabel(node));
          }
        }
      }
      return BinaryLoop<T, T>(node, a, b, a.dtype(), [](T x, T y) { return x / y; });
    case Arith::kMin:
      return BinaryLoop<T, T>(node, a, b, a.dtype(), [](T x, T y) {
        if constexpr (kIsFloat<T>) {
          if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
        }
        return y < x ? y : x;
      });
    case Arith::kMax:
      return BinaryLoop<T, T>(node, a, b, a.dtype(), [](T x, T y) {
        if constexpr (kIsFloat<T>) {
          if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
        }
        return x < y ? y : x;
      });
    case Arith::kMod: {
      const bool fmod = node.GetInt("fmod", 0) != 0;
      if constexpr (!kIsFloat<T>) {
        for (int64_t i = 0; i < b.numel(); ++i) {
          if (b.data_as<T>()[i] == T{}) {
            return InvalidArgumentError("{}: integer modulo by zero", NodeLabel(node));
          }
        }
      }
      return BinaryLoop<T, T>(node, a, b, a.dtype(), [fmod](T x, T y) -> T {
        if constexpr (kIsFloat<T>) {
          T r = std::fmod(x, y);
          if (!fmod && r != 0 && ((r < 0) != (y < 0))) r += y;
          return r;
        } else if constexpr (std::is_same_v<T, bool>) {
          return x;
        } else {
          T r = static_cast<T>(x % y);
          if (!fmod && r != 0 && ((r < 0) != (y < 0))) r = static_cast<T>(r + y);
          return r;
        }
      });
    }
  }
  return InternalError("unreachable");
}

Status ArithOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
               Arith kind) {
  if (inputs.empty()) return InvalidArgumentError("{}: needs inputs", NodeLabel(node));
  SURGE_ASSIGN_OR_RETURN(const Tensor* first, RequiredInput(node, inputs, 0));
  Tensor acc = *first;
  const bool variadic = kind == Arith::kMin || kind == Arith::kMax;
  if (!variadic && inputs.size() != 2) {
    return InvalidArgumentError("{}: expects 2 inputs, got {}", NodeLabel(node), inputs.size());
  }
  for (size_t i = 1; i < inputs.size(); ++i) {
    SURGE_ASSIGN_OR_RETURN(const Tensor* b, RequiredInput(node, inputs, i));
    SURGE_RETURN_IF_ERROR(SameDType(node, acc, *b));
    Result<Tensor> r = UnsupportedDType(node, acc.dtype());
    if (acc.dtype() == DType::kBool && kind != Arith::kMin && kind != Arith::kMax) {
      return UnsupportedDType(node, acc.dtype());
    }
    DispatchDType(acc.dtype(),
                  [&](auto tag) { r = ArithTyped<decltype(tag)>(node, acc, *b, kind); });
    if (!r.ok()) return r.status();
    acc = std::move(r).value();
  }
  outputs->push_back(acc.numel() == first->numel() && inputs.size() == 1 ? first->Clone() : acc);
  return Status::Ok();
}

// Sum / Mean: variadic addition.
Status SumOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
             bool mean) {
  std::vector<Tensor> tmp;
  SURGE_ASSIGN_OR_RETURN(const Tensor* first, RequiredInput(node, inputs, 0));
  Tensor acc = first->Clone();
  Node add = node;
  for (size_t i = 1; i < inputs.size(); ++i) {
    std::array<Tensor, 2> pair{acc, inputs[i]};
    tmp.clear();
    SURGE_RETURN_IF_ERROR(ArithOp(add, pair, &tmp, Arith::kAdd));
    acc = tmp[0];
  }
  if (mean) {
    if (!IsFloating(acc.dtype())) return UnsupportedDType(node, acc.dtype());
    SURGE_ASSIGN_OR_RETURN(Tensor f, ConvertTo(acc, DType::kFloat64));
    for (double& v : f.span<double>()) v /= static_cast<double>(inputs.size());
    SURGE_ASSIGN_OR_RETURN(acc, ConvertTo(f, acc.dtype()));
  }
  outputs->push_back(acc);
  return Status::Ok();
}

Status PowOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* a, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* b, RequiredInput(node, inputs, 1));
  SURGE_ASSIGN_OR_RETURN(Tensor a64, ConvertTo(*a, DType::kFloat64));
  SURGE_ASSIGN_OR_RETURN(Tensor b64, ConvertTo(*b, DType::kFloat64));
  SURGE_ASSIGN_OR_RETURN(Tensor r, (BinaryLoop<double, double>(node, a64, b64, DType::kFloat64,
                                                               [](double x, double y) {
                                                                 if (y == 2.0) return x * x;
                                                                 return std::pow(x, y);
                                                               })));
  SURGE_ASSIGN_OR_RETURN(Tensor out, ConvertTo(r, a->dtype()));
  outputs->push_back(std::move(out));
  return Status::Ok();
}

enum class Cmp { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual };

Status CompareOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
                 Cmp kind) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* a, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* b, RequiredInput(node, inputs, 1));
  SURGE_RETURN_IF_ERROR(SameDType(node, *a, *b));
  Result<Tensor> r = UnsupportedDType(node, a->dtype());
  DispatchDType(a->dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](auto op) { r = BinaryLoop<T, bool>(node, *a, *b, DType::kBool, op); };
    switch (kind) {
      case Cmp::kEqual:
        run([](T x, T y) { return x == y; });
        break;
      case Cmp::kLess:
        run([](T x, T y) { return x < y; });
        break;
      case Cmp::kGreater:
        run([](T x, T y) { return x > y; });
        break;
      case Cmp::kLessOrEqual:
        run([](T x, T y) { return x <= y; });
        break;
      case Cmp::kGreaterOrEqual:
        run([](T x, T y) { return x >= y; });
        break;
    }
  });
  if (!r.ok()) return r.status();
  outputs->push_back(std::move(r).value());
  return Status::Ok();
}

enum class Logic { kAnd, kOr, kXor };

Status LogicOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
               Logic kind) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* a, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* b, RequiredInput(node, inputs, 1));
  if (a->dtype() != DType::kBool || b->dtype() != DType::kBool) {
    return InvalidArgumentError("{}: inputs must be bool, got {} and {}", NodeLabel(node),
                                DTypeName(a->dtype()), DTypeName(b->dtype()));
  }
  Result<Tensor> r = InternalError("unset");
  switch (kind) {
    case Logic::kAnd:
      r = BinaryLoop<bool, bool>(node, *a, *b, DType::kBool, [](bool x, bool y) { return x && y; });
      break;
    case Logic::kOr:
      r = BinaryLoop<bool, bool>(node, *a, *b, DType::kBool, [](bool x, bool y) { return x || y; });
      break;
    case Logic::kXor:
      r = BinaryLoop<bool, bool>(node, *a, *b, DType::kBool, [](bool x, bool y) { return x != y; });
      break;
  }
  if (!r.ok()) return r.status();
  outputs->push_back(std::move(r).value());
  return Status::Ok();
}

// Unary op on floating inputs computed in double, stored in the input dtype.
template <typename Fn>
Status FloatUnary(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
                  Fn fn) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  if (x->dtype() != DType::kFloat32 && x->dtype() != DType::kFloat64) {
    return InvalidArgumentError("{}: input must be floating point, got {}", NodeLabel(node),
                                DTypeName(x->dtype()));
  }
  Tensor out(x->dtype(), x->shape());
  const int64_t n = x->numel();
  if (x->dtype() == DType::kFloat32) {
    const float* in = x->data_as<float>();
    float* o = out.data_as<float>();
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(fn(static_cast<double>(in[i])));
  } else {
    const double* in = x->data_as<double>();
    double* o = out.data_as<double>();
    for (int64_t i = 0; i < n; ++i) o[i] = fn(in[i]);
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

// Unary op valid for every numeric dtype, computed in the input's type.
template <typename Fn>
Status NumericUnary(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
                    Fn fn) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  if (x->dtype() == DType::kBool) return UnsupportedDType(node, x->dtype());
  Tensor out(x->dtype(), x->shape());
  bool ok = DispatchDType(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* in = x->data_as<T>();
      T* o = out.data_as<T>();
      for (int64_t i = 0; i < x->numel(); ++i) o[i] = fn(in[i]);
    }
  });
  if (!ok) return UnsupportedDType(node, x->dtype());
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status WhereOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* c, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 1));
  SURGE_ASSIGN_OR_RETURN(const Tensor* y, RequiredInput(node, inputs, 2));
  if (c->dtype() != DType::kBool) {
    return InvalidArgumentError("{}: condition must be bool, got {}", NodeLabel(node),
                                DTypeName(c->dtype()));
  }
  SURGE_RETURN_IF_ERROR(SameDType(node, *x, *y));
  std::array<Shape, 3> shapes{c->shape(), x->shape(), y->shape()};
  SURGE_ASSIGN_OR_RETURN(Shape out_shape, BroadcastShapes(node, shapes));
  Tensor out(x->dtype(), out_shape);
  bool ok = DispatchDType(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const bool* pc = c->data_as<bool>();
    const T* px = x->data_as<T>();
    const T* py = y->data_as<T>();
    T* po = out.data_as<T>();
    std::array<std::vector<int64_t>, 3> strides{BroadcastStrides(c->shape(), out_shape),
                                                BroadcastStrides(x->shape(), out_shape),
                                                BroadcastStrides(y->shape(), out_shape)};
    ForEachBroadcast<3>(out_shape, strides, [&](int64_t i, const std::array<int64_t, 3>& o) {
      po[i] = pc[o[0]] ? px[o[1]] : py[o[2]];
    });
  });
  if (!ok) return UnsupportedDType(node, x->dtype());
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status ClipOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  const Tensor* lo_t = OptionalInput(inputs, 1);
  const Tensor* hi_t = OptionalInput(inputs, 2);
  for (const Tensor* t : {lo_t, hi_t}) {
    if (t != nullptr && t->numel() != 1) {
      return InvalidArgumentError("{}: min/max must be scalars, got shape {}", NodeLabel(node),
                                  ShapeToString(t->shape()));
    }
  }
  const double lo = lo_t ? lo_t->GetDouble(0) : node.GetFloat("min", -INFINITY);
  const double hi = hi_t ? hi_t->GetDouble(0) : node.GetFloat("max", INFINITY);
  Tensor out(x->dtype(), x->shape());
  bool ok = DispatchDType(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* in = x->data_as<T>();
      T* o = out.data_as<T>();
      for (int64_t i = 0; i < x->numel(); ++i) {
        double v = static_cast<double>(in[i]);
        if (v < lo) v = lo;
        if (v > hi) v = hi;
        o[i] = std::isnan(static_cast<double>(in[i])) ? in[i] : static_cast<T>(v);
      }
    }
  });
  if (!ok || x->dtype() == DType::kBool) return UnsupportedDType(node, x->dtype());
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status CastOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
              bool like) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  DType to;
  if (like) {
    const Tensor* target = OptionalInput(inputs, 1);
    if (target == nullptr) {
      return InvalidArgumentError("{}: target_type input is missing", NodeLabel(node));
    }
    to = target->dtype();
  } else {
    if (!node.HasAttr("to")) {
      return InvalidArgumentError("{}: attribute 'to' is missing", NodeLabel(node));
    }
    Result<DType> d = DTypeFromOnnx(static_cast<int>(node.GetInt("to", 0)));
    if (!d.ok()) return d.status().WithContext(NodeLabel(node));
    to = *d;
  }
  Result<Tensor> r = ConvertTo(*x, to);
  if (!r.ok()) return r.status().WithContext(NodeLabel(node));
  // ConvertTo may return a view sharing the input; an output must own distinct data.
  outputs->push_back(x->dtype() == to ? x->Clone() : std::move(r).value());
  return Status::Ok();
}

Status NotOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  if (x->dtype() != DType::kBool) {
    return InvalidArgumentError("{}: input must be bool, got {}", NodeLabel(node),
                                DTypeName(x->dtype()));
  }
  Tensor out(DType::kBool, x->shape());
  for (int64_t i = 0; i < x->numel(); ++i) out.data_as<bool>()[i] = !x->data_as<bool>()[i];
  outputs->push_back(std::move(out));
  return Status::Ok();
}

template <typename Pred>
Status FloatPredicate(const Node& node, std::span<const Tensor> inputs,
                      std::vector<Tensor>* outputs, Pred pred) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  if (!IsFloating(x->dtype())) {
    return InvalidArgumentError("{}: input must be floating point, got {}", NodeLabel(node),
                                DTypeName(x->dtype()));
  }
  Tensor out(DType::kBool, x->shape());
  for (int64_t i = 0; i < x->numel(); ++i) out.data_as<bool>()[i] = pred(x->GetDouble(i));
  outputs->push_back(std::move(out));
  return Status::Ok();
}

void Reg(std::string_view op, EvalFn fn) { RegisterEvaluator("", op, std::move(fn)); }

template <typename Fn>
void RegFloat(std::string_view op, Fn fn) {
  Reg(op, [fn](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    return FloatUnary(n, in, out, fn);
  });
}

}  // namespace

void RegisterElementwiseEvaluators() {
  auto arith = [](Arith kind) {
    return [kind](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
      return ArithOp(n, in, out, kind);
    };
  };
  Reg("Add", arith(Arith::kAdd));
  Reg("Sub", arith(Arith::kSub));
  Reg("Mul", arith(Arith::kMul));
  Reg("Div", arith(Arith::kDiv));
  Reg("Min", arith(Arith::kMin));
  Reg("Max", arith(Arith::kMax));
  Reg("Mod", arith(Arith::kMod));
  Reg("Sum", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    return SumOp(n, in, out, false);
  });
  Reg("Mean", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    return SumOp(n, in, out, true);
  });
  Reg("Pow", PowOp);
  auto cmp = [](Cmp kind) {
    return [kind](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
      return CompareOp(n, in, out, kind);
    };
  };
  Reg("Equal", cmp(Cmp::kEqual));
  Reg("Less", cmp(Cmp::kLess));
  Reg("Greater", cmp(Cmp::kGreater));
  Reg("LessOrEqual", cmp(Cmp::kLessOrEqual));
  Reg("GreaterOrEqual", cmp(Cmp::kGreaterOrEqual));
  auto logic = [](Logic kind) {
    return [kind](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
      return LogicOp(n, in, out, kind);
    };
  };
  Reg("And", logic(Logic::kAnd));
  Reg("Or", logic(Logic::kOr));
  Reg("Xor", logic(Logic::kXor));
  Reg("Not", NotOp);
  Reg("Where", WhereOp);
  Reg("Clip", ClipOp);
  Reg("Cast", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    return CastOp(n, in, out, false);
  });
  Reg("CastLike", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    return CastOp(n, in, out, true);
  });

  RegFloat("Sqrt", [](double x) { return std::sqrt(x); });
  RegFloat("Erf", [](double x) { return std::erf(x); });
  RegFloat("Tanh", [](double x) { return std::tanh(x); });
  RegFloat("Exp", [](double x) { return std::exp(x); });
  RegFloat("Log", [](double x) { return std::log(x); });
  RegFloat("Sin", [](double x) { return std::sin(x); });
  RegFloat("Cos", [](double x) { return std::cos(x); });
  RegFloat("Floor", [](double x) { return std::floor(x); });
  RegFloat("Ceil", [](double x) { return std::ceil(x); });
  RegFloat("Round", [](double x) { return std::nearbyint(x); });
  RegFloat("Reciprocal", [](double x) { return 1.0 / x; });
  RegFloat("Sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
  RegFloat("Softplus", [](double x) { return x > 30 ? x : std::log1p(std::exp(x)); });
  Reg("Gelu", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    const bool tanh = n.GetString("approximate", "none") == "tanh";
    return FloatUnary(n, in, out, [tanh](double x) { return tanh ? GeluTanh(x) : GeluErf(x); });
  });
  Reg("LeakyRelu", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    const double alpha = n.GetFloat("alpha", 0.01);
    return FloatUnary(n, in, out, [alpha](double x) { return x < 0 ? alpha * x : x; });
  });
  Reg("Neg", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    return NumericUnary(n, in, out, [](auto x) { return static_cast<decltype(x)>(-x); });
  });
  Reg("Abs", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    return NumericUnary(n, in, out,
                        [](auto x) { return static_cast<decltype(x)>(x < 0 ? -x : x); });
  });
  Reg("Relu", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    return NumericUnary(n, in, out, [](auto x) { return static_cast<decltype(x)>(x > 0 ? x : 0); });
  });
  Reg("Sign", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    return NumericUnary(n, in, out,
                        [](auto x) { return static_cast<decltype(x)>((x > 0) - (x < 0)); });
  });
  Reg("IsNaN", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    return FloatPredicate(n, in, out, [](double x) { return std::isnan(x); });
  });
  Reg("IsInf", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    const bool neg = n.GetInt("detect_negative", 1) != 0;
    const bool pos = n.GetInt("detect_positive", 1) != 0;
    return FloatPredicate(n, in, out, [neg, pos](double x) {
      return std::isinf(x) && ((x > 0 && pos) || (x < 0 && neg));
    });
  });
}

}  // namespace surge::engine::ir::eval_internal
