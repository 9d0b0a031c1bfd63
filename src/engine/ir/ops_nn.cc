// Neural-network ONNX ops: MatMul, Gemm, Softmax/LogSoftmax, LayerNormalization, reductions,
// ArgMax/ArgMin.
#include <algorithm>

#include "engine/ir/ops_common.h"

namespace surge::engine::ir::ops {
namespace {

Status InferMatMul(Graph& g, Node& n) {
  const Value* a = Input(g, n, 0);
  const Value* b = Input(g, n, 1);
  if (a->dtype != DType::kUndefined && b->dtype != DType::kUndefined && a->dtype != b->dtype) {
    return NodeError(n, "input dtypes differ: {} and {}", DTypeName(a->dtype), DTypeName(b->dtype));
  }
  if (!a->shape || !b->shape) {
    SetOutput(g, n, 0, a->dtype, std::nullopt);
    return Status::Ok();
  }
  SymShape sa = *a->shape, sb = *b->shape;
  if (sa.empty() || sb.empty()) return NodeError(n, "inputs must have rank >= 1");
  bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) sa.insert(sa.begin(), Dim(1));
  if (vb) sb.push_back(Dim(1));
  const Dim& ka = sa.back();
  const Dim& kb = sb[sb.size() - 2];
  if (ka != kb && ka.IsStatic() && kb.IsStatic()) {
    return NodeError(n, "inner dimensions differ: {} x {}", SymShapeToString(*a->shape),
                     SymShapeToString(*b->shape));
  }
  SymShape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  SURGE_ASSIGN_OR_RETURN(SymShape out, BroadcastShapes(n, ba, bb));
  if (!va) out.push_back(sa[sa.size() - 2]);
  if (!vb) out.push_back(sb.back());
  SetOutput(g, n, 0, a->dtype, out);
  return Status::Ok();
}

Status InferGemm(Graph& g, Node& n) {
  const Value* a = Input(g, n, 0);
  const Value* b = Input(g, n, 1);
  if (!a->shape || !b->shape) {
    SetOutput(g, n, 0, a->dtype, std::nullopt);
    return Status::Ok();
  }
  if (a->shape->size() != 2 || b->shape->size() != 2) {
    return NodeError(n, "A and B must be 2-D, got {} and {}", SymShapeToString(*a->shape),
                     SymShapeToString(*b->shape));
  }
  bool ta = n.GetInt("transA", 0) != 0, tb = n.GetInt("transB", 0) != 0;
  Dim m = (*a->shape)[ta ? 1 : 0], ka = (*a->shape)[ta ? 0 : 1];
  Dim kb = (*b->shape)[tb ? 1 : 0], nn = (*b->shape)[tb ? 0 : 1];
  if (ka != kb && ka.IsStatic() && kb.IsStatic()) {
    return NodeError(n, "inner dimensions differ: {} vs {}", ka.ToString(), kb.ToString());
  }
  SymShape out{m, nn};
  if (const Value* c = Input(g, n, 2); c != nullptr && c->shape) {
    SURGE_ASSIGN_OR_RETURN(SymShape bc, BroadcastShapes(n, out, *c->shape));
    if (bc != out) {
      return NodeError(n, "C of shape {} does not broadcast to {}", SymShapeToString(*c->shape),
                       SymShapeToString(out));
    }
  }
  SetOutput(g, n, 0, a->dtype, out);
  return Status::Ok();
}

Status InferSoftmax(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  if (x->shape) {
    SURGE_RETURN_IF_ERROR(
        NormalizeAxis(n, n.GetInt("axis", -1), static_cast<int64_t>(x->shape->size())).status());
  }
  SetOutput(g, n, 0, x->dtype, x->shape);
  return Status::Ok();
}

Status InferLayerNormalization(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  SetOutput(g, n, 0, x->dtype, x->shape);
  if (!x->shape) {
    SetOutput(g, n, 1, DType::kFloat32, std::nullopt);
    SetOutput(g, n, 2, DType::kFloat32, std::nullopt);
    return Status::Ok();
  }
  int64_t rank = static_cast<int64_t>(x->shape->size());
  SURGE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(n, n.GetInt("axis", -1), rank));
  const Value* scale = Input(g, n, 1);
  if (scale->shape && scale->shape->size() > static_cast<size_t>(rank - axis)) {
    return NodeError(n, "scale of shape {} does not match normalised dims of {}",
                     SymShapeToString(*scale->shape), SymShapeToString(*x->shape));
  }
  SymShape stat = *x->shape;
  for (int64_t i = axis; i < rank; ++i) stat[i] = Dim(1);
  DType stash = DType::kFloat32;
  if (n.HasAttr("stash_type")) {
    auto st = DTypeFromOnnx(static_cast<int>(n.GetInt("stash_type", 1)));
    if (st.ok()) stash = *st;
  }
  SetOutput(g, n, 1, stash, stat);
  SetOutput(g, n, 2, stash, stat);
  return Status::Ok();
}

// Reductions: axes from the attribute (ReduceMean/Max/Min/Prod before opset 18) or input 1.
Status InferReduce(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  if (!x->shape) {
    SetOutput(g, n, 0, x->dtype, std::nullopt);
    return Status::Ok();
  }
  int64_t rank = static_cast<int64_t>(x->shape->size());
  std::vector<int64_t> axes;
  if (n.input(1) >= 0) {
    auto d = InputStaticData(g, n, 1);
    if (!d) {
      SetOutput(g, n, 0, x->dtype, std::nullopt);
      return Status::Ok();
    }
    axes = *d;
  } else {
    axes = n.GetInts("axes");
  }
  bool keep = n.GetInt("keepdims", 1) != 0;
  std::vector<bool> reduce(rank, false);
  if (axes.empty()) {
    if (n.GetInt("noop_with_empty_axes", 0) != 0) {
      SetOutput(g, n, 0, x->dtype, x->shape);
      return Status::Ok();
    }
    reduce.assign(rank, true);
  }
  for (int64_t a : axes) {
    SURGE_ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(n, a, rank));
    reduce[ax] = true;
  }
  SymShape out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduce[i]) {
      out.push_back((*x->shape)[i]);
    } else if (keep) {
      out.emplace_back(1);
    }
  }
  SetOutput(g, n, 0, x->dtype, out);
  return Status::Ok();
}

Status InferArgReduce(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  if (!x->shape) {
    SetOutput(g, n, 0, DType::kInt64, std::nullopt);
    return Status::Ok();
  }
  int64_t rank = static_cast<int64_t>(x->shape->size());
  SURGE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(n, n.GetInt("axis", 0), rank));
  SymShape out = *x->shape;
  if (n.GetInt("keepdims", 1) != 0) {
    out[axis] = Dim(1);
  } else {
    out.erase(out.begin() + axis);
  }
  SetOutput(g, n, 0, DType::kInt64, out);
  return Status::Ok();
}

}  // namespace

void RegisterNnOps() {
  Define("", "MatMul", 2, 2, 1, 1, InferMatMul);
  Define("", "Gemm", 2, 3, 1, 1, InferGemm);
  Define("", "Softmax", 1, 1, 1, 1, InferSoftmax);
  Define("", "LogSoftmax", 1, 1, 1, 1, InferSoftmax);
  Define("", "LayerNormalization", 2, 3, 1, 3, InferLayerNormalization);
  for (std::string_view op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
                              "ReduceL2", "ReduceSumSquare"}) {
    Define("", op, 1, 2, 1, 1, InferReduce);
  }
  Define("", "ArgMax", 1, 1, 1, 1, InferArgReduce);
  Define("", "ArgMin", 1, 1, 1, 1, InferArgReduce);
}

}  // namespace surge::engine::ir::ops
