// Reference evaluators: MatMul (numpy semantics) and Gemm.
#include <algorithm>
#include <vector>

#include "engine/ir/eval_internal.h"

namespace surge::engine::ir::eval_internal {
namespace {

// C[m,n] = sum_k A[m,k] * B[k,n] for one matrix pair, accumulated in double.
void MatMul2D(const double* a, const double* b, double* c, int64_t m, int64_t k, int64_t n) {
  std::vector<double> row(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const double av = a[i * k + p];
      const double* br = b + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += av * br[j];
    }
    std::copy(row.begin(), row.end(), c + i * n);
  }
}

Status MatMulOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* a, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* b, RequiredInput(node, inputs, 1));
  if (a->dtype() != b->dtype() || a->dtype() == DType::kBool) {
    return InvalidArgumentError("{}: inputs must share a numeric dtype, got {} and {}",
                                NodeLabel(node), DTypeName(a->dtype()), DTypeName(b->dtype()));
  }
  if (a->rank() == 0 || b->rank() == 0) {
    return InvalidArgumentError("{}: inputs must have rank >= 1, got {} and {}", NodeLabel(node),
                                ShapeToString(a->shape()), ShapeToString(b->shape()));
  }
  Shape as = a->shape(), bs = b->shape();
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k) {
    return InvalidArgumentError("{}: inner dims differ: {} x {}", NodeLabel(node),
                                ShapeToString(a->shape()), ShapeToString(b->shape()));
  }
  std::array<Shape, 2> batch{Shape(as.begin(), as.end() - 2), Shape(bs.begin(), bs.end() - 2)};
  SURGE_ASSIGN_OR_RETURN(Shape out_batch, BroadcastShapes(node, batch));
  SURGE_ASSIGN_OR_RETURN(Tensor ad, ConvertTo(*a, DType::kFloat64));
  SURGE_ASSIGN_OR_RETURN(Tensor bd, ConvertTo(*b, DType::kFloat64));
  Shape out_full = out_batch;
  out_full.push_back(m);
  out_full.push_back(n);
  Tensor cd(DType::kFloat64, out_full);
  const int64_t nb = ::surge::NumElements(out_batch);
  std::array<std::vector<int64_t>, 2> strides{BroadcastStrides(batch[0], out_batch),
                                              BroadcastStrides(batch[1], out_batch)};
  std::vector<std::pair<int64_t, int64_t>> offsets(static_cast<size_t>(nb));
  if (out_batch.empty()) {
    offsets.assign(1, {0, 0});
  } else {
    ForEachBroadcast<2>(out_batch, strides, [&](int64_t i, const std::array<int64_t, 2>& o) {
      offsets[i] = {o[0], o[1]};
    });
  }
  for (size_t i = 0; i < offsets.size(); ++i) {
    MatMul2D(ad.data_as<double>() + offsets[i].first * m * k,
             bd.data_as<double>() + offsets[i].second * k * n,
             cd.data_as<double>() + static_cast<int64_t>(i) * m * n, m, k, n);
  }
  Shape out_shape = out_batch;
  if (!a_vec) out_shape.push_back(m);
  if (!b_vec) out_shape.push_back(n);
  SURGE_ASSIGN_OR_RETURN(Tensor c_view, cd.Reshaped(out_shape));
  SURGE_ASSIGN_OR_RETURN(Tensor out, ConvertTo(c_view, a->dtype()));
  outputs->push_back(out.data() == c_view.data() ? out.Clone() : std::move(out));
  return Status::Ok();
}

Status GemmOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* a, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* b, RequiredInput(node, inputs, 1));
  const Tensor* c = OptionalInput(inputs, 2);
  if (a->rank() != 2 || b->rank() != 2) {
    return InvalidArgumentError("{}: A and B must be 2-D, got {} and {}", NodeLabel(node),
                                ShapeToString(a->shape()), ShapeToString(b->shape()));
  }
  const bool ta = node.GetInt("transA", 0) != 0, tb = node.GetInt("transB", 0) != 0;
  const double alpha = node.GetFloat("alpha", 1.0), beta = node.GetFloat("beta", 1.0);
  const int64_t m = ta ? a->dim(1) : a->dim(0), k = ta ? a->dim(0) : a->dim(1);
  const int64_t kb = tb ? b->dim(1) : b->dim(0), n = tb ? b->dim(0) : b->dim(1);
  if (k != kb) {
    return InvalidArgumentError("{}: inner dims differ: A {} (transA={}) B {} (transB={})",
                                NodeLabel(node), ShapeToString(a->shape()), ta,
                                ShapeToString(b->shape()), tb);
  }
  Tensor cd(DType::kFloat64, Shape{m, n});
  double* pc = cd.data_as<double>();
  if (c != nullptr) {
    std::array<Shape, 2> shapes{c->shape(), Shape{m, n}};
    SURGE_ASSIGN_OR_RETURN(Shape s, BroadcastShapes(node, shapes));
    if (s != Shape({m, n})) {
      return InvalidArgumentError("{}: C {} does not broadcast to [{},{}]", NodeLabel(node),
                                  ShapeToString(c->shape()), m, n);
    }
    std::array<std::vector<int64_t>, 1> st{BroadcastStrides(c->shape(), s)};
    ForEachBroadcast<1>(s, st, [&](int64_t i, const std::array<int64_t, 1>& o) {
      pc[i] = beta * c->GetDouble(o[0]);
    });
  }
  SURGE_ASSIGN_OR_RETURN(Tensor ad, ConvertTo(*a, DType::kFloat64));
  SURGE_ASSIGN_OR_RETURN(Tensor bd, ConvertTo(*b, DType::kFloat64));
  const double* pa = ad.data_as<double>();
  const double* pb = bd.data_as<double>();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        s += pa[ta ? p * m + i : i * k + p] * pb[tb ? j * k + p : p * n + j];
      }
      pc[i * n + j] += alpha * s;
    }
  }
  SURGE_ASSIGN_OR_RETURN(Tensor out, ConvertTo(cd, a->dtype()));
  outputs->push_back(std::move(out));
  return Status::Ok();
}

}  // namespace

void RegisterMatMulEvaluators() {
  RegisterEvaluator("", "MatMul", MatMulOp);
  RegisterEvaluator("", "Gemm", GemmOp);
}

}  // namespace surge::engine::ir::eval_internal
