// Fused Surge ops (domain "surge"); signatures in op_schema.h.
#include "engine/ir/ops_common.h"

namespace surge::engine::ir::ops {
namespace {

Status RequireShape(const Node& n, const Value* v, size_t rank, std::string_view what) {
  if (v->shape && v->shape->size() != rank) {
    return NodeError(n, "{} '{}' must have rank {}, has shape {}", what, v->name, rank,
                     SymShapeToString(*v->shape));
  }
  return Status::Ok();
}

// A 1-D parameter whose length must equal `h` (when both are known and static).
Status RequireVector(const Node& n, const Value* v, const std::optional<Dim>& h,
                     std::string_view what) {
  if (v == nullptr || !v->shape) return Status::Ok();
  SURGE_RETURN_IF_ERROR(RequireShape(n, v, 1, what));
  if (h && (*v->shape)[0] != *h && h->IsStatic() && (*v->shape)[0].IsStatic()) {
    return NodeError(n, "{} '{}' has length {}, expected {}", what, v->name,
                     (*v->shape)[0].ToString(), h->ToString());
  }
  return Status::Ok();
}

std::optional<Dim> LastDim(const Value* v) {
  if (v == nullptr || !v->shape || v->shape->empty()) return std::nullopt;
  return v->shape->back();
}

Status InferLinear(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  const Value* w = Input(g, n, 1);
  std::string act = n.GetString("activation", "none");
  if (act != "none" && act != "gelu" && act != "gelu_tanh" && act != "tanh" && act != "relu") {
    return NodeError(n, "unknown activation '{}' (none, gelu, gelu_tanh, tanh, relu)", act);
  }
  SURGE_RETURN_IF_ERROR(RequireShape(n, w, 2, "weight"));
  if (!x->shape || !w->shape) {
    SetOutput(g, n, 0, x->dtype, std::nullopt);
    return Status::Ok();
  }
  if (x->shape->empty()) return NodeError(n, "input must have rank >= 1");
  const Dim& k = x->shape->back();
  if (k != (*w->shape)[0] && k.IsStatic() && (*w->shape)[0].IsStatic()) {
    return NodeError(n, "input {} does not match weight [K,N] {}", SymShapeToString(*x->shape),
                     SymShapeToString(*w->shape));
  }
  Dim nn = (*w->shape)[1];
  SURGE_RETURN_IF_ERROR(RequireVector(n, Input(g, n, 2), nn, "bias"));
  SymShape out = *x->shape;
  out.back() = nn;
  if (const Value* r = Input(g, n, 3); r != nullptr && r->shape) {
    SURGE_ASSIGN_OR_RETURN(SymShape b, BroadcastShapes(n, out, *r->shape));
    out = b;
  }
  SetOutput(g, n, 0, x->dtype, out);
  return Status::Ok();
}

Status InferGelu(Graph& g, Node& n) {
  std::string approx = n.GetString("approximate", "none");
  if (approx != "none" && approx != "tanh") {
    return NodeError(n, "unknown approximate '{}' (none, tanh)", approx);
  }
  const Value* x = Input(g, n, 0);
  SetOutput(g, n, 0, x->dtype, x->shape);
  return Status::Ok();
}

Status InferL2Normalize(Graph& g, Node& n) {
  SURGE_RETURN_IF_ERROR(L2NormalizeMaxMode(n).status());
  const Value* x = Input(g, n, 0);
  if (x->shape && x->shape->empty()) return NodeError(n, "input must have rank >= 1");
  SetOutput(g, n, 0, x->dtype, x->shape);
  return Status::Ok();
}

Status InferLayerNorm(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  auto h = LastDim(x);
  SURGE_RETURN_IF_ERROR(RequireVector(n, Input(g, n, 1), h, "gamma"));
  SURGE_RETURN_IF_ERROR(RequireVector(n, Input(g, n, 2), h, "beta"));
  SetOutput(g, n, 0, x->dtype, x->shape);
  return Status::Ok();
}

Status InferSkipLayerNorm(Graph& g, Node& n) {
  const Value* x = Input(g, n, 0);
  const Value* skip = Input(g, n, 1);
  std::optional<SymShape> shape = x->shape;
  if (x->shape && skip->shape) {
    SURGE_ASSIGN_OR_RETURN(SymShape s, BroadcastShapes(n, *x->shape, *skip->shape));
    shape = s;
  }
  std::optional<Dim> h;
  if (shape && !shape->empty()) h = shape->back();
  SURGE_RETURN_IF_ERROR(RequireVector(n, Input(g, n, 2), h, "gamma"));
  SURGE_RETURN_IF_ERROR(RequireVector(n, Input(g, n, 3), h, "beta"));
  SURGE_RETURN_IF_ERROR(RequireVector(n, Input(g, n, 4), h, "bias"));
  SetOutput(g, n, 0, x->dtype, shape);
  SetOutput(g, n, 1, x->dtype, shape);
  return Status::Ok();
}

// EmbedLayerNorm(input_ids, token_type_ids?, position_ids?, word_emb, pos_emb, type_emb?, gamma,
//                beta, attention_mask?)
Status InferEmbedLayerNorm(Graph& g, Node& n) {
  const Value* ids = Input(g, n, 0);
  const Value* word = Input(g, n, 3);
  const Value* pos = Input(g, n, 4);
  if (word == nullptr || pos == nullptr || Input(g, n, 6) == nullptr || Input(g, n, 7) == nullptr) {
    return NodeError(n, "word_emb, pos_emb, gamma and beta are required");
  }
  std::string mode = n.GetString("position_mode", "arange");
  if (mode != "arange" && mode != "roberta") {
    return NodeError(n, "unknown position_mode '{}' (arange, roberta)", mode);
  }
  SURGE_RETURN_IF_ERROR(RequireShape(n, ids, 2, "input_ids"));
  SURGE_RETURN_IF_ERROR(RequireShape(n, word, 2, "word_emb"));
  SURGE_RETURN_IF_ERROR(RequireShape(n, pos, 2, "pos_emb"));
  for (size_t i : {1, 2, 8}) {
    const Value* v = Input(g, n, i);
    if (v == nullptr || !v->shape || !ids->shape) continue;
    if (*v->shape != *ids->shape) {
      return NodeError(n, "'{}' has shape {}, expected the input_ids shape {}", v->name,
                       SymShapeToString(*v->shape), SymShapeToString(*ids->shape));
    }
  }
  std::optional<Dim> h = LastDim(word);
  if (pos->shape && h && (*pos->shape)[1] != *h) {
    return NodeError(n, "pos_emb {} and word_emb {} differ in width", SymShapeToString(*pos->shape),
                     SymShapeToString(*word->shape));
  }
  if (const Value* t = Input(g, n, 5); t != nullptr) {
    SURGE_RETURN_IF_ERROR(RequireShape(n, t, 2, "type_emb"));
    if (t->shape && h && (*t->shape)[1] != *h) {
      return NodeError(n, "type_emb {} and word_emb {} differ in width",
                       SymShapeToString(*t->shape), SymShapeToString(*word->shape));
    }
  }
  SURGE_RETURN_IF_ERROR(RequireVector(n, Input(g, n, 6), h, "gamma"));
  SURGE_RETURN_IF_ERROR(RequireVector(n, Input(g, n, 7), h, "beta"));
  if (!ids->shape || !h) {
    SetOutput(g, n, 0, word->dtype, std::nullopt);
    return Status::Ok();
  }
  SetOutput(g, n, 0, word->dtype, SymShape{(*ids->shape)[0], (*ids->shape)[1], *h});
  return Status::Ok();
}

Status InferAttention(Graph& g, Node& n) {
  const Value* qkv = Input(g, n, 0);
  int64_t heads = n.GetInt("num_heads", 0);
  if (heads <= 0) return NodeError(n, "num_heads must be positive, got {}", heads);
  SURGE_RETURN_IF_ERROR(RequireShape(n, qkv, 3, "QKV"));
  if (!qkv->shape) {
    SetOutput(g, n, 0, qkv->dtype, std::nullopt);
    return Status::Ok();
  }
  const SymShape& s = *qkv->shape;
  auto h = s[2].DivExact(Dim(3));
  if (!h) return NodeError(n, "QKV width {} is not a multiple of 3", s[2].ToString());
  if (h->IsStatic() && h->StaticValue() % heads != 0) {
    return NodeError(n, "hidden size {} is not a multiple of num_heads {}", h->StaticValue(),
                     heads);
  }
  if (const Value* m = Input(g, n, 1); m != nullptr && m->shape) {
    SURGE_RETURN_IF_ERROR(RequireShape(n, m, 2, "mask"));
    if ((*m->shape)[0] != s[0] || (*m->shape)[1] != s[1]) {
      if ((*m->shape)[0].IsStatic() && s[0].IsStatic() && (*m->shape)[1].IsStatic() &&
          s[1].IsStatic()) {
        return NodeError(n, "mask shape {} does not match [B,S] of QKV {}",
                         SymShapeToString(*m->shape), SymShapeToString(s));
      }
    }
  }
  SetOutput(g, n, 0, qkv->dtype, SymShape{s[0], s[1], *h});
  return Status::Ok();
}

}  // namespace

void RegisterFusedOps() {
  Define(kSurgeDomain, "Linear", 2, 4, 1, 1, InferLinear);
  Define(kSurgeDomain, "Gelu", 1, 1, 1, 1, InferGelu);
  Define(kSurgeDomain, "LayerNorm", 3, 3, 1, 1, InferLayerNorm);
  Define(kSurgeDomain, "L2Normalize", 1, 1, 1, 1, InferL2Normalize);
  Define(kSurgeDomain, "SkipLayerNorm", 4, 5, 1, 2, InferSkipLayerNorm);
  Define(kSurgeDomain, "EmbedLayerNorm", 5, 9, 1, 1, InferEmbedLayerNorm);
  Define(kSurgeDomain, "Attention", 1, 2, 1, 1, InferAttention);
}

}  // namespace surge::engine::ir::ops

namespace surge::engine::ir {

Result<bool> L2NormalizeMaxMode(const Node& n) {
  const std::string mode = n.GetString("eps_mode", "add");
  if (mode != "add" && mode != "max") {
    return ops::NodeError(n, "unknown eps_mode '{}' (valid: add, max)", mode);
  }
  if (n.GetFloat("epsilon", 1e-12) < 0) return ops::NodeError(n, "epsilon must be >= 0");
  return mode == "max";
}

}  // namespace surge::engine::ir
