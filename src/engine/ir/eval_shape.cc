// Reference evaluators: shape and data-movement ONNX ops.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "engine/ir/eval_internal.h"

namespace surge::engine::ir::eval_internal {
namespace {

Tensor ShapeTensor(const std::vector<int64_t>& v) {
  Tensor t(DType::kInt64, Shape{static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data_as<int64_t>());
  return t;
}

// Same bytes, new shape, as an owned copy (outputs never alias inputs).
Result<Tensor> CopyReshaped(const Tensor& x, Shape shape) {
  SURGE_ASSIGN_OR_RETURN(Tensor view, x.Reshaped(std::move(shape)));
  return view.Clone();
}

// Axes from input `index` when present, else from attribute "axes"; nullopt when neither.
std::optional<std::vector<int64_t>> AxesFrom(const Node& node, std::span<const Tensor> inputs,
                                             size_t index) {
  if (const Tensor* t = OptionalInput(inputs, index)) return ToInt64Vector(*t);
  if (node.HasAttr("axes")) return node.GetInts("axes");
  return std::nullopt;
}

Status ShapeOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  const int64_t rank = static_cast<int64_t>(x->rank());
  int64_t start = node.GetInt("start", 0);
  int64_t end = node.GetInt("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(x->dim(i));
  outputs->push_back(ShapeTensor(dims));
  return Status::Ok();
}

Status SizeOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  Tensor t(DType::kInt64, Shape{});
  t.data_as<int64_t>()[0] = x->numel();
  outputs->push_back(std::move(t));
  return Status::Ok();
}

Status IdentityOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  outputs->push_back(x->Clone());
  if (node.op_type == "Dropout" && node.outputs.size() > 1) {
    Tensor mask(DType::kBool, x->shape());
    std::fill_n(mask.data_as<bool>(), mask.numel(), true);
    outputs->push_back(std::move(mask));
  }
  return Status::Ok();
}

Status ReshapeOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  std::vector<int64_t> target;
  if (const Tensor* s = OptionalInput(inputs, 1)) {
    target = ToInt64Vector(*s);
  } else if (node.HasAttr("shape")) {
    target = node.GetInts("shape");
  } else {
    return InvalidArgumentError("{}: the target shape input is missing", NodeLabel(node));
  }
  const bool allow_zero = node.GetInt("allowzero", 0) != 0;
  Shape out(target.size());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allow_zero) {
      if (i >= x->rank()) {
        return InvalidArgumentError("{}: target {} copies axis {} but the input {} has rank {}",
                                    NodeLabel(node), ShapeToString(target), i,
                                    ShapeToString(x->shape()), x->rank());
      }
      d = x->dim(i);
    }
    if (d == -1) {
      if (infer >= 0) {
        return InvalidArgumentError("{}: target {} has more than one -1", NodeLabel(node),
                                    ShapeToString(target));
      }
      infer = static_cast<int>(i);
      continue;
    }
    if (d < 0) {
      return InvalidArgumentError("{}: target {} has a negative dim", NodeLabel(node),
                                  ShapeToString(target));
    }
    out[i] = d;
    known *= d;
  }
  if (infer >= 0) {
    if (known == 0 || x->numel() % known != 0) {
      return InvalidArgumentError("{}: cannot reshape {} ({} elements) to {}", NodeLabel(node),
                                  ShapeToString(x->shape()), x->numel(), ShapeToString(target));
    }
    out[infer] = x->numel() / known;
  }
  if (::surge::NumElements(out) != x->numel()) {
    return InvalidArgumentError("{}: cannot reshape {} ({} elements) to {} ({} elements)",
                                NodeLabel(node), ShapeToString(x->shape()), x->numel(),
                                ShapeToString(out), ::surge::NumElements(out));
  }
  SURGE_ASSIGN_OR_RETURN(Tensor t, CopyReshaped(*x, out));
  outputs->push_back(std::move(t));
  return Status::Ok();
}

Status FlattenOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  const int64_t rank = static_cast<int64_t>(x->rank());
  int64_t axis = node.GetInt("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) {
    return InvalidArgumentError("{}: axis {} is out of range for rank {}", NodeLabel(node),
                                node.GetInt("axis", 1), rank);
  }
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x->dim(i);
  SURGE_ASSIGN_OR_RETURN(Tensor t, CopyReshaped(*x, {outer, outer ? x->numel() / outer : 0}));
  outputs->push_back(std::move(t));
  return Status::Ok();
}

Status UnsqueezeOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  auto axes = AxesFrom(node, inputs, 1);
  if (!axes) return InvalidArgumentError("{}: axes are missing", NodeLabel(node));
  const int64_t out_rank = static_cast<int64_t>(x->rank() + axes->size());
  std::vector<bool> is_new(out_rank, false);
  for (int64_t a : *axes) {
    SURGE_ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(node, a, out_rank));
    if (is_new[ax]) {
      return InvalidArgumentError("{}: axis {} is repeated", NodeLabel(node), a);
    }
    is_new[ax] = true;
  }
  Shape out;
  size_t k = 0;
  for (int64_t i = 0; i < out_rank; ++i) out.push_back(is_new[i] ? 1 : x->dim(k++));
  SURGE_ASSIGN_OR_RETURN(Tensor t, CopyReshaped(*x, out));
  outputs->push_back(std::move(t));
  return Status::Ok();
}

Status SqueezeOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  auto axes = AxesFrom(node, inputs, 1);
  const int64_t rank = static_cast<int64_t>(x->rank());
  std::vector<bool> drop(rank, false);
  if (!axes || axes->empty()) {
    for (int64_t i = 0; i < rank; ++i) drop[i] = x->dim(i) == 1;
  } else {
    for (int64_t a : *axes) {
      SURGE_ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(node, a, rank));
      if (x->dim(ax) != 1) {
        return InvalidArgumentError("{}: cannot squeeze axis {} of size {} (shape {})",
                                    NodeLabel(node), a, x->dim(ax), ShapeToString(x->shape()));
      }
      drop[ax] = true;
    }
  }
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!drop[i]) out.push_back(x->dim(i));
  }
  SURGE_ASSIGN_OR_RETURN(Tensor t, CopyReshaped(*x, out));
  outputs->push_back(std::move(t));
  return Status::Ok();
}

Status ConcatOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  if (inputs.empty()) return InvalidArgumentError("{}: needs inputs", NodeLabel(node));
  if (!node.HasAttr("axis"))
    return InvalidArgumentError("{}: attribute 'axis' is missing", NodeLabel(node));
  SURGE_ASSIGN_OR_RETURN(const Tensor* first, RequiredInput(node, inputs, 0));
  const int64_t rank = static_cast<int64_t>(first->rank());
  SURGE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, node.GetInt("axis", 0), rank));
  Shape out = first->shape();
  out[axis] = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    SURGE_ASSIGN_OR_RETURN(const Tensor* t, RequiredInput(node, inputs, i));
    bool ok = t->dtype() == first->dtype() && static_cast<int64_t>(t->rank()) == rank;
    for (int64_t a = 0; ok && a < rank; ++a) ok = a == axis || t->dim(a) == first->dim(a);
    if (!ok) {
      return InvalidArgumentError("{}: input {} ({} {}) does not match input 0 ({} {}) off axis {}",
                                  NodeLabel(node), i, DTypeName(t->dtype()),
                                  ShapeToString(t->shape()), DTypeName(first->dtype()),
                                  ShapeToString(first->shape()), axis);
    }
    out[axis] += t->dim(axis);
  }
  Tensor result(first->dtype(), out);
  const size_t elem = DTypeSize(first->dtype());
  int64_t outer = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= out[a];
  int64_t inner = 1;
  for (int64_t a = axis + 1; a < rank; ++a) inner *= out[a];
  uint8_t* dst = static_cast<uint8_t*>(result.data());
  const size_t out_row = static_cast<size_t>(out[axis] * inner) * elem;
  size_t col = 0;
  for (const Tensor& t : inputs) {
    const size_t row = static_cast<size_t>(t.dim(axis) * inner) * elem;
    const uint8_t* src = static_cast<const uint8_t*>(t.data());
    for (int64_t o = 0; o < outer; ++o) {
      if (row) std::memcpy(dst + o * out_row + col, src + o * row, row);
    }
    col += row;
  }
  outputs->push_back(std::move(result));
  return Status::Ok();
}

// Copies `x` permuted by `perm` (out axis i = in axis perm[i]).
Tensor Permute(const Tensor& x, const std::vector<int64_t>& perm) {
  const size_t rank = x.rank();
  Shape out_shape(rank);
  for (size_t i = 0; i < rank; ++i) out_shape[i] = x.dim(perm[i]);
  Tensor out(x.dtype(), out_shape);
  std::vector<int64_t> in_strides = Strides(x.shape());
  std::vector<int64_t> strides(rank);
  for (size_t i = 0; i < rank; ++i) strides[i] = in_strides[perm[i]];
  const size_t elem = DTypeSize(x.dtype());
  const uint8_t* src = static_cast<const uint8_t*>(x.data());
  uint8_t* dst = static_cast<uint8_t*>(out.data());
  std::array<std::vector<int64_t>, 1> s{strides};
  ForEachBroadcast<1>(out_shape, s, [&](int64_t i, const std::array<int64_t, 1>& o) {
    std::memcpy(dst + i * elem, src + o[0] * elem, elem);
  });
  return out;
}

Status TransposeOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  const int64_t rank = static_cast<int64_t>(x->rank());
  std::vector<int64_t> perm = node.GetInts("perm");
  if (perm.empty()) {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool valid = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t i = 0; valid && i < rank; ++i) valid = sorted[i] == i;
  if (!valid) {
    return InvalidArgumentError("{}: perm {} is not a permutation of the {} axes of {}",
                                NodeLabel(node), ShapeToString(perm), rank,
                                ShapeToString(x->shape()));
  }
  outputs->push_back(Permute(*x, perm));
  return Status::Ok();
}

Status SliceOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  const int64_t rank = static_cast<int64_t>(x->rank());
  std::vector<int64_t> starts, ends, axes, steps;
  if (OptionalInput(inputs, 1) != nullptr) {
    starts = ToInt64Vector(inputs[1]);
    SURGE_ASSIGN_OR_RETURN(const Tensor* e, RequiredInput(node, inputs, 2));
    ends = ToInt64Vector(*e);
    if (const Tensor* a = OptionalInput(inputs, 3)) axes = ToInt64Vector(*a);
    if (const Tensor* s = OptionalInput(inputs, 4)) steps = ToInt64Vector(*s);
  } else {
    starts = node.GetInts("starts");
    ends = node.GetInts("ends");
    axes = node.GetInts("axes");
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return InvalidArgumentError("{}: starts/ends/axes/steps lengths differ ({}/{}/{}/{})",
                                NodeLabel(node), starts.size(), ends.size(), axes.size(),
                                steps.size());
  }
  std::vector<int64_t> begin(rank, 0), step(rank, 1);
  Shape out_shape = x->shape();
  for (size_t i = 0; i < starts.size(); ++i) {
    SURGE_ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(node, axes[i], rank));
    const int64_t dim = x->dim(ax);
    const int64_t st = steps[i];
    if (st == 0) return InvalidArgumentError("{}: step 0 on axis {}", NodeLabel(node), ax);
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    int64_t n = st > 0 ? (e > s ? (e - s + st - 1) / st : 0) : (s > e ? (s - e - st - 1) / -st : 0);
    begin[ax] = s;
    step[ax] = st;
    out_shape[ax] = n;
  }
  Tensor out(x->dtype(), out_shape);
  const size_t elem = DTypeSize(x->dtype());
  std::vector<int64_t> in_strides = Strides(x->shape());
  int64_t base = 0;
  std::vector<int64_t> strides(rank);
  for (int64_t a = 0; a < rank; ++a) {
    base += begin[a] * in_strides[a];
    strides[a] = step[a] * in_strides[a];
  }
  const uint8_t* src = static_cast<const uint8_t*>(x->data());
  uint8_t* dst = static_cast<uint8_t*>(out.data());
  std::array<std::vector<int64_t>, 1> s{strides};
  ForEachBroadcast<1>(out_shape, s, [&](int64_t i, const std::array<int64_t, 1>& o) {
    std::memcpy(dst + i * elem, src + (base + o[0]) * elem, elem);
  });
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status GatherOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* idx_t, RequiredInput(node, inputs, 1));
  if (idx_t->dtype() != DType::kInt64 && idx_t->dtype() != DType::kInt32) {
    return InvalidArgumentError("{}: indices must be int64 or int32, got {}", NodeLabel(node),
                                DTypeName(idx_t->dtype()));
  }
  const int64_t rank = static_cast<int64_t>(x->rank());
  if (rank == 0) return InvalidArgumentError("{}: data must have rank >= 1", NodeLabel(node));
  SURGE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, node.GetInt("axis", 0), rank));
  Shape out_shape(x->shape().begin(), x->shape().begin() + axis);
  out_shape.insert(out_shape.end(), idx_t->shape().begin(), idx_t->shape().end());
  out_shape.insert(out_shape.end(), x->shape().begin() + axis + 1, x->shape().end());
  Tensor out(x->dtype(), out_shape);
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= x->dim(a);
  for (int64_t a = axis + 1; a < rank; ++a) inner *= x->dim(a);
  const int64_t dim = x->dim(axis);
  const int64_t n_idx = idx_t->numel();
  const size_t row = static_cast<size_t>(inner) * DTypeSize(x->dtype());
  const uint8_t* src = static_cast<const uint8_t*>(x->data());
  uint8_t* dst = static_cast<uint8_t*>(out.data());
  for (int64_t j = 0; j < n_idx; ++j) {
    int64_t k = idx_t->GetInt(j);
    if (k < -dim || k >= dim) {
      return OutOfRangeError("{}: index {} is out of range for axis {} of size {}", NodeLabel(node),
                             k, axis, dim);
    }
    if (k < 0) k += dim;
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(dst + (o * n_idx + j) * row, src + (o * dim + k) * row, row);
    }
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status GatherElementsOp(const Node& node, std::span<const Tensor> inputs,
                        std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* idx, RequiredInput(node, inputs, 1));
  const int64_t rank = static_cast<int64_t>(x->rank());
  if (static_cast<int64_t>(idx->rank()) != rank || rank == 0) {
    return InvalidArgumentError("{}: indices {} must have the rank of data {}", NodeLabel(node),
                                ShapeToString(idx->shape()), ShapeToString(x->shape()));
  }
  SURGE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, node.GetInt("axis", 0), rank));
  Tensor out(x->dtype(), idx->shape());
  const size_t elem = DTypeSize(x->dtype());
  const std::vector<int64_t> xs = Strides(x->shape());
  const std::vector<int64_t> is = Strides(idx->shape());
  const int64_t dim = x->dim(axis);
  for (int64_t i = 0; i < idx->numel(); ++i) {
    int64_t rem = i, src = 0;
    for (int64_t a = 0; a < rank; ++a) {
      int64_t c = rem / is[a];
      rem %= is[a];
      if (a == axis) {
        c = idx->GetInt(i);
        if (c < -dim || c >= dim) {
          return OutOfRangeError("{}: index {} is out of range for axis {} of size {}",
                                 NodeLabel(node), c, axis, dim);
        }
        if (c < 0) c += dim;
      } else if (c >= x->dim(a)) {
        return InvalidArgumentError("{}: indices {} exceed data {} off the gather axis",
                                    NodeLabel(node), ShapeToString(idx->shape()),
                                    ShapeToString(x->shape()));
      }
      src += c * xs[a];
    }
    std::memcpy(static_cast<uint8_t*>(out.data()) + i * elem,
                static_cast<const uint8_t*>(x->data()) + src * elem, elem);
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status GatherNDOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* idx, RequiredInput(node, inputs, 1));
  const int64_t b = node.GetInt("batch_dims", 0);
  const int64_t r = static_cast<int64_t>(x->rank()), q = static_cast<int64_t>(idx->rank());
  if (q < 1 || b < 0 || b >= std::min(r, q)) {
    return InvalidArgumentError("{}: batch_dims {} does not fit data {} and indices {}",
                                NodeLabel(node), b, ShapeToString(x->shape()),
                                ShapeToString(idx->shape()));
  }
  const int64_t k = idx->dim(q - 1);
  if (k < 1 || k > r - b) {
    return InvalidArgumentError("{}: index tuples of length {} do not fit data {} (batch_dims {})",
                                NodeLabel(node), k, ShapeToString(x->shape()), b);
  }
  for (int64_t a = 0; a < b; ++a) {
    if (x->dim(a) != idx->dim(a)) {
      return InvalidArgumentError("{}: batch dims of data {} and indices {} differ",
                                  NodeLabel(node), ShapeToString(x->shape()),
                                  ShapeToString(idx->shape()));
    }
  }
  Shape out_shape(idx->shape().begin(), idx->shape().end() - 1);
  out_shape.insert(out_shape.end(), x->shape().begin() + b + k, x->shape().end());
  Tensor out(x->dtype(), out_shape);
  int64_t batch = 1, slice = 1;
  for (int64_t a = 0; a < b; ++a) batch *= x->dim(a);
  for (int64_t a = b + k; a < r; ++a) slice *= x->dim(a);
  int64_t per_batch_data = 1;
  for (int64_t a = b; a < r; ++a) per_batch_data *= x->dim(a);
  const int64_t tuples = batch ? idx->numel() / k / batch : 0;
  const std::vector<int64_t> xs = Strides(x->shape());
  const size_t elem = DTypeSize(x->dtype());
  const size_t row = static_cast<size_t>(slice) * elem;
  for (int64_t bi = 0; bi < batch; ++bi) {
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t src = bi * per_batch_data;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t dim = x->dim(b + j);
        int64_t c = idx->GetInt((bi * tuples + t) * k + j);
        if (c < -dim || c >= dim) {
          return OutOfRangeError("{}: index {} is out of range for axis {} of size {}",
                                 NodeLabel(node), c, b + j, dim);
        }
        if (c < 0) c += dim;
        src += c * xs[b + j];
      }
      if (row) {
        std::memcpy(static_cast<uint8_t*>(out.data()) + (bi * tuples + t) * row,
                    static_cast<const uint8_t*>(x->data()) + src * elem, row);
      }
    }
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

// Output = broadcast of x to `out_shape` (which must already be a valid broadcast).
Tensor BroadcastTo(const Tensor& x, const Shape& out_shape) {
  Tensor out(x.dtype(), out_shape);
  const size_t elem = DTypeSize(x.dtype());
  const uint8_t* src = static_cast<const uint8_t*>(x.data());
  uint8_t* dst = static_cast<uint8_t*>(out.data());
  std::array<std::vector<int64_t>, 1> s{BroadcastStrides(x.shape(), out_shape)};
  ForEachBroadcast<1>(out_shape, s, [&](int64_t i, const std::array<int64_t, 1>& o) {
    std::memcpy(dst + i * elem, src + o[0] * elem, elem);
  });
  return out;
}

Status ExpandOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* s, RequiredInput(node, inputs, 1));
  std::array<Shape, 2> shapes{x->shape(), ToInt64Vector(*s)};
  SURGE_ASSIGN_OR_RETURN(Shape out_shape, BroadcastShapes(node, shapes));
  outputs->push_back(BroadcastTo(*x, out_shape));
  return Status::Ok();
}

Status TileOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* r, RequiredInput(node, inputs, 1));
  std::vector<int64_t> reps = ToInt64Vector(*r);
  if (reps.size() != x->rank()) {
    return InvalidArgumentError("{}: repeats has {} entries for rank {}", NodeLabel(node),
                                reps.size(), x->rank());
  }
  Shape out_shape = x->shape();
  for (size_t i = 0; i < reps.size(); ++i) out_shape[i] *= reps[i];
  Tensor out(x->dtype(), out_shape);
  const size_t elem = DTypeSize(x->dtype());
  std::vector<int64_t> in_strides = Strides(x->shape());
  std::vector<int64_t> out_strides = Strides(out_shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t rem = i, src = 0;
    for (size_t a = 0; a < out_shape.size(); ++a) {
      int64_t c = rem / out_strides[a];
      rem %= out_strides[a];
      src += (c % x->dim(a)) * in_strides[a];
    }
    std::memcpy(static_cast<uint8_t*>(out.data()) + i * elem,
                static_cast<const uint8_t*>(x->data()) + src * elem, elem);
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status ConstantOfShapeOp(const Node& node, std::span<const Tensor> inputs,
                         std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* s, RequiredInput(node, inputs, 0));
  Shape shape = ToInt64Vector(*s);
  for (int64_t d : shape) {
    if (d < 0) {
      return InvalidArgumentError("{}: shape {} has a negative dim", NodeLabel(node),
                                  ShapeToString(shape));
    }
  }
  const Tensor* value = node.GetTensor("value");
  if (value == nullptr) {
    outputs->push_back(Tensor(DType::kFloat32, shape));
    return Status::Ok();
  }
  if (value->numel() != 1) {
    return InvalidArgumentError("{}: value must hold one element, has {}", NodeLabel(node),
                                value->numel());
  }
  Tensor out(value->dtype(), shape);
  const size_t elem = DTypeSize(value->dtype());
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::memcpy(static_cast<uint8_t*>(out.data()) + i * elem, value->data(), elem);
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status RangeOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* start, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* limit, RequiredInput(node, inputs, 1));
  SURGE_ASSIGN_OR_RETURN(const Tensor* delta, RequiredInput(node, inputs, 2));
  for (const Tensor* t : {start, limit, delta}) {
    if (t->numel() != 1) {
      return InvalidArgumentError("{}: start/limit/delta must be scalars, got shape {}",
                                  NodeLabel(node), ShapeToString(t->shape()));
    }
  }
  const double s = start->GetDouble(0), l = limit->GetDouble(0), d = delta->GetDouble(0);
  if (d == 0) return InvalidArgumentError("{}: delta is 0", NodeLabel(node));
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((l - s) / d)));
  Tensor out(start->dtype(), Shape{n});
  bool ok = DispatchDType(start->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      const T s0 = start->data_as<T>()[0], d0 = delta->data_as<T>()[0];
      for (int64_t i = 0; i < n; ++i)
        out.data_as<T>()[i] = static_cast<T>(s0 + static_cast<T>(i) * d0);
    }
  });
  if (!ok || start->dtype() == DType::kBool) return UnsupportedDType(node, start->dtype());
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status ConstantOp(const Node& node, std::span<const Tensor>, std::vector<Tensor>* outputs) {
  if (const Tensor* t = node.GetTensor("value")) {
    outputs->push_back(t->Clone());
  } else if (node.HasAttr("value_float")) {
    Tensor t(DType::kFloat32, Shape{});
    t.data_as<float>()[0] = static_cast<float>(node.GetFloat("value_float", 0));
    outputs->push_back(std::move(t));
  } else if (node.HasAttr("value_int")) {
    Tensor t(DType::kInt64, Shape{});
    t.data_as<int64_t>()[0] = node.GetInt("value_int", 0);
    outputs->push_back(std::move(t));
  } else if (node.HasAttr("value_floats")) {
    std::vector<double> v = node.GetFloats("value_floats");
    Tensor t(DType::kFloat32, Shape{static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data_as<float>()[i] = static_cast<float>(v[i]);
    outputs->push_back(std::move(t));
  } else if (node.HasAttr("value_ints")) {
    outputs->push_back(ShapeTensor(node.GetInts("value_ints")));
  } else {
    return InvalidArgumentError("{}: no value attribute (value, value_float(s), value_int(s))",
                                NodeLabel(node));
  }
  return Status::Ok();
}

Status SplitOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  const int64_t rank = static_cast<int64_t>(x->rank());
  SURGE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, node.GetInt("axis", 0), rank));
  const int64_t dim = x->dim(axis);
  std::vector<int64_t> sizes;
  if (const Tensor* s = OptionalInput(inputs, 1)) {
    sizes = ToInt64Vector(*s);
  } else if (node.HasAttr("split")) {
    sizes = node.GetInts("split");
  } else {
    int64_t n = node.GetInt("num_outputs", static_cast<int64_t>(node.outputs.size()));
    if (n <= 0) return InvalidArgumentError("{}: cannot tell how many parts", NodeLabel(node));
    const int64_t chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total != dim || std::any_of(sizes.begin(), sizes.end(), [](int64_t s) { return s < 0; })) {
    return InvalidArgumentError("{}: split sizes {} do not add up to axis {} of size {}",
                                NodeLabel(node), ShapeToString(sizes), axis, dim);
  }
  int64_t offset = 0;
  for (int64_t s : sizes) {
    std::vector<Tensor> part;
    Node slice;
    slice.op_type = "Slice";
    slice.name = node.name;
    slice.attrs["starts"] = std::vector<int64_t>{offset};
    slice.attrs["ends"] = std::vector<int64_t>{offset + s};
    slice.attrs["axes"] = std::vector<int64_t>{axis};
    std::array<Tensor, 1> in{*x};
    SURGE_RETURN_IF_ERROR(SliceOp(slice, in, &part));
    outputs->push_back(std::move(part[0]));
    offset += s;
  }
  return Status::Ok();
}

Status TriluOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  if (x->rank() < 2) return InvalidArgumentError("{}: input rank must be >= 2", NodeLabel(node));
  const int64_t k = OptionalInput(inputs, 1) ? inputs[1].GetInt(0) : 0;
  const bool upper = node.GetInt("upper", 1) != 0;
  Tensor out = x->Clone();
  const int64_t rows = x->dim(x->rank() - 2), cols = x->dim(x->rank() - 1);
  const size_t elem = DTypeSize(x->dtype());
  const int64_t mats = rows * cols != 0 ? x->numel() / (rows * cols) : 0;
  uint8_t* p = static_cast<uint8_t*>(out.data());
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        const bool keep = upper ? (j - i >= k) : (j - i <= k);
        if (!keep) std::memset(p + ((m * rows + i) * cols + j) * elem, 0, elem);
      }
    }
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

void Reg(std::string_view op, EvalFn fn) { RegisterEvaluator("", op, std::move(fn)); }

}  // namespace

void RegisterShapeEvaluators() {
  Reg("Shape", ShapeOp);
  Reg("Size", SizeOp);
  Reg("Identity", IdentityOp);
  Reg("Dropout", IdentityOp);
  Reg("Reshape", ReshapeOp);
  Reg("Flatten", FlattenOp);
  Reg("Unsqueeze", UnsqueezeOp);
  Reg("Squeeze", SqueezeOp);
  Reg("Concat", ConcatOp);
  Reg("Transpose", TransposeOp);
  Reg("Slice", SliceOp);
  Reg("Gather", GatherOp);
  Reg("GatherElements", GatherElementsOp);
  Reg("GatherND", GatherNDOp);
  Reg("Expand", ExpandOp);
  Reg("Tile", TileOp);
  Reg("ConstantOfShape", ConstantOfShapeOp);
  Reg("Range", RangeOp);
  Reg("Constant", ConstantOp);
  Reg("Split", SplitOp);
  Reg("Trilu", TriluOp);
}

}  // namespace surge::engine::ir::eval_internal
