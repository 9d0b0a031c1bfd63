// Reference evaluators: reductions, softmax, cumulative sums and LayerNormalization.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/ir/eval_internal.h"

namespace surge::engine::ir::eval_internal {
namespace {

enum class Reduce { kSum, kMean, kMax, kMin, kProd, kSumSquare, kL2 };

// Splits a shape around a set of reduced axes: each output element reduces over the elements
// sharing its kept coordinates.
struct ReducePlan {
  Shape out_shape;   // with keepdims applied
  Shape kept_shape;  // rank of the input, reduced axes set to 1
  std::vector<bool> reduced;
};

Result<ReducePlan> PlanReduce(const Node& node, const Shape& in, std::vector<int64_t> axes,
                              bool keepdims) {
  const int64_t rank = static_cast<int64_t>(in.size());
  ReducePlan p;
  p.reduced.assign(rank, axes.empty());
  for (int64_t a : axes) {
    SURGE_ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(node, a, rank));
    p.reduced[ax] = true;
  }
  for (int64_t i = 0; i < rank; ++i) {
    p.kept_shape.push_back(p.reduced[i] ? 1 : in[i]);
    if (!p.reduced[i]) {
      p.out_shape.push_back(in[i]);
    } else if (keepdims) {
      p.out_shape.push_back(1);
    }
  }
  return p;
}

Status ReduceOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
                Reduce kind) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  std::vector<int64_t> axes;
  if (const Tensor* a = OptionalInput(inputs, 1)) {
    axes = ToInt64Vector(*a);
  } else {
    axes = node.GetInts("axes");
  }
  if (axes.empty() && node.GetInt("noop_with_empty_axes", 0) != 0) {
    outputs->push_back(x->Clone());
    return Status::Ok();
  }
  const bool keepdims = node.GetInt("keepdims", 1) != 0;
  SURGE_ASSIGN_OR_RETURN(ReducePlan plan, PlanReduce(node, x->shape(), axes, keepdims));
  if (x->dtype() == DType::kBool) return UnsupportedDType(node, x->dtype());
  SURGE_ASSIGN_OR_RETURN(Tensor xd, ConvertTo(*x, DType::kFloat64));
  const int64_t out_n = ::surge::NumElements(plan.kept_shape);
  const int64_t in_n = x->numel();
  if ((kind == Reduce::kMax || kind == Reduce::kMin) && in_n == 0) {
    return InvalidArgumentError("{}: cannot take max/min of an empty tensor", NodeLabel(node));
  }
  std::vector<double> acc(out_n, kind == Reduce::kProd  ? 1.0
                                 : kind == Reduce::kMax ? -std::numeric_limits<double>::infinity()
                                 : kind == Reduce::kMin ? std::numeric_limits<double>::infinity()
                                                        : 0.0);
  std::array<std::vector<int64_t>, 1> s{BroadcastStrides(plan.kept_shape, x->shape())};
  const double* px = xd.data_as<double>();
  ForEachBroadcast<1>(x->shape(), s, [&](int64_t i, const std::array<int64_t, 1>& o) {
    double v = px[i];
    double& a = acc[o[0]];
    switch (kind) {
      case Reduce::kSum:
      case Reduce::kMean:
        a += v;
        break;
      case Reduce::kSumSquare:
      case Reduce::kL2:
        a += v * v;
        break;
      case Reduce::kProd:
        a *= v;
        break;
      case Reduce::kMax:
        a = (std::isnan(v) || v > a) ? v : a;
        break;
      case Reduce::kMin:
        a = (std::isnan(v) || v < a) ? v : a;
        break;
    }
  });
  const int64_t count = out_n ? in_n / out_n : 0;
  Tensor r(DType::kFloat64, plan.out_shape);
  for (int64_t i = 0; i < out_n; ++i) {
    double v = acc[i];
    if (kind == Reduce::kMean) v /= static_cast<double>(count);
    if (kind == Reduce::kL2) v = std::sqrt(v);
    r.data_as<double>()[i] = v;
  }
  SURGE_ASSIGN_OR_RETURN(Tensor out, ConvertTo(r, x->dtype()));
  outputs->push_back(std::move(out));
  return Status::Ok();
}

// Splits `shape` at `axis` into outer × dim × inner.
struct AxisSplit {
  int64_t outer = 1, dim = 1, inner = 1;
};
AxisSplit SplitAt(const Shape& shape, int64_t axis) {
  AxisSplit s;
  for (int64_t a = 0; a < static_cast<int64_t>(shape.size()); ++a) {
    if (a < axis) s.outer *= shape[a];
    if (a == axis) s.dim = shape[a];
    if (a > axis) s.inner *= shape[a];
  }
  return s;
}

Status SoftmaxOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
                 bool log) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  if (x->dtype() != DType::kFloat32 && x->dtype() != DType::kFloat64) {
    return UnsupportedDType(node, x->dtype());
  }
  const int64_t rank = static_cast<int64_t>(x->rank());
  SURGE_ASSIGN_OR_RETURN(int64_t axis,
                         NormalizeAxis(node, node.GetInt("axis", -1), std::max<int64_t>(rank, 1)));
  SURGE_ASSIGN_OR_RETURN(Tensor xd, ConvertTo(*x, DType::kFloat64));
  Tensor yd(DType::kFloat64, x->shape());
  AxisSplit s = SplitAt(x->shape(), axis);
  const double* px = xd.data_as<double>();
  double* py = yd.data_as<double>();
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t in = 0; in < s.inner; ++in) {
      const int64_t base = o * s.dim * s.inner + in;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < s.dim; ++k) mx = std::max(mx, px[base + k * s.inner]);
      double sum = 0;
      for (int64_t k = 0; k < s.dim; ++k) sum += std::exp(px[base + k * s.inner] - mx);
      for (int64_t k = 0; k < s.dim; ++k) {
        double v = px[base + k * s.inner] - mx;
        py[base + k * s.inner] = log ? v - std::log(sum) : std::exp(v) / sum;
      }
    }
  }
  SURGE_ASSIGN_OR_RETURN(Tensor out, ConvertTo(yd, x->dtype()));
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status CumSumOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* axis_t, RequiredInput(node, inputs, 1));
  if (axis_t->numel() != 1) {
    return InvalidArgumentError("{}: axis must be a scalar, got shape {}", NodeLabel(node),
                                ShapeToString(axis_t->shape()));
  }
  const int64_t rank = static_cast<int64_t>(x->rank());
  SURGE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, axis_t->GetInt(0), rank));
  const bool exclusive = node.GetInt("exclusive", 0) != 0;
  const bool reverse = node.GetInt("reverse", 0) != 0;
  Tensor out(x->dtype(), x->shape());
  AxisSplit s = SplitAt(x->shape(), axis);
  bool ok = DispatchDType(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* px = x->data_as<T>();
      T* po = out.data_as<T>();
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int64_t in = 0; in < s.inner; ++in) {
          const int64_t base = o * s.dim * s.inner + in;
          T acc{};
          for (int64_t step = 0; step < s.dim; ++step) {
            const int64_t k = reverse ? s.dim - 1 - step : step;
            const T v = px[base + k * s.inner];
            if (exclusive) {
              po[base + k * s.inner] = acc;
              acc = static_cast<T>(acc + v);
            } else {
              acc = static_cast<T>(acc + v);
              po[base + k * s.inner] = acc;
            }
          }
        }
      }
    }
  });
  if (!ok || x->dtype() == DType::kBool) return UnsupportedDType(node, x->dtype());
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status ArgOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
             bool max) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  const int64_t rank = static_cast<int64_t>(x->rank());
  SURGE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, node.GetInt("axis", 0), rank));
  const bool keepdims = node.GetInt("keepdims", 1) != 0;
  const bool last = node.GetInt("select_last_index", 0) != 0;
  AxisSplit s = SplitAt(x->shape(), axis);
  if (s.dim == 0) return InvalidArgumentError("{}: reduced axis is empty", NodeLabel(node));
  Shape out_shape = x->shape();
  if (keepdims) {
    out_shape[axis] = 1;
  } else {
    out_shape.erase(out_shape.begin() + axis);
  }
  Tensor out(DType::kInt64, out_shape);
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t in = 0; in < s.inner; ++in) {
      const int64_t base = o * s.dim * s.inner + in;
      int64_t best = 0;
      double bv = x->GetDouble(base);
      for (int64_t k = 1; k < s.dim; ++k) {
        double v = x->GetDouble(base + k * s.inner);
        bool better = max ? (v > bv || (last && v == bv)) : (v < bv || (last && v == bv));
        if (better) {
          best = k;
          bv = v;
        }
      }
      out.data_as<int64_t>()[o * s.inner + in] = best;
    }
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status LayerNormalizationOp(const Node& node, std::span<const Tensor> inputs,
                            std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* scale, RequiredInput(node, inputs, 1));
  const Tensor* bias = OptionalInput(inputs, 2);
  if (!IsFloating(x->dtype())) return UnsupportedDType(node, x->dtype());
  const int64_t rank = static_cast<int64_t>(x->rank());
  SURGE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, node.GetInt("axis", -1), rank));
  const double eps = node.GetFloat("epsilon", 1e-5);
  Shape norm_shape(x->shape().begin() + axis, x->shape().end());
  std::array<Shape, 2> check{norm_shape, scale->shape()};
  Result<Shape> bs = BroadcastShapes(node, check);
  if (!bs.ok() || *bs != norm_shape ||
      (bias && bias->numel() != 1 && bias->shape() != scale->shape() &&
       ::surge::NumElements(bias->shape()) != ::surge::NumElements(norm_shape))) {
    return InvalidArgumentError("{}: scale {} / bias do not fit the normalised shape {}",
                                NodeLabel(node), ShapeToString(scale->shape()),
                                ShapeToString(norm_shape));
  }
  const int64_t n = ::surge::NumElements(norm_shape);
  const int64_t rows = n ? x->numel() / n : 0;
  SURGE_ASSIGN_OR_RETURN(Tensor xd, ConvertTo(*x, DType::kFloat64));
  Tensor yd(DType::kFloat64, x->shape());
  Shape stat_shape = x->shape();
  for (int64_t a = axis; a < rank; ++a) stat_shape[a] = 1;
  Tensor mean_t(DType::kFloat32, stat_shape), inv_t(DType::kFloat32, stat_shape);
  auto param = [n](const Tensor* t, int64_t j) {
    return t->numel() == 1 ? t->GetDouble(0) : t->GetDouble(t->numel() == n ? j : j % t->numel());
  };
  for (int64_t r = 0; r < rows; ++r) {
    const double* px = xd.data_as<double>() + r * n;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += px[j];
    mean /= static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) var += (px[j] - mean) * (px[j] - mean);
    var /= static_cast<double>(n);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < n; ++j) {
      double y = (px[j] - mean) * inv * param(scale, j);
      if (bias) y += param(bias, j);
      yd.data_as<double>()[r * n + j] = y;
    }
    mean_t.data_as<float>()[r] = static_cast<float>(mean);
    inv_t.data_as<float>()[r] = static_cast<float>(inv);
  }
  SURGE_ASSIGN_OR_RETURN(Tensor y, ConvertTo(yd, x->dtype()));
  outputs->push_back(std::move(y));
  outputs->push_back(std::move(mean_t));
  outputs->push_back(std::move(inv_t));
  return Status::Ok();
}

void Reg(std::string_view op, EvalFn fn) { RegisterEvaluator("", op, std::move(fn)); }

}  // namespace

void RegisterReduceEvaluators() {
  auto reduce = [](Reduce kind) {
    return [kind](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
      return ReduceOp(n, in, out, kind);
    };
  };
  Reg("ReduceSum", reduce(Reduce::kSum));
  Reg("ReduceMean", reduce(Reduce::kMean));
  Reg("ReduceMax", reduce(Reduce::kMax));
  Reg("ReduceMin", reduce(Reduce::kMin));
  Reg("ReduceProd", reduce(Reduce::kProd));
  Reg("ReduceSumSquare", reduce(Reduce::kSumSquare));
  Reg("ReduceL2", reduce(Reduce::kL2));
  Reg("Softmax", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    return SoftmaxOp(n, in, out, false);
  });
  Reg("LogSoftmax", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    return SoftmaxOp(n, in, out, true);
  });
  Reg("CumSum", CumSumOp);
  Reg("ArgMax", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    return ArgOp(n, in, out, true);
  });
  Reg("ArgMin", [](const Node& n, std::span<const Tensor> in, std::vector<Tensor>* out) {
    return ArgOp(n, in, out, false);
  });
  Reg("LayerNormalization", LayerNormalizationOp);
}

}  // namespace surge::engine::ir::eval_internal
