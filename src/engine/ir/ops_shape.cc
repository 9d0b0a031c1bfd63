// Shape and data-movement ONNX ops: Shape, Size, Gather, (Un)Squeeze, Concat, Reshape, Transpose,
// Slice, Expand, ConstantOfShape, Range, Flatten, Split, Tile, Identity, Constant, Trilu, CumSum,
// Dropout. These carry `sym_data` through the shape-computation chains that exporters emit
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) so that targets resolve to symbolic dims.
#include <algorithm>
#include <limits>

#include "engine/ir/ops_common.h"

namespace surge::engine::ir::ops {
namespace {

// Exporters write "to the end" as INT64_MAX or INT32_MAX-ish values.
constexpr int64_t kHugeIndex = int64_t{1} << 30;
constexpr int kMaxSplitOutputs = 1 << 16;

Status RequireRank(const Node& n, const Value& v, size_t rank, std::string_view what) {
  if (v.shape && v.shape->size() != rank) {
    return NodeError(n, "{} '{}' must have rank {}, has shape {}", what, v.name, rank,
                     SymShapeToString(*v.shape));
  }
  return Status::Ok();
}

Status InferShape(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  if (!x->shape) {
    SetOutput(g, n, 0, DType::kInt64, std::nullopt);
    return Status::Ok();
  }
  int64_t rank = static_cast<int64_t>(x->shape->size());
  int64_t start = n.GetInt("start", 0);
  int64_t end = n.GetInt("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  std::vector<Dim> data(x->shape->begin() + start, x->shape->begin() + end);
  SetOutput(g, n, 0, DType::kInt64, SymShape{Dim(static_cast<int64_t>(data.size()))});
  SetSymData(g, n, 0, std::move(data));
  return Status::Ok();
}

Status InferSize(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  SetOutput(g, n, 0, DType::kInt64, SymShape{});
  if (x->shape) SetSymData(g, n, 0, {NumElements(*x->shape)});
  return Status::Ok();
}

Status InferGather(Graph& g, Node& n) {
  const Value* data = Input(g, n, 0);
  const Value* idx = Input(g, n, 1);
  if (idx->dtype != DType::kUndefined && idx->dtype != DType::kInt64 &&
      idx->dtype != DType::kInt32) {
    return NodeError(n, "indices must be int32 or int64, got {}", DTypeName(idx->dtype));
  }
  if (!data->shape || !idx->shape) {
    SetOutput(g, n, 0, data->dtype, std::nullopt);
    return Status::Ok();
  }
  int64_t rank = static_cast<int64_t>(data->shape->size());
  if (rank == 0) return NodeError(n, "data must have rank >= 1");
  SURGE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(n, n.GetInt("axis", 0), rank));
  SymShape out(data->shape->begin(), data->shape->begin() + axis);
  out.insert(out.end(), idx->shape->begin(), idx->shape->end());
  out.insert(out.end(), data->shape->begin() + axis + 1, data->shape->end());
  SetOutput(g, n, 0, data->dtype, out);
  if (rank == 1 && out.size() <= 1) {
    auto d = InputSymData(g, n, 0);
    auto ix = InputStaticData(g, n, 1);
    if (d && ix) {
      std::vector<Dim> picked;
      int64_t len = static_cast<int64_t>(d->size());
      for (int64_t i : *ix) {
        if (i < 0) i += len;
        if (i < 0 || i >= len) return NodeError(n, "index {} is out of range [0, {})", i, len);
        picked.push_back((*d)[i]);
      }
      SetSymData(g, n, 0, std::move(picked));
    }
  }
  return Status::Ok();
}

Status InferGatherElements(Graph& g, Node& n) {
  const Value* data = Input(g, n, 0);
  const Value* idx = Input(g, n, 1);
  if (data->shape && idx->shape) {
    if (data->shape->size() != idx->shape->size()) {
      return NodeError(n, "data {} and indices {} must have the same rank",
                       SymShapeToString(*data->shape), SymShapeToString(*idx->shape));
    }
    SURGE_RETURN_IF_ERROR(
        NormalizeAxis(n, n.GetInt("axis", 0), static_cast<int64_t>(data->shape->size())).status());
  }
  SetOutput(g, n, 0, data->dtype, idx->shape);
  return Status::Ok();
}

// GatherND: out = indices.shape[:-1] + data.shape[batch_dims + indices.shape[-1]:].
Status InferGatherND(Graph& g, Node& n) {
  const Value* data = Input(g, n, 0);
  const Value* idx = Input(g, n, 1);
  if (!data->shape || !idx->shape) {
    SetOutput(g, n, 0, data->dtype, std::nullopt);
    return Status::Ok();
  }
  const SymShape& ds = *data->shape;
  const SymShape& is = *idx->shape;
  int64_t b = n.GetInt("batch_dims", 0);
  if (is.empty() || !is.back().IsStatic()) {
    return NodeError(n, "indices {} need a static last dimension", SymShapeToString(is));
  }
  int64_t k = is.back().StaticValue();
  if (b < 0 || b + k > static_cast<int64_t>(ds.size()) || b >= static_cast<int64_t>(is.size())) {
    return NodeError(n, "indices {} (batch_dims {}) do not fit data {}", SymShapeToString(is), b,
                     SymShapeToString(ds));
  }
  SymShape out(is.begin(), is.end() - 1);
  out.insert(out.end(), ds.begin() + b + k, ds.end());
  SetOutput(g, n, 0, data->dtype, out);
  return Status::Ok();
}

Status InferUnsqueeze(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  auto axes = AxesOf(g, n, 1);
  if (!x->shape || !axes) {
    SetOutput(g, n, 0, x->dtype, std::nullopt);
    return Status::Ok();
  }
  if (axes->empty()) return NodeError(n, "axes must not be empty");
  int64_t out_rank = static_cast<int64_t>(x->shape->size() + axes->size());
  std::vector<bool> is_new(out_rank, false);
  for (int64_t a : *axes) {
    SURGE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(n, a, out_rank));
    if (is_new[axis]) return NodeError(n, "axis {} is repeated", a);
    is_new[axis] = true;
  }
  SymShape out;
  size_t src = 0;
  for (int64_t i = 0; i < out_rank; ++i) out.push_back(is_new[i] ? Dim(1) : (*x->shape)[src++]);
  SetOutput(g, n, 0, x->dtype, out);
  if (out.size() <= 1) {
    if (auto d = InputSymData(g, n, 0)) SetSymData(g, n, 0, std::move(*d));
  }
  return Status::Ok();
}

Status InferSqueeze(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  auto axes = AxesOf(g, n, 1);
  if (!x->shape || !axes) {
    SetOutput(g, n, 0, x->dtype, std::nullopt);
    return Status::Ok();
  }
  int64_t rank = static_cast<int64_t>(x->shape->size());
  std::vector<bool> drop(rank, false);
  if (axes->empty()) {
    for (int64_t i = 0; i < rank; ++i) drop[i] = (*x->shape)[i] == Dim(1);
  }
  for (int64_t a : *axes) {
    SURGE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(n, a, rank));
    const Dim& d = (*x->shape)[axis];
    if (d.IsStatic() && d.StaticValue() != 1) {
      return NodeError(n, "cannot squeeze axis {} of size {}", a, d.ToString());
    }
    drop[axis] = true;
  }
  SymShape out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!drop[i]) out.push_back((*x->shape)[i]);
  }
  SetOutput(g, n, 0, x->dtype, out);
  if (out.size() <= 1) {
    if (auto d = InputSymData(g, n, 0)) SetSymData(g, n, 0, std::move(*d));
  }
  return Status::Ok();
}

Status InferConcat(Graph& g, Node& n) {
  const Value* first = Input(g, n, 0);
  if (!n.HasAttr("axis")) return NodeError(n, "missing attribute 'axis'");
  std::optional<SymShape> out;
  int64_t axis = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value* v = Input(g, n, i);
    if (v == nullptr) continue;
    if (v->dtype != first->dtype && v->dtype != DType::kUndefined) {
      return NodeError(n, "input '{}' has dtype {}, expected {}", v->name, DTypeName(v->dtype),
                       DTypeName(first->dtype));
    }
    if (!v->shape) {
      SetOutput(g, n, 0, first->dtype, std::nullopt);
      return Status::Ok();
    }
    if (!out) {
      out = v->shape;
      SURGE_ASSIGN_OR_RETURN(
          axis, NormalizeAxis(n, n.GetInt("axis", 0), static_cast<int64_t>(out->size())));
      continue;
    }
    if (v->shape->size() != out->size()) {
      return NodeError(n, "input '{}' has rank {}, expected {}", v->name, v->shape->size(),
                       out->size());
    }
    for (size_t d = 0; d < out->size(); ++d) {
      if (static_cast<int64_t>(d) == axis) {
        (*out)[d] = (*out)[d] + (*v->shape)[d];
      } else if ((*out)[d] != (*v->shape)[d] && (*out)[d].IsStatic() && (*v->shape)[d].IsStatic()) {
        return NodeError(n, "input '{}' has shape {}, incompatible with {} outside axis {}",
                         v->name, SymShapeToString(*v->shape), SymShapeToString(*out), axis);
      }
    }
  }
  SetOutput(g, n, 0, first->dtype, out);
  if (out && out->size() == 1) {
    std::vector<Dim> data;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.input(i) < 0) continue;
      auto d = InputSymData(g, n, i);
      if (!d) return Status::Ok();
      data.insert(data.end(), d->begin(), d->end());
    }
    SetSymData(g, n, 0, std::move(data));
  }
  return Status::Ok();
}

Status InferReshape(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  const Value* s = Input(g, n, 1);
  SURGE_RETURN_IF_ERROR(RequireRank(n, *s, 1, "shape"));
  auto target = InputSymData(g, n, 1);
  if (!target) {
    SetOutput(g, n, 0, x->dtype, std::nullopt);
    return Status::Ok();
  }
  bool allow_zero = n.GetInt("allowzero", 0) != 0;
  SymShape out;
  int infer_at = -1;
  for (size_t i = 0; i < target->size(); ++i) {
    const Dim& t = (*target)[i];
    if (t.IsStatic() && t.StaticValue() == -1) {
      if (infer_at >= 0) return NodeError(n, "shape has more than one -1");
      infer_at = static_cast<int>(i);
      out.emplace_back(1);
    } else if (t.IsStatic() && t.StaticValue() == 0 && !allow_zero) {
      if (!x->shape || i >= x->shape->size()) {
        if (!x->shape) {
          SetOutput(g, n, 0, x->dtype, std::nullopt);
          return Status::Ok();
        }
        return NodeError(n, "shape copies dim {} of a rank-{} input", i, x->shape->size());
      }
      out.push_back((*x->shape)[i]);
    } else if (t.IsStatic() && t.StaticValue() < -1) {
      return NodeError(n, "invalid target dim {}", t.StaticValue());
    } else {
      out.push_back(t);
    }
  }
  if (infer_at >= 0) {
    if (!x->shape) {
      SetOutput(g, n, 0, x->dtype, std::nullopt);
      return Status::Ok();
    }
    Dim total = NumElements(*x->shape);
    Dim rest = NumElements(out);
    auto q = total.DivExact(rest);
    if (!q) {
      return NodeError(n, "cannot reshape {} to {}: {} is not divisible by {}",
                       SymShapeToString(*x->shape), SymShapeToString(*target), total.ToString(),
                       rest.ToString());
    }
    out[infer_at] = *q;
  } else if (x->shape) {
    Dim total = NumElements(*x->shape);
    Dim got = NumElements(out);
    if (total.IsStatic() && got.IsStatic() && total != got) {
      return NodeError(n, "cannot reshape {} ({} elements) to {}", SymShapeToString(*x->shape),
                       total.ToString(), SymShapeToString(out));
    }
  }
  SetOutput(g, n, 0, x->dtype, out);
  if (out.size() <= 1) {
    if (auto d = InputSymData(g, n, 0)) SetSymData(g, n, 0, std::move(*d));
  }
  return Status::Ok();
}

Status InferTranspose(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  if (!x->shape) {
    SetOutput(g, n, 0, x->dtype, std::nullopt);
    return Status::Ok();
  }
  int64_t rank = static_cast<int64_t>(x->shape->size());
  std::vector<int64_t> perm = n.GetInts("perm");
  if (perm.empty()) {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int64_t>(perm.size()) != rank) {
    return NodeError(n, "perm has {} entries for rank {}", perm.size(), rank);
  }
  std::vector<bool> seen(rank, false);
  SymShape out;
  for (int64_t p : perm) {
    SURGE_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(n, p, rank));
    if (seen[a]) return NodeError(n, "perm repeats axis {}", p);
    seen[a] = true;
    out.push_back((*x->shape)[a]);
  }
  SetOutput(g, n, 0, x->dtype, out);
  return Status::Ok();
}

// Length of x[start:end:step] along a dim, symbolically where possible.
std::optional<Dim> SliceLength(const Dim& d, const Dim& start_in, const Dim& end_in, int64_t step,
                               int64_t* static_start) {
  *static_start = -1;
  if (d.IsStatic() && start_in.IsStatic() && end_in.IsStatic()) {
    int64_t n = d.StaticValue(), s = start_in.StaticValue(), e = end_in.StaticValue();
    if (step > 0) {
      s = s < 0 ? std::max<int64_t>(0, s + n) : std::min(s, n);
      e = e < 0 ? std::max<int64_t>(0, e + n) : std::min(e, n);
      *static_start = s;
      return Dim(e > s ? (e - s + step - 1) / step : 0);
    }
    s = s < 0 ? std::max<int64_t>(-1, s + n) : std::min(s, n - 1);
    e = e < 0 ? std::max<int64_t>(-1, e + n) : std::min(e, n - 1);
    *static_start = s;
    return Dim(s > e ? (s - e + (-step) - 1) / (-step) : 0);
  }
  if (step == -1 && start_in.IsStatic() && end_in.IsStatic() &&
      (start_in.StaticValue() == -1 || start_in.StaticValue() >= kHugeIndex) &&
      end_in.StaticValue() <= -kHugeIndex) {
    return d;  // full reversal
  }
  if (step != 1) return std::nullopt;
  // Symbolic: resolve negative/huge static indices against d; a symbolic index is assumed to lie
  // within [0, d] (the profile bounds guarantee it for the exporters' patterns).
  auto resolve = [&](const Dim& i) -> Dim {
    if (!i.IsStatic()) return i;
    int64_t v = i.StaticValue();
    if (v >= kHugeIndex) return d;
    if (v < 0) return v <= -kHugeIndex ? Dim(0) : d + Dim(v);
    return i;
  };
  Dim s = resolve(start_in);
  Dim e = resolve(end_in);
  if (s.IsStatic()) *static_start = s.StaticValue();
  Dim len = e - s;
  if (len.IsStatic() && len.StaticValue() < 0) return Dim(0);
  return len;
}

Status InferSlice(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  auto starts = InputSymData(g, n, 1);
  auto ends = InputSymData(g, n, 2);
  std::optional<std::vector<int64_t>> axes;
  std::optional<std::vector<int64_t>> steps;
  if (n.input(3) >= 0) axes = InputStaticData(g, n, 3);
  if (n.input(4) >= 0) steps = InputStaticData(g, n, 4);
  bool unknown =
      !x->shape || !starts || !ends || (n.input(3) >= 0 && !axes) || (n.input(4) >= 0 && !steps);
  if (unknown) {
    SetOutput(g, n, 0, x->dtype, std::nullopt);
    return Status::Ok();
  }
  int64_t rank = static_cast<int64_t>(x->shape->size());
  size_t k = starts->size();
  if (ends->size() != k || (axes && axes->size() != k) || (steps && steps->size() != k)) {
    return NodeError(n, "starts/ends/axes/steps lengths differ");
  }
  SymShape out = *x->shape;
  std::vector<int64_t> first(rank, 0), step_of(rank, 1);
  bool data_ok = true;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < k; ++i) {
    int64_t a = axes ? (*axes)[i] : static_cast<int64_t>(i);
    SURGE_ASSIGN_OR_RETURN(a, NormalizeAxis(n, a, rank));
    if (seen[a]) return NodeError(n, "axis {} is repeated", a);
    seen[a] = true;
    int64_t step = steps ? (*steps)[i] : 1;
    if (step == 0) return NodeError(n, "step must not be 0");
    int64_t s0 = -1;
    auto len = SliceLength(out[a], (*starts)[i], (*ends)[i], step, &s0);
    if (!len) {
      SetOutput(g, n, 0, x->dtype, std::nullopt);
      return Status::Ok();
    }
    out[a] = *len;
    first[a] = s0;
    step_of[a] = step;
    if (s0 < 0 || !len->IsStatic()) data_ok = false;
  }
  SetOutput(g, n, 0, x->dtype, out);
  if (rank == 1 && data_ok) {
    if (auto d = InputSymData(g, n, 0)) {
      std::vector<Dim> picked;
      for (int64_t j = 0; j < out[0].StaticValue(); ++j) {
        int64_t idx = first[0] + j * step_of[0];
        if (idx < 0 || idx >= static_cast<int64_t>(d->size())) return Status::Ok();
        picked.push_back((*d)[idx]);
      }
      SetSymData(g, n, 0, std::move(picked));
    }
  }
  return Status::Ok();
}

Status InferExpand(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  const Value* s = Input(g, n, 1);
  SURGE_RETURN_IF_ERROR(RequireRank(n, *s, 1, "shape"));
  auto target = InputSymData(g, n, 1);
  if (!x->shape || !target) {
    SetOutput(g, n, 0, x->dtype, std::nullopt);
    return Status::Ok();
  }
  SURGE_ASSIGN_OR_RETURN(SymShape out, BroadcastShapes(n, *x->shape, *target));
  SetOutput(g, n, 0, x->dtype, out);
  if (out.size() <= 1 && out.size() >= 1 && out[0].IsStatic()) {
    auto d = InputSymData(g, n, 0);
    if (d && d->size() == 1) {
      SetSymData(g, n, 0, std::vector<Dim>(out[0].StaticValue(), (*d)[0]));
    }
  }
  return Status::Ok();
}

Status InferConstantOfShape(Graph& g, Node& n) {
  DType dtype = DType::kFloat32;
  std::optional<Dim> fill;
  if (const Tensor* v = n.GetTensor("value")) {
    if (v->numel() != 1) return NodeError(n, "'value' must hold one element");
    dtype = v->dtype();
    double d = v->GetDouble(0);
    if (d == static_cast<double>(static_cast<int64_t>(d))) fill = Dim(static_cast<int64_t>(d));
  } else {
    fill = Dim(0);
  }
  auto target = InputSymData(g, n, 0);
  if (!target) {
    SetOutput(g, n, 0, dtype, std::nullopt);
    return Status::Ok();
  }
  for (const Dim& d : *target) {
    if (d.IsStatic() && d.StaticValue() < 0) {
      return NodeError(n, "negative dimension {} in shape", d.StaticValue());
    }
  }
  SymShape out(target->begin(), target->end());
  SetOutput(g, n, 0, dtype, out);
  if (fill && out.size() <= 1) {
    Dim count = NumElements(out);
    if (count.IsStatic() && count.StaticValue() <= kMaxSymDataElements) {
      SetSymData(g, n, 0, std::vector<Dim>(count.StaticValue(), *fill));
    }
  }
  return Status::Ok();
}

Status InferRange(Graph& g, Node& n) {
  const Value* start_v = Input(g, n, 0);
  for (size_t i = 0; i < 3; ++i) {
    const Value* v = Input(g, n, i);
    if (v->shape && !v->shape->empty() && NumElements(*v->shape) != Dim(1)) {
      return NodeError(n, "input '{}' must be a scalar, has shape {}", v->name,
                       SymShapeToString(*v->shape));
    }
  }
  auto s = InputSymData(g, n, 0);
  auto l = InputSymData(g, n, 1);
  auto d = InputStaticData(g, n, 2);
  if (!s || !l || !d || s->size() != 1 || l->size() != 1 || d->size() != 1) {
    SetOutput(g, n, 0, start_v->dtype, std::nullopt);
    return Status::Ok();
  }
  int64_t delta = (*d)[0];
  if (delta == 0) return NodeError(n, "delta must not be 0");
  Dim start = (*s)[0], limit = (*l)[0];
  if (start.IsStatic() && limit.IsStatic()) {
    int64_t a = start.StaticValue(), b = limit.StaticValue();
    int64_t len = std::max<int64_t>(0, (b - a + delta + (delta > 0 ? -1 : 1)) / delta);
    SetOutput(g, n, 0, start_v->dtype, SymShape{Dim(len)});
    if (len <= kMaxSymDataElements) {
      std::vector<Dim> data;
      for (int64_t i = 0; i < len; ++i) data.emplace_back(a + i * delta);
      SetSymData(g, n, 0, std::move(data));
    }
    return Status::Ok();
  }
  if (delta == 1 || delta == -1) {
    SetOutput(g, n, 0, start_v->dtype, SymShape{delta == 1 ? limit - start : start - limit});
    return Status::Ok();
  }
  SetOutput(g, n, 0, start_v->dtype, std::nullopt);
  return Status::Ok();
}

Status InferFlatten(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  if (!x->shape) {
    SetOutput(g, n, 0, x->dtype, std::nullopt);
    return Status::Ok();
  }
  int64_t rank = static_cast<int64_t>(x->shape->size());
  int64_t axis = n.GetInt("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank)
    return NodeError(n, "axis {} is out of range for rank {}", axis, rank);
  SymShape lo(x->shape->begin(), x->shape->begin() + axis);
  SymShape hi(x->shape->begin() + axis, x->shape->end());
  SetOutput(g, n, 0, x->dtype, SymShape{NumElements(lo), NumElements(hi)});
  return Status::Ok();
}

Status InferSplit(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  size_t outs = n.outputs.size();
  auto unknown = [&] {
    for (size_t i = 0; i < outs; ++i) SetOutput(g, n, i, x->dtype, std::nullopt);
    return Status::Ok();
  };
  if (!x->shape) return unknown();
  int64_t rank = static_cast<int64_t>(x->shape->size());
  SURGE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(n, n.GetInt("axis", 0), rank));
  const Dim& d = (*x->shape)[axis];
  std::vector<Dim> sizes;
  if (n.input(1) >= 0 || n.HasAttr("split")) {
    std::optional<std::vector<int64_t>> split =
        n.input(1) >= 0 ? InputStaticData(g, n, 1) : std::optional(n.GetInts("split"));
    if (!split) return unknown();
    if (split->size() != outs) {
      return NodeError(n, "split has {} entries for {} outputs", split->size(), outs);
    }
    Dim total(0);
    for (int64_t v : *split) {
      sizes.emplace_back(v);
      total = total + Dim(v);
    }
    if (d.IsStatic() && total != d) {
      return NodeError(n, "split sizes sum to {}, axis has {}", total.ToString(), d.ToString());
    }
  } else {
    int64_t parts = n.GetInt("num_outputs", static_cast<int64_t>(outs));
    if (parts != static_cast<int64_t>(outs)) {
      return NodeError(n, "num_outputs {} but {} outputs", parts, outs);
    }
    if (d.IsStatic()) {
      int64_t total = d.StaticValue();
      int64_t chunk = (total + parts - 1) / parts;
      for (int64_t i = 0; i < parts; ++i) {
        sizes.emplace_back(std::max<int64_t>(0, std::min(chunk, total - i * chunk)));
      }
    } else {
      auto q = d.DivExact(Dim(parts));
      if (!q) return unknown();
      sizes.assign(parts, *q);
    }
  }
  for (size_t i = 0; i < outs; ++i) {
    SymShape s = *x->shape;
    s[axis] = sizes[i];
    SetOutput(g, n, i, x->dtype, s);
  }
  return Status::Ok();
}

Status InferTile(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  auto reps = InputSymData(g, n, 1);
  if (!x->shape || !reps) {
    SetOutput(g, n, 0, x->dtype, std::nullopt);
    return Status::Ok();
  }
  if (reps->size() != x->shape->size()) {
    return NodeError(n, "repeats has {} entries for rank {}", reps->size(), x->shape->size());
  }
  SymShape out;
  for (size_t i = 0; i < reps->size(); ++i) out.push_back((*x->shape)[i] * (*reps)[i]);
  SetOutput(g, n, 0, x->dtype, out);
  return Status::Ok();
}

Status InferIdentity(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  SetOutput(g, n, 0, x->dtype, x->shape);
  if (auto d = InputSymData(g, n, 0)) SetSymData(g, n, 0, std::move(*d));
  return Status::Ok();
}

Status InferConstant(Graph& g, Node& n) {
  if (const Tensor* t = n.GetTensor("value")) {
    SetOutput(g, n, 0, t->dtype(), StaticShape(t->shape()));
    if (t->rank() <= 1 && t->numel() <= kMaxSymDataElements &&
        (t->dtype() == DType::kInt64 || t->dtype() == DType::kInt32)) {
      std::vector<Dim> data;
      for (int64_t i = 0; i < t->numel(); ++i) data.emplace_back(t->GetInt(i));
      SetSymData(g, n, 0, std::move(data));
    }
    return Status::Ok();
  }
  auto it = n.attrs.find("value_int");
  if (it != n.attrs.end()) {
    SetOutput(g, n, 0, DType::kInt64, SymShape{});
    SetSymData(g, n, 0, {Dim(n.GetInt("value_int", 0))});
    return Status::Ok();
  }
  if (n.HasAttr("value_ints")) {
    auto v = n.GetInts("value_ints");
    SetOutput(g, n, 0, DType::kInt64, SymShape{Dim(static_cast<int64_t>(v.size()))});
    SetSymData(g, n, 0, std::vector<Dim>(v.begin(), v.end()));
    return Status::Ok();
  }
  if (n.HasAttr("value_float")) {
    SetOutput(g, n, 0, DType::kFloat32, SymShape{});
    return Status::Ok();
  }
  if (n.HasAttr("value_floats")) {
    SetOutput(g, n, 0, DType::kFloat32,
              SymShape{Dim(static_cast<int64_t>(n.GetFloats("value_floats").size()))});
    return Status::Ok();
  }
  return NodeError(n, "needs one of value, value_int(s), value_float(s)");
}

Status InferSameAsInput(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  SetOutput(g, n, 0, x->dtype, x->shape);
  return Status::Ok();
}

Status InferDropout(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  SetOutput(g, n, 0, x->dtype, x->shape);
  SetOutput(g, n, 1, DType::kBool, x->shape);
  return Status::Ok();
}

}  // namespace

void RegisterShapeOps() {
  Define("", "Shape", 1, 1, 1, 1, InferShape);
  Define("", "Size", 1, 1, 1, 1, InferSize);
  Define("", "Gather", 2, 2, 1, 1, InferGather);
  Define("", "GatherElements", 2, 2, 1, 1, InferGatherElements);
  Define("", "GatherND", 2, 2, 1, 1, InferGatherND);
  Define("", "Unsqueeze", 1, 2, 1, 1, InferUnsqueeze);
  Define("", "Squeeze", 1, 2, 1, 1, InferSqueeze);
  Define("", "Concat", 1, -1, 1, 1, InferConcat);
  Define("", "Reshape", 2, 2, 1, 1, InferReshape);
  Define("", "Transpose", 1, 1, 1, 1, InferTranspose);
  Define("", "Slice", 3, 5, 1, 1, InferSlice);
  Define("", "Expand", 2, 2, 1, 1, InferExpand);
  Define("", "ConstantOfShape", 1, 1, 1, 1, InferConstantOfShape);
  Define("", "Range", 3, 3, 1, 1, InferRange);
  Define("", "Flatten", 1, 1, 1, 1, InferFlatten);
  Define("", "Split", 1, 2, 1, kMaxSplitOutputs, InferSplit);
  Define("", "Tile", 2, 2, 1, 1, InferTile);
  Define("", "Identity", 1, 1, 1, 1, InferIdentity);
  Define("", "Constant", 0, 0, 1, 1, InferConstant);
  Define("", "Trilu", 1, 2, 1, 1, InferSameAsInput);
  Define("", "CumSum", 2, 2, 1, 1, InferSameAsInput);
  Define("", "Dropout", 1, 3, 1, 2, InferDropout);
}

}  // namespace surge::engine::ir::ops
