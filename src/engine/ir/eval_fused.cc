// Reference evaluators: the fused Surge ops (domain "surge"), exactly per op_schema.h. Computed in
// double precision; the backends' fused kernels are checked against these.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/ir/eval_internal.h"
#include "engine/ir/op_schema.h"

namespace surge::engine::ir::eval_internal {
namespace {

Status RequireFloat(const Node& node, const Tensor& t, std::string_view what) {
  if (t.dtype() != DType::kFloat32 && t.dtype() != DType::kFloat64) {
    return InvalidArgumentError("{}: {} must be float32, got {}", NodeLabel(node), what,
                                DTypeName(t.dtype()));
  }
  return Status::Ok();
}

Status RequireVector(const Node& node, const Tensor& t, int64_t n, std::string_view what) {
  if (t.rank() != 1 || t.dim(0) != n) {
    return InvalidArgumentError("{}: {} must have shape [{}], got {}", NodeLabel(node), what, n,
                                ShapeToString(t.shape()));
  }
  return RequireFloat(node, t, what);
}

Result<double (*)(double)> Activation(const Node& node, std::string_view name) {
  if (name == "none") return +[](double x) { return x; };
  if (name == "gelu") return +[](double x) { return GeluErf(x); };
  if (name == "gelu_tanh") return +[](double x) { return GeluTanh(x); };
  if (name == "tanh") return +[](double x) { return std::tanh(x); };
  if (name == "relu") return +[](double x) { return x > 0 ? x : 0.0; };
  return InvalidArgumentError(
      "{}: unknown activation '{}' (valid: none, gelu, gelu_tanh, tanh, relu)", NodeLabel(node),
      name);
}

Status LinearOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* w, RequiredInput(node, inputs, 1));
  const Tensor* b = OptionalInput(inputs, 2);
  const Tensor* r = OptionalInput(inputs, 3);
  SURGE_RETURN_IF_ERROR(RequireFloat(node, *x, "X"));
  SURGE_RETURN_IF_ERROR(RequireFloat(node, *w, "W"));
  if (x->rank() < 1 || w->rank() != 2 || w->dim(0) != x->dim(x->rank() - 1)) {
    return InvalidArgumentError("{}: X {} and W {} do not fit X[...,K] W[K,N]", NodeLabel(node),
                                ShapeToString(x->shape()), ShapeToString(w->shape()));
  }
  const int64_t k = w->dim(0), n = w->dim(1);
  const int64_t m = k ? x->numel() / k : 0;
  if (b) SURGE_RETURN_IF_ERROR(RequireVector(node, *b, n, "B"));
  Shape out_shape = x->shape();
  out_shape.back() = n;
  if (r && r->shape() != out_shape) {
    return InvalidArgumentError("{}: residual R has shape {}, expected {}", NodeLabel(node),
                                ShapeToString(r->shape()), ShapeToString(out_shape));
  }
  SURGE_ASSIGN_OR_RETURN(auto act, Activation(node, node.GetString("activation", "none")));
  SURGE_ASSIGN_OR_RETURN(Tensor xd, ConvertTo(*x, DType::kFloat64));
  SURGE_ASSIGN_OR_RETURN(Tensor wd, ConvertTo(*w, DType::kFloat64));
  const double* px = xd.data_as<double>();
  const double* pw = wd.data_as<double>();
  Tensor yd(DType::kFloat64, out_shape);
  double* py = yd.data_as<double>();
  for (int64_t i = 0; i < m; ++i) {
    double* row = py + i * n;
    for (int64_t p = 0; p < k; ++p) {
      const double xv = px[i * k + p];
      const double* wr = pw + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += xv * wr[j];
    }
    for (int64_t j = 0; j < n; ++j) {
      double v = row[j] + (b ? b->GetDouble(j) : 0.0);
      v = act(v);
      if (r) v += r->GetDouble(i * n + j);
      row[j] = v;
    }
  }
  SURGE_ASSIGN_OR_RETURN(Tensor y, ConvertTo(yd, x->dtype()));
  outputs->push_back(std::move(y));
  return Status::Ok();
}

Status GeluOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  SURGE_RETURN_IF_ERROR(RequireFloat(node, *x, "X"));
  const std::string mode = node.GetString("approximate", "none");
  if (mode != "none" && mode != "tanh") {
    return InvalidArgumentError("{}: approximate must be 'none' or 'tanh', got '{}'",
                                NodeLabel(node), mode);
  }
  SURGE_ASSIGN_OR_RETURN(Tensor yd, ConvertTo(*x, DType::kFloat64));
  yd = yd.Clone();
  for (double& v : yd.span<double>()) v = mode == "tanh" ? GeluTanh(v) : GeluErf(v);
  SURGE_ASSIGN_OR_RETURN(Tensor y, ConvertTo(yd, x->dtype()));
  outputs->push_back(std::move(y));
  return Status::Ok();
}

// Normalises rows of `sum` (rows × h, double) in place with gamma/beta.
void NormalizeRows(double* sum, int64_t rows, int64_t h, const Tensor& gamma, const Tensor& beta,
                   double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    double* p = sum + r * h;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < h; ++j) mean += p[j];
    mean /= static_cast<double>(h);
    for (int64_t j = 0; j < h; ++j) var += (p[j] - mean) * (p[j] - mean);
    var /= static_cast<double>(h);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < h; ++j) {
      p[j] = (p[j] - mean) * inv * gamma.GetDouble(j) + beta.GetDouble(j);
    }
  }
}

Status LayerNormOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* gamma, RequiredInput(node, inputs, 1));
  SURGE_ASSIGN_OR_RETURN(const Tensor* beta, RequiredInput(node, inputs, 2));
  SURGE_RETURN_IF_ERROR(RequireFloat(node, *x, "X"));
  if (x->rank() < 1) return InvalidArgumentError("{}: X must have rank >= 1", NodeLabel(node));
  const int64_t h = x->dim(x->rank() - 1);
  SURGE_RETURN_IF_ERROR(RequireVector(node, *gamma, h, "gamma"));
  SURGE_RETURN_IF_ERROR(RequireVector(node, *beta, h, "beta"));
  SURGE_ASSIGN_OR_RETURN(Tensor xd, ConvertTo(*x, DType::kFloat64));
  xd = xd.Clone();
  NormalizeRows(xd.data_as<double>(), h ? x->numel() / h : 0, h, *gamma, *beta,
                node.GetFloat("epsilon", 1e-5));
  SURGE_ASSIGN_OR_RETURN(Tensor y, ConvertTo(xd, x->dtype()));
  outputs->push_back(std::move(y));
  return Status::Ok();
}

Status SkipLayerNormOp(const Node& node, std::span<const Tensor> inputs,
                       std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  SURGE_ASSIGN_OR_RETURN(const Tensor* skip, RequiredInput(node, inputs, 1));
  SURGE_ASSIGN_OR_RETURN(const Tensor* gamma, RequiredInput(node, inputs, 2));
  SURGE_ASSIGN_OR_RETURN(const Tensor* beta, RequiredInput(node, inputs, 3));
  const Tensor* bias = OptionalInput(inputs, 4);
  SURGE_RETURN_IF_ERROR(RequireFloat(node, *x, "X"));
  SURGE_RETURN_IF_ERROR(RequireFloat(node, *skip, "skip"));
  if (x->rank() < 1 || skip->shape() != x->shape()) {
    return InvalidArgumentError("{}: skip {} must have the shape of X {}", NodeLabel(node),
                                ShapeToString(skip->shape()), ShapeToString(x->shape()));
  }
  const int64_t h = x->dim(x->rank() - 1);
  SURGE_RETURN_IF_ERROR(RequireVector(node, *gamma, h, "gamma"));
  SURGE_RETURN_IF_ERROR(RequireVector(node, *beta, h, "beta"));
  if (bias) SURGE_RETURN_IF_ERROR(RequireVector(node, *bias, h, "bias"));
  SURGE_ASSIGN_OR_RETURN(Tensor sd, ConvertTo(*x, DType::kFloat64));
  sd = sd.Clone();
  double* ps = sd.data_as<double>();
  for (int64_t i = 0; i < x->numel(); ++i) {
    ps[i] += skip->GetDouble(i) + (bias ? bias->GetDouble(i % h) : 0.0);
  }
  SURGE_ASSIGN_OR_RETURN(Tensor sum, ConvertTo(sd, x->dtype()));
  Tensor yd = sd.Clone();
  NormalizeRows(yd.data_as<double>(), h ? x->numel() / h : 0, h, *gamma, *beta,
                node.GetFloat("epsilon", 1e-5));
  SURGE_ASSIGN_OR_RETURN(Tensor y, ConvertTo(yd, x->dtype()));
  outputs->push_back(std::move(y));
  outputs->push_back(sum.data() == sd.data() ? sum.Clone() : std::move(sum));
  return Status::Ok();
}

Status L2NormalizeOp(const Node& node, std::span<const Tensor> inputs,
                     std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(node, inputs, 0));
  SURGE_RETURN_IF_ERROR(RequireFloat(node, *x, "X"));
  if (x->rank() < 1) return InvalidArgumentError("{}: X must have rank >= 1", NodeLabel(node));
  SURGE_ASSIGN_OR_RETURN(const bool max_mode, L2NormalizeMaxMode(node));
  const double eps = node.GetFloat("epsilon", 1e-12);
  const int64_t h = x->dim(x->rank() - 1);
  SURGE_ASSIGN_OR_RETURN(Tensor xd, ConvertTo(*x, DType::kFloat64));
  xd = xd.Clone();
  double* px = xd.data_as<double>();
  for (int64_t r = 0; h > 0 && r < x->numel() / h; ++r) {
    double* row = px + r * h;
    double ss = 0;
    for (int64_t j = 0; j < h; ++j) ss += row[j] * row[j];
    const double norm = max_mode ? std::max(std::sqrt(ss), eps) : std::sqrt(ss + eps);
    for (int64_t j = 0; j < h; ++j) row[j] /= norm;
  }
  SURGE_ASSIGN_OR_RETURN(Tensor y, ConvertTo(xd, x->dtype()));
  outputs->push_back(std::move(y));
  return Status::Ok();
}

Status CheckIds(const Node& node, const Tensor& t, std::string_view what, const Shape& shape) {
  if (t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32) {
    return InvalidArgumentError("{}: {} must be int64 or int32, got {}", NodeLabel(node), what,
                                DTypeName(t.dtype()));
  }
  if (t.shape() != shape) {
    return InvalidArgumentError("{}: {} has shape {}, expected {}", NodeLabel(node), what,
                                ShapeToString(t.shape()), ShapeToString(shape));
  }
  return Status::Ok();
}

Status CheckTable(const Node& node, const Tensor& t, std::string_view what, int64_t h) {
  SURGE_RETURN_IF_ERROR(RequireFloat(node, t, what));
  if (t.rank() != 2 || t.dim(1) != h) {
    return InvalidArgumentError("{}: {} must have shape [rows, {}], got {}", NodeLabel(node), what,
                                h, ShapeToString(t.shape()));
  }
  return Status::Ok();
}

Status EmbedLayerNormOp(const Node& node, std::span<const Tensor> inputs,
                        std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* ids, RequiredInput(node, inputs, 0));
  const Tensor* types = OptionalInput(inputs, 1);
  const Tensor* pos_ids = OptionalInput(inputs, 2);
  SURGE_ASSIGN_OR_RETURN(const Tensor* word, RequiredInput(node, inputs, 3));
  SURGE_ASSIGN_OR_RETURN(const Tensor* pos, RequiredInput(node, inputs, 4));
  const Tensor* type_emb = OptionalInput(inputs, 5);
  SURGE_ASSIGN_OR_RETURN(const Tensor* gamma, RequiredInput(node, inputs, 6));
  SURGE_ASSIGN_OR_RETURN(const Tensor* beta, RequiredInput(node, inputs, 7));
  if (ids->rank() != 2) {
    return InvalidArgumentError("{}: input_ids must be [B,S], got {}", NodeLabel(node),
                                ShapeToString(ids->shape()));
  }
  SURGE_RETURN_IF_ERROR(CheckIds(node, *ids, "input_ids", ids->shape()));
  if (types) SURGE_RETURN_IF_ERROR(CheckIds(node, *types, "token_type_ids", ids->shape()));
  if (pos_ids) SURGE_RETURN_IF_ERROR(CheckIds(node, *pos_ids, "position_ids", ids->shape()));
  if (word->rank() != 2) {
    return InvalidArgumentError("{}: word_emb must be [V,H], got {}", NodeLabel(node),
                                ShapeToString(word->shape()));
  }
  const int64_t h = word->dim(1);
  SURGE_RETURN_IF_ERROR(CheckTable(node, *word, "word_emb", h));
  SURGE_RETURN_IF_ERROR(CheckTable(node, *pos, "pos_emb", h));
  if (type_emb) SURGE_RETURN_IF_ERROR(CheckTable(node, *type_emb, "type_emb", h));
  if (types && !type_emb) {
    return InvalidArgumentError("{}: token_type_ids given without type_emb", NodeLabel(node));
  }
  SURGE_RETURN_IF_ERROR(RequireVector(node, *gamma, h, "gamma"));
  SURGE_RETURN_IF_ERROR(RequireVector(node, *beta, h, "beta"));
  const std::string mode = node.GetString("position_mode", "arange");
  if (mode != "arange" && mode != "roberta") {
    return InvalidArgumentError("{}: position_mode must be 'arange' or 'roberta', got '{}'",
                                NodeLabel(node), mode);
  }
  const int64_t pad = node.GetInt("padding_idx", 1);
  const int64_t batch = ids->dim(0), seq = ids->dim(1);
  Tensor yd(DType::kFloat64, Shape{batch, seq, h});
  double* py = yd.data_as<double>();
  auto lookup = [&](const Tensor& table, int64_t row, std::string_view what, int64_t at,
                    double* dst) -> Status {
    if (row < 0 || row >= table.dim(0)) {
      return OutOfRangeError("{}: {} {} at position {} is out of range [0, {})", NodeLabel(node),
                             what, row, at, table.dim(0));
    }
    for (int64_t j = 0; j < h; ++j) dst[j] += table.GetDouble(row * h + j);
    return Status::Ok();
  };
  for (int64_t b = 0; b < batch; ++b) {
    int64_t running = 0;
    for (int64_t s = 0; s < seq; ++s) {
      const int64_t i = b * seq + s;
      const int64_t id = ids->GetInt(i);
      double* dst = py + i * h;
      SURGE_RETURN_IF_ERROR(lookup(*word, id, "input id", i, dst));
      int64_t p;
      if (pos_ids) {
        p = pos_ids->GetInt(i);
      } else if (mode == "arange") {
        p = s;
      } else {
        const bool real = id != pad;
        running += real;
        p = real ? running + pad : pad;
      }
      SURGE_RETURN_IF_ERROR(lookup(*pos, p, "position id", i, dst));
      if (type_emb) {
        SURGE_RETURN_IF_ERROR(
            lookup(*type_emb, types ? types->GetInt(i) : 0, "token type", i, dst));
      }
    }
  }
  NormalizeRows(py, batch * seq, h, *gamma, *beta, node.GetFloat("epsilon", 1e-12));
  SURGE_ASSIGN_OR_RETURN(Tensor y, ConvertTo(yd, word->dtype()));
  outputs->push_back(std::move(y));
  return Status::Ok();
}

Status AttentionOp(const Node& node, std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  SURGE_ASSIGN_OR_RETURN(const Tensor* qkv, RequiredInput(node, inputs, 0));
  const Tensor* mask = OptionalInput(inputs, 1);
  SURGE_RETURN_IF_ERROR(RequireFloat(node, *qkv, "QKV"));
  if (qkv->rank() != 3 || qkv->dim(2) % 3 != 0) {
    return InvalidArgumentError("{}: QKV must be [B,S,3H], got {}", NodeLabel(node),
                                ShapeToString(qkv->shape()));
  }
  const int64_t batch = qkv->dim(0), seq = qkv->dim(1), h = qkv->dim(2) / 3;
  const int64_t heads = node.GetInt("num_heads", 0);
  if (heads <= 0 || h % heads != 0) {
    return InvalidArgumentError("{}: num_heads {} must be positive and divide H={}",
                                NodeLabel(node), heads, h);
  }
  if (mask && mask->shape() != Shape({batch, seq})) {
    return InvalidArgumentError("{}: mask must be [B,S]=[{},{}], got {}", NodeLabel(node), batch,
                                seq, ShapeToString(mask->shape()));
  }
  const int64_t d = h / heads;
  const double scale = node.GetFloat("scale", 1.0 / std::sqrt(static_cast<double>(d)));
  SURGE_ASSIGN_OR_RETURN(Tensor xd, ConvertTo(*qkv, DType::kFloat64));
  const double* px = xd.data_as<double>();
  Tensor yd(DType::kFloat64, Shape{batch, seq, h});
  double* py = yd.data_as<double>();
  std::vector<double> scores(static_cast<size_t>(seq));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<bool> keep(seq, true);
    bool any = false;
    for (int64_t s = 0; s < seq; ++s) {
      if (mask) keep[s] = mask->GetDouble(b * seq + s) != 0;
      any = any || keep[s];
    }
    // No real key at all: every key scores the same, as with an additive -inf-like mask.
    if (!any) keep.assign(seq, true);
    for (int64_t hd = 0; hd < heads; ++hd) {
      for (int64_t q = 0; q < seq; ++q) {
        const double* qv = px + (b * seq + q) * 3 * h + hd * d;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t k = 0; k < seq; ++k) {
          if (!keep[k]) continue;
          const double* kv = px + (b * seq + k) * 3 * h + h + hd * d;
          double s = 0;
          for (int64_t j = 0; j < d; ++j) s += qv[j] * kv[j];
          scores[k] = any ? s * scale : 0.0;
          mx = std::max(mx, scores[k]);
        }
        double sum = 0;
        for (int64_t k = 0; k < seq; ++k) {
          if (keep[k]) sum += (scores[k] = std::exp(scores[k] - mx));
        }
        double* out = py + (b * seq + q) * h + hd * d;
        for (int64_t k = 0; k < seq; ++k) {
          if (!keep[k]) continue;
          const double p = scores[k] / sum;
          const double* vv = px + (b * seq + k) * 3 * h + 2 * h + hd * d;
          for (int64_t j = 0; j < d; ++j) out[j] += p * vv[j];
        }
      }
    }
  }
  SURGE_ASSIGN_OR_RETURN(Tensor y, ConvertTo(yd, qkv->dtype()));
  outputs->push_back(std::move(y));
  return Status::Ok();
}

void Reg(std::string_view op, EvalFn fn) { RegisterEvaluator(kSurgeDomain, op, std::move(fn)); }

}  // namespace

void RegisterFusedEvaluators() {
  Reg("Linear", LinearOp);
  Reg("Gelu", GeluOp);
  Reg("LayerNorm", LayerNormOp);
  Reg("L2Normalize", L2NormalizeOp);
  Reg("SkipLayerNorm", SkipLayerNormOp);
  Reg("EmbedLayerNorm", EmbedLayerNormOp);
  Reg("Attention", AttentionOp);
}

}  // namespace surge::engine::ir::eval_internal
