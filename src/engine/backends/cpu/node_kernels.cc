#include "engine/backends/cpu/node_kernels.h"

#include <cmath>

#include "engine/backends/cpu/kernels.h"

namespace surge::engine::cpu {
namespace {

std::string Label(const ir::Node& node) {
  return fmt::format("{}::{} '{}'", node.domain.empty() ? "onnx" : node.domain, node.op_type,
                     node.name);
}

const Tensor* In(std::span<const Tensor* const> in, size_t i) {
  return i < in.size() && in[i] != nullptr && in[i]->defined() ? in[i] : nullptr;
}

Result<const Tensor*> Need(const ir::Node& node, std::span<const Tensor* const> in, size_t i,
                           std::string_view what) {
  const Tensor* t = In(in, i);
  if (t == nullptr)
    return InvalidArgumentError("{}: input {} ({}) is missing", Label(node), i, what);
  return t;
}

Status F32(const ir::Node& node, const Tensor& t, std::string_view what) {
  if (t.dtype() != DType::kFloat32) {
    return InvalidArgumentError("{}: {} must be float32, got {}", Label(node), what,
                                DTypeName(t.dtype()));
  }
  return Status::Ok();
}

Status Vec(const ir::Node& node, const Tensor* t, int64_t n, std::string_view what) {
  if (t == nullptr) return Status::Ok();
  SURGE_RETURN_IF_ERROR(F32(node, *t, what));
  if (t->rank() != 1 || t->dim(0) != n) {
    return InvalidArgumentError("{}: {} must have shape [{}], got {}", Label(node), what, n,
                                ShapeToString(t->shape()));
  }
  return Status::Ok();
}

// Ids as int64 (int32 ids are widened into `keep`).
const int64_t* Int64Ids(const Tensor& t, Tensor* keep) {
  if (t.dtype() == DType::kInt64) return t.data_as<int64_t>();
  *keep = Tensor(DType::kInt64, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) keep->data_as<int64_t>()[i] = t.GetInt(i);
  return keep->data_as<int64_t>();
}

}  // namespace

Result<Activation> ParseActivation(std::string_view name) {
  if (name == "none") return Activation::kNone;
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_tanh") return Activation::kGeluTanh;
  if (name == "tanh") return Activation::kTanh;
  if (name == "relu") return Activation::kRelu;
  return InvalidArgumentError("unknown activation '{}' (valid: none, gelu, gelu_tanh, tanh, relu)",
                              name);
}

namespace {

struct LinearOperands {
  const Tensor* x = nullptr;
  const Tensor* bias = nullptr;
  const Tensor* residual = nullptr;
  Shape y_shape;
  int64_t m = 0;
};

// The checks every Linear kernel makes: X ends in K (float32, or int8 when `x_may_be_int8`), bias
// [N], residual of Y's shape.
Result<LinearOperands> LinearInputs(const ir::Node& node, const LinearSpec& spec,
                                    std::span<const Tensor* const> in, bool x_may_be_int8) {
  LinearOperands o;
  SURGE_ASSIGN_OR_RETURN(o.x, Need(node, in, 0, "X"));
  if (!(x_may_be_int8 && o.x->dtype() == DType::kInt8)) SURGE_RETURN_IF_ERROR(F32(node, *o.x, "X"));
  if (o.x->rank() < 1 || o.x->dim(o.x->rank() - 1) != spec.k) {
    return InvalidArgumentError("{}: X {} must end in K={}", Label(node),
                                ShapeToString(o.x->shape()), spec.k);
  }
  o.bias = spec.has_bias ? In(in, 2) : nullptr;
  o.residual = spec.has_residual ? In(in, 3) : nullptr;
  if (spec.has_bias && o.bias == nullptr) {
    return InvalidArgumentError("{}: bias is missing", Label(node));
  }
  SURGE_RETURN_IF_ERROR(Vec(node, o.bias, spec.n, "B"));
  o.y_shape = o.x->shape();
  o.y_shape.back() = spec.n;
  if (spec.has_residual) {
    if (o.residual == nullptr) return InvalidArgumentError("{}: residual is missing", Label(node));
    SURGE_RETURN_IF_ERROR(F32(node, *o.residual, "R"));
    if (o.residual->shape() != o.y_shape) {
      return InvalidArgumentError("{}: residual {} must have shape {}", Label(node),
                                  ShapeToString(o.residual->shape()), ShapeToString(o.y_shape));
    }
  }
  o.m = spec.k ? o.x->numel() / spec.k : 0;
  return o;
}

}  // namespace

Status RunLinearNode(const ir::Node& node, const LinearKernel& kernel,
                     std::span<const Tensor* const> in, const OutputAllocator& alloc,
                     std::vector<Tensor>* out) {
  SURGE_ASSIGN_OR_RETURN(LinearOperands o, LinearInputs(node, kernel.spec(), in, false));
  Tensor y = alloc(0, o.y_shape);
  SURGE_RETURN_IF_ERROR(kernel
                            .Run(o.x->data_as<float>(), o.bias ? o.bias->data_as<float>() : nullptr,
                                 o.residual ? o.residual->data_as<float>() : nullptr,
                                 y.data_as<float>(), o.m)
                            .WithContext(Label(node)));
  out->push_back(std::move(y));
  return Status::Ok();
}

Status RunQuantLinearNode(const ir::Node& node, const QuantLinearKernel& kernel,
                          std::span<const Tensor* const> in, const OutputAllocator& alloc,
                          AlignedBuffer* scratch, std::vector<Tensor>* out) {
  const bool int8 = kernel.spec().precision == LinearPrecision::kInt8;
  SURGE_ASSIGN_OR_RETURN(LinearOperands o, LinearInputs(node, kernel.spec().base, in, int8));
  Tensor y = alloc(0, o.y_shape);
  const DType want = kernel.int8_output() ? DType::kInt8 : DType::kFloat32;
  if (y.dtype() != want) {
    return InternalError("{}: output buffer is {}, the kernel writes {}", Label(node),
                         DTypeName(y.dtype()), DTypeName(want));
  }
  SURGE_RETURN_IF_ERROR(kernel
                            .Run(o.x->data(), o.x->dtype() == DType::kInt8,
                                 o.bias ? o.bias->data_as<float>() : nullptr,
                                 o.residual ? o.residual->data_as<float>() : nullptr, y.data(), o.m,
                                 scratch)
                            .WithContext(Label(node)));
  out->push_back(std::move(y));
  return Status::Ok();
}

Status RunLayerNormNode(Isa isa, const ir::Node& node, std::span<const Tensor* const> in,
                        const OutputAllocator& alloc, std::vector<Tensor>* out) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, Need(node, in, 0, "X"));
  SURGE_ASSIGN_OR_RETURN(const Tensor* g, Need(node, in, 1, "gamma"));
  SURGE_ASSIGN_OR_RETURN(const Tensor* b, Need(node, in, 2, "beta"));
  SURGE_RETURN_IF_ERROR(F32(node, *x, "X"));
  if (x->rank() < 1) return InvalidArgumentError("{}: X must have rank >= 1", Label(node));
  const int64_t h = x->dim(x->rank() - 1);
  SURGE_RETURN_IF_ERROR(Vec(node, g, h, "gamma"));
  SURGE_RETURN_IF_ERROR(Vec(node, b, h, "beta"));
  Tensor y = alloc(0, x->shape());
  LayerNormKernel(isa, x->data_as<float>(), g->data_as<float>(), b->data_as<float>(),
                  y.data_as<float>(), h ? x->numel() / h : 0, h,
                  static_cast<float>(node.GetFloat("epsilon", 1e-5)));
  out->push_back(std::move(y));
  return Status::Ok();
}

Status RunSkipLayerNormNode(Isa isa, const ir::Node& node, std::span<const Tensor* const> in,
                            const OutputAllocator& alloc, std::vector<Tensor>* out) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, Need(node, in, 0, "X"));
  SURGE_ASSIGN_OR_RETURN(const Tensor* skip, Need(node, in, 1, "skip"));
  SURGE_ASSIGN_OR_RETURN(const Tensor* g, Need(node, in, 2, "gamma"));
  SURGE_ASSIGN_OR_RETURN(const Tensor* b, Need(node, in, 3, "beta"));
  const Tensor* bias = In(in, 4);
  SURGE_RETURN_IF_ERROR(F32(node, *x, "X"));
  SURGE_RETURN_IF_ERROR(F32(node, *skip, "skip"));
  if (x->rank() < 1 || skip->shape() != x->shape()) {
    return InvalidArgumentError("{}: skip {} must have the shape of X {}", Label(node),
                                ShapeToString(skip->shape()), ShapeToString(x->shape()));
  }
  const int64_t h = x->dim(x->rank() - 1);
  SURGE_RETURN_IF_ERROR(Vec(node, g, h, "gamma"));
  SURGE_RETURN_IF_ERROR(Vec(node, b, h, "beta"));
  SURGE_RETURN_IF_ERROR(Vec(node, bias, h, "bias"));
  Tensor y = alloc(0, x->shape());
  Tensor sum;
  if (node.outputs.size() > 1 && node.outputs[1] >= 0) sum = alloc(1, x->shape());
  SkipLayerNormKernel(isa, x->data_as<float>(), skip->data_as<float>(),
                      bias ? bias->data_as<float>() : nullptr, g->data_as<float>(),
                      b->data_as<float>(), y.data_as<float>(),
                      sum.defined() ? sum.data_as<float>() : nullptr, h ? x->numel() / h : 0, h,
                      static_cast<float>(node.GetFloat("epsilon", 1e-5)));
  out->push_back(std::move(y));
  if (sum.defined()) out->push_back(std::move(sum));
  return Status::Ok();
}

Status RunEmbedLayerNormNode(Isa isa, const ir::Node& node, std::span<const Tensor* const> in,
                             const OutputAllocator& alloc, std::vector<Tensor>* out) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* ids, Need(node, in, 0, "input_ids"));
  const Tensor* types = In(in, 1);
  const Tensor* pos_ids = In(in, 2);
  SURGE_ASSIGN_OR_RETURN(const Tensor* word, Need(node, in, 3, "word_emb"));
  SURGE_ASSIGN_OR_RETURN(const Tensor* pos, Need(node, in, 4, "pos_emb"));
  const Tensor* type_emb = In(in, 5);
  SURGE_ASSIGN_OR_RETURN(const Tensor* g, Need(node, in, 6, "gamma"));
  SURGE_ASSIGN_OR_RETURN(const Tensor* b, Need(node, in, 7, "beta"));
  if (ids->rank() != 2 || (ids->dtype() != DType::kInt64 && ids->dtype() != DType::kInt32)) {
    return InvalidArgumentError("{}: input_ids must be int64/int32 [B,S], got {} {}", Label(node),
                                DTypeName(ids->dtype()), ShapeToString(ids->shape()));
  }
  for (const Tensor* t : {types, pos_ids}) {
    if (t && (t->shape() != ids->shape() ||
              (t->dtype() != DType::kInt64 && t->dtype() != DType::kInt32))) {
      return InvalidArgumentError(
          "{}: token_type_ids/position_ids must be int [B,S] like "
          "input_ids {}, got {} {}",
          Label(node), ShapeToString(ids->shape()), DTypeName(t->dtype()),
          ShapeToString(t->shape()));
    }
  }
  if (types && !type_emb) {
    return InvalidArgumentError("{}: token_type_ids given without type_emb", Label(node));
  }
  SURGE_RETURN_IF_ERROR(F32(node, *word, "word_emb"));
  if (word->rank() != 2) {
    return InvalidArgumentError("{}: word_emb must be [V,H], got {}", Label(node),
                                ShapeToString(word->shape()));
  }
  const int64_t h = word->dim(1);
  for (const Tensor* t : {pos, type_emb}) {
    if (t && (t->dtype() != DType::kFloat32 || t->rank() != 2 || t->dim(1) != h)) {
      return InvalidArgumentError("{}: embedding tables must be float32 [rows,{}], got {} {}",
                                  Label(node), h, DTypeName(t->dtype()), ShapeToString(t->shape()));
    }
  }
  SURGE_RETURN_IF_ERROR(Vec(node, g, h, "gamma"));
  SURGE_RETURN_IF_ERROR(Vec(node, b, h, "beta"));
  const std::string mode = node.GetString("position_mode", "arange");
  if (mode != "arange" && mode != "roberta") {
    return InvalidArgumentError("{}: position_mode must be 'arange' or 'roberta', got '{}'",
                                Label(node), mode);
  }
  Tensor ids64, types64, pos64;
  EmbedLayerNormArgs a;
  a.input_ids = Int64Ids(*ids, &ids64);
  a.token_type_ids = types ? Int64Ids(*types, &types64) : nullptr;
  a.position_ids = pos_ids ? Int64Ids(*pos_ids, &pos64) : nullptr;
  a.word_emb = word->data_as<float>();
  a.pos_emb = pos->data_as<float>();
  a.type_emb = type_emb ? type_emb->data_as<float>() : nullptr;
  a.gamma = g->data_as<float>();
  a.beta = b->data_as<float>();
  a.batch = ids->dim(0);
  a.seq = ids->dim(1);
  a.hidden = h;
  a.vocab = word->dim(0);
  a.max_pos = pos->dim(0);
  a.type_vocab = type_emb ? type_emb->dim(0) : 0;
  a.roberta_positions = mode == "roberta";
  a.padding_idx = node.GetInt("padding_idx", 1);
  a.epsilon = static_cast<float>(node.GetFloat("epsilon", 1e-12));
  Tensor y = alloc(0, {a.batch, a.seq, h});
  int64_t bad = 0;
  int kind = 0;
  if (!EmbedLayerNormKernel(isa, a, y.data_as<float>(), &bad, &kind)) {
    static constexpr std::string_view kKinds[] = {"input id", "position id", "token type"};
    const int64_t value = kind == 0   ? a.input_ids[bad]
                          : kind == 2 ? a.token_type_ids[bad]
                                      : (a.position_ids ? a.position_ids[bad] : -1);
    const int64_t limit = kind == 0 ? a.vocab : kind == 1 ? a.max_pos : a.type_vocab;
    return OutOfRangeError("{}: {} {} at position {} (batch {}, token {}) is out of range [0, {})",
                           Label(node), kKinds[kind], value, bad, bad / a.seq, bad % a.seq, limit);
  }
  out->push_back(std::move(y));
  return Status::Ok();
}

Status RunGeluNode(Isa isa, const ir::Node& node, std::span<const Tensor* const> in,
                   const OutputAllocator& alloc, std::vector<Tensor>* out) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, Need(node, in, 0, "X"));
  SURGE_RETURN_IF_ERROR(F32(node, *x, "X"));
  const std::string mode = node.GetString("approximate", "none");
  if (mode != "none" && mode != "tanh") {
    return InvalidArgumentError("{}: approximate must be 'none' or 'tanh', got '{}'", Label(node),
                                mode);
  }
  Tensor y = alloc(0, x->shape());
  GeluKernel(isa, x->data_as<float>(), y.data_as<float>(), x->numel(), mode == "tanh");
  out->push_back(std::move(y));
  return Status::Ok();
}

Status RunAttentionNode(Isa isa, const ir::Node& node, std::span<const Tensor* const> in,
                        const OutputAllocator& alloc, std::vector<Tensor>* out) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* qkv, Need(node, in, 0, "QKV"));
  const Tensor* mask = In(in, 1);
  SURGE_RETURN_IF_ERROR(F32(node, *qkv, "QKV"));
  if (qkv->rank() != 3 || qkv->dim(2) % 3 != 0) {
    return InvalidArgumentError("{}: QKV must be [B,S,3H], got {}", Label(node),
                                ShapeToString(qkv->shape()));
  }
  const int64_t batch = qkv->dim(0), seq = qkv->dim(1), h = qkv->dim(2) / 3;
  const int64_t heads = node.GetInt("num_heads", 0);
  if (heads <= 0 || h % heads != 0) {
    return InvalidArgumentError("{}: num_heads {} must be positive and divide H={}", Label(node),
                                heads, h);
  }
  if (mask && mask->shape() != Shape({batch, seq})) {
    return InvalidArgumentError("{}: mask must be [B,S]=[{},{}], got {}", Label(node), batch, seq,
                                ShapeToString(mask->shape()));
  }
  Tensor mask64;
  const int64_t* m = nullptr;
  if (mask) {
    if (mask->dtype() == DType::kInt64) {
      m = mask->data_as<int64_t>();
    } else {
      mask64 = Tensor(DType::kInt64, mask->shape());
      for (int64_t i = 0; i < mask->numel(); ++i) {
        mask64.data_as<int64_t>()[i] = mask->GetDouble(i) != 0 ? 1 : 0;
      }
      m = mask64.data_as<int64_t>();
    }
  }
  const double d = static_cast<double>(h / heads);
  const float scale = static_cast<float>(node.GetFloat("scale", 1.0 / std::sqrt(d)));
  Tensor y = alloc(0, {batch, seq, h});
  AttentionKernel(isa, qkv->data_as<float>(), m, y.data_as<float>(), batch, seq, h, heads, scale);
  out->push_back(std::move(y));
  return Status::Ok();
}

}  // namespace surge::engine::cpu
