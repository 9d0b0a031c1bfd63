// Hugging Face checkpoint → Surge IR, built directly in the fused vocabulary (op_schema.h):
// EmbedLayerNorm, Linear (weights transposed to [K, N]; Q/K/V concatenated to [H, 3H]), Attention,
// SkipLayerNorm, and the architecture's head.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/logging.h"
#include "core/mmap_file.h"
#include "engine/import/importer.h"
#include "engine/import/safetensors.h"

namespace surge::engine::import {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::string_view kSupported =
    "BertModel, BertForSequenceClassification, BertForTokenClassification, RobertaModel, "
    "RobertaForSequenceClassification, RobertaForTokenClassification, XLMRoberta* (same heads), "
    "DistilBertModel, DistilBertForSequenceClassification, DistilBertForTokenClassification, "
    "ElectraModel, ElectraForSequenceClassification, ElectraForTokenClassification";

enum class Family { kBert, kRoberta, kDistilBert, kElectra };
enum class Head { kNone, kSequence, kToken };

struct Config {
  Family family;
  Head head;
  std::string architecture;
  std::string model_type;
  int64_t hidden = 0, layers = 0, heads = 0, intermediate = 0, embedding = 0;
  int64_t vocab = 0, max_positions = 0, type_vocab = 0, pad = 0;
  double eps = 1e-12;
  std::string activation;  // Linear activation of the FFN
};

Result<int64_t> GetInt(const json& c, const char* key, std::optional<int64_t> dflt = {}) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) {
    if (dflt) return *dflt;
    return InvalidArgumentError("config.json lacks '{}'", key);
  }
  if (!it->is_number_integer())
    return InvalidArgumentError("config.json '{}' is not an integer", key);
  return it->get<int64_t>();
}

Result<double> GetDouble(const json& c, const char* key, double dflt) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return dflt;
  if (!it->is_number()) return InvalidArgumentError("config.json '{}' is not a number", key);
  return it->get<double>();
}

std::string GetString(const json& c, const char* key, std::string dflt) {
  auto it = c.find(key);
  return it != c.end() && it->is_string() ? it->get<std::string>() : dflt;
}

Result<std::string> MapActivation(const std::string& act) {
  if (act == "gelu") return std::string("gelu");
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") {
    return std::string("gelu_tanh");
  }
  if (act == "relu") return std::string("relu");
  return UnimplementedError("activation '{}' is not supported (gelu, gelu_new, relu)", act);
}

Result<Config> ParseConfig(const json& c) {
  Config cfg;
  cfg.model_type = GetString(c, "model_type", "");
  std::string arch;
  if (auto it = c.find("architectures");
      it != c.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    arch = (*it)[0].get<std::string>();
  }
  struct Known {
    std::string_view prefix;
    Family family;
    std::string_view model_type;
  };
  static const Known kKnown[] = {{"XLMRoberta", Family::kRoberta, "xlm-roberta"},
                                 {"Roberta", Family::kRoberta, "roberta"},
                                 {"DistilBert", Family::kDistilBert, "distilbert"},
                                 {"Electra", Family::kElectra, "electra"},
                                 {"Bert", Family::kBert, "bert"}};
  bool found = false;
  if (!arch.empty()) {
    for (const auto& k : kKnown) {
      if (arch.rfind(k.prefix, 0) != 0) continue;
      std::string rest = arch.substr(k.prefix.size());
      if (rest == "Model") {
        cfg.head = Head::kNone;
      } else if (rest == "ForSequenceClassification") {
        cfg.head = Head::kSequence;
      } else if (rest == "ForTokenClassification") {
        cfg.head = Head::kToken;
      } else {
        break;
      }
      cfg.family = k.family;
      found = true;
      break;
    }
  } else {
    for (const auto& k : kKnown) {
      if (cfg.model_type == k.model_type) {
        cfg.family = k.family;
        cfg.head = Head::kNone;
        arch = std::string(k.prefix) + "Model";
        found = true;
      }
    }
  }
  if (!found) {
    return UnimplementedError("unsupported architecture '{}' (model_type '{}'); supported: {}",
                              arch, cfg.model_type, kSupported);
  }
  cfg.architecture = arch;
  if (cfg.family == Family::kDistilBert) {
    SURGE_ASSIGN_OR_RETURN(cfg.hidden, GetInt(c, "dim"));
    SURGE_ASSIGN_OR_RETURN(cfg.layers, GetInt(c, "n_layers"));
    SURGE_ASSIGN_OR_RETURN(cfg.heads, GetInt(c, "n_heads"));
    SURGE_ASSIGN_OR_RETURN(cfg.intermediate, GetInt(c, "hidden_dim"));
    SURGE_ASSIGN_OR_RETURN(cfg.activation, MapActivation(GetString(c, "activation", "gelu")));
    cfg.eps = 1e-12;
  } else {
    SURGE_ASSIGN_OR_RETURN(cfg.hidden, GetInt(c, "hidden_size"));
    SURGE_ASSIGN_OR_RETURN(cfg.layers, GetInt(c, "num_hidden_layers"));
    SURGE_ASSIGN_OR_RETURN(cfg.heads, GetInt(c, "num_attention_heads"));
    SURGE_ASSIGN_OR_RETURN(cfg.intermediate, GetInt(c, "intermediate_size"));
    SURGE_ASSIGN_OR_RETURN(cfg.activation, MapActivation(GetString(c, "hidden_act", "gelu")));
    SURGE_ASSIGN_OR_RETURN(cfg.eps, GetDouble(c, "layer_norm_eps", 1e-12));
    SURGE_ASSIGN_OR_RETURN(cfg.type_vocab, GetInt(c, "type_vocab_size", 2));
    std::string pos = GetString(c, "position_embedding_type", "absolute");
    if (pos != "absolute") {
      return UnimplementedError("position_embedding_type '{}' is not supported (absolute)", pos);
    }
  }
  SURGE_ASSIGN_OR_RETURN(cfg.vocab, GetInt(c, "vocab_size"));
  SURGE_ASSIGN_OR_RETURN(cfg.max_positions, GetInt(c, "max_position_embeddings"));
  SURGE_ASSIGN_OR_RETURN(cfg.pad, GetInt(c, "pad_token_id", 0));
  cfg.embedding = cfg.hidden;
  if (cfg.family == Family::kElectra) {
    SURGE_ASSIGN_OR_RETURN(cfg.embedding, GetInt(c, "embedding_size", cfg.hidden));
  }
  if (cfg.hidden <= 0 || cfg.layers <= 0 || cfg.heads <= 0 || cfg.hidden % cfg.heads != 0 ||
      cfg.intermediate <= 0 || cfg.vocab <= 0 || cfg.max_positions <= 0 || cfg.embedding <= 0) {
    return InvalidArgumentError("config.json has invalid sizes (hidden {}, layers {}, heads {})",
                                cfg.hidden, cfg.layers, cfg.heads);
  }
  return cfg;
}

class HfBuilder {
 public:
  HfBuilder(const Config& cfg, const SafeTensors& st, std::string prefix)
      : cfg_(cfg), st_(st), prefix_(std::move(prefix)) {}

  Result<ir::Graph> Build();

 private:
  // A float32 tensor that must have `shape`.
  Result<Tensor> Load(const std::string& name, const Shape& shape) {
    auto t = st_.ReadFloat32(name);
    if (!t.ok()) return t.status();
    if (t->shape() != shape) {
      return InvalidArgumentError("tensor '{}' has shape {}, expected {}", name,
                                  ShapeToString(t->shape()), ShapeToString(shape));
    }
    return t;
  }
  Result<int> Const(const std::string& name, const Shape& shape) {
    SURGE_ASSIGN_OR_RETURN(Tensor t, Load(name, shape));
    return g_.AddConstant(name, std::move(t));
  }
  // HF stores Linear weights as [N, K]; Surge's Linear takes [K, N].
  static Tensor Transpose(const Tensor& w) {
    int64_t n = w.dim(0), k = w.dim(1);
    Tensor out(DType::kFloat32, {k, n});
    const float* src = w.data_as<float>();
    float* dst = out.data_as<float>();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < k; ++j) dst[j * n + i] = src[i * k + j];
    }
    return out;
  }
  // Linear(x, W^T, b) with activation; `base` names "<base>.weight" / "<base>.bias".
  Result<int> Linear(int x, const std::string& base, int64_t k, int64_t n,
                     const std::string& activation, const std::string& out_name) {
    SURGE_ASSIGN_OR_RETURN(Tensor w, Load(base + ".weight", {n, k}));
    int wi = g_.AddConstant(base + ".weight", Transpose(w));
    SURGE_ASSIGN_OR_RETURN(int bi, Const(base + ".bias", {n}));
    return Add("Linear", {x, wi, bi}, {{"activation", activation}}, out_name);
  }
  int Add(const std::string& op, std::vector<int> inputs,
          std::map<std::string, ir::Attribute> attrs, const std::string& out_name,
          const std::string& domain = std::string(ir::kSurgeDomain)) {
    ir::Node n;
    n.op_type = op;
    n.domain = domain;
    n.name = out_name;
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    int out = g_.AddValue(out_name);
    n.outputs = {out};
    g_.AddNode(std::move(n));
    return out;
  }
  Result<int> Embeddings(int ids, int types);
  Result<int> Layer(int x, int mask, int64_t i);
  Result<int> HeadOf(int x);
  // Hidden[:, 0, :].
  int Cls(int x) {
    Tensor zero(DType::kInt64, {});
    int idx = g_.AddConstant("cls_index", zero);
    return Add("Gather", {x, idx}, {{"axis", int64_t{1}}}, "cls", "");
  }

  const Config& cfg_;
  const SafeTensors& st_;
  std::string prefix_;
  ir::Graph g_;
};

Result<int> HfBuilder::Embeddings(int ids, int types) {
  const int64_t e = cfg_.embedding;
  const std::string p = prefix_ + "embeddings.";
  SURGE_ASSIGN_OR_RETURN(Tensor word, Load(p + "word_embeddings.weight", {cfg_.vocab, e}));
  SURGE_ASSIGN_OR_RETURN(int pos, Const(p + "position_embeddings.weight", {cfg_.max_positions, e}));
  int type = -1;
  if (cfg_.family == Family::kRoberta) {
    // RoBERTa always adds token type 0: fold that row into the word table.
    SURGE_ASSIGN_OR_RETURN(Tensor tt,
                           Load(p + "token_type_embeddings.weight", {cfg_.type_vocab, e}));
    float* wd = word.data_as<float>();
    const float* row = tt.data_as<float>();
    for (int64_t r = 0; r < cfg_.vocab; ++r) {
      for (int64_t c = 0; c < e; ++c) wd[r * e + c] += row[c];
    }
  } else if (cfg_.family != Family::kDistilBert) {
    SURGE_ASSIGN_OR_RETURN(type, Const(p + "token_type_embeddings.weight", {cfg_.type_vocab, e}));
  }
  int word_id = g_.AddConstant(p + "word_embeddings.weight", std::move(word));
  SURGE_ASSIGN_OR_RETURN(int gamma, Const(p + "LayerNorm.weight", {e}));
  SURGE_ASSIGN_OR_RETURN(int beta, Const(p + "LayerNorm.bias", {e}));
  const bool roberta = cfg_.family == Family::kRoberta;
  int emb = Add("EmbedLayerNorm", {ids, types, -1, word_id, pos, type, gamma, beta},
                {{"epsilon", cfg_.eps},
                 {"position_mode", std::string(roberta ? "roberta" : "arange")},
                 {"padding_idx", roberta ? cfg_.pad : int64_t{0}}},
                "embeddings");
  if (cfg_.family == Family::kElectra && cfg_.embedding != cfg_.hidden) {
    return Linear(emb, prefix_ + "embeddings_project", e, cfg_.hidden, "none",
                  "embeddings_project");
  }
  return emb;
}

Result<int> HfBuilder::Layer(int x, int mask, int64_t i) {
  const int64_t h = cfg_.hidden;
  const bool distil = cfg_.family == Family::kDistilBert;
  const std::string p =
      prefix_ + (distil ? "transformer.layer." : "encoder.layer.") + std::to_string(i) + ".";
  const std::string name = fmt::format("layer{}.", i);
  const char* qkv_names[3][2] = {{"attention.self.query", "attention.q_lin"},
                                 {"attention.self.key", "attention.k_lin"},
                                 {"attention.self.value", "attention.v_lin"}};
  // Merged [Q | K | V]: W [H, 3H], b [3H].
  Tensor w(DType::kFloat32, {h, 3 * h});
  Tensor b(DType::kFloat32, {3 * h});
  for (int j = 0; j < 3; ++j) {
    std::string base = p + qkv_names[j][distil ? 1 : 0];
    SURGE_ASSIGN_OR_RETURN(Tensor wj, Load(base + ".weight", {h, h}));
    SURGE_ASSIGN_OR_RETURN(Tensor bj, Load(base + ".bias", {h}));
    const float* src = wj.data_as<float>();  // [out, in]
    float* dst = w.data_as<float>();
    for (int64_t o = 0; o < h; ++o) {
      for (int64_t k = 0; k < h; ++k) dst[k * 3 * h + j * h + o] = src[o * h + k];
    }
    std::memcpy(b.data_as<float>() + j * h, bj.data_as<float>(), h * sizeof(float));
  }
  int wi = g_.AddConstant(p + "attention.qkv.weight", std::move(w));
  int bi = g_.AddConstant(p + "attention.qkv.bias", std::move(b));
  int qkv = Add("Linear", {x, wi, bi}, {{"activation", std::string("none")}}, name + "qkv");
  double scale = 1.0 / std::sqrt(static_cast<double>(h / cfg_.heads));
  int ctx = Add("Attention", {qkv, mask}, {{"num_heads", cfg_.heads}, {"scale", scale}},
                name + "attention");
  SURGE_ASSIGN_OR_RETURN(
      int attn_out, Linear(ctx, p + (distil ? "attention.out_lin" : "attention.output.dense"), h, h,
                           "none", name + "attention_output"));
  std::string ln1 = p + (distil ? "sa_layer_norm" : "attention.output.LayerNorm");
  SURGE_ASSIGN_OR_RETURN(int g1, Const(ln1 + ".weight", {h}));
  SURGE_ASSIGN_OR_RETURN(int b1, Const(ln1 + ".bias", {h}));
  int x1 = Add("SkipLayerNorm", {attn_out, x, g1, b1}, {{"epsilon", cfg_.eps}}, name + "norm1");
  SURGE_ASSIGN_OR_RETURN(
      int inter, Linear(x1, p + (distil ? "ffn.lin1" : "intermediate.dense"), h, cfg_.intermediate,
                        cfg_.activation, name + "intermediate"));
  SURGE_ASSIGN_OR_RETURN(int out, Linear(inter, p + (distil ? "ffn.lin2" : "output.dense"),
                                         cfg_.intermediate, h, "none", name + "output"));
  std::string ln2 = p + (distil ? "output_layer_norm" : "output.LayerNorm");
  SURGE_ASSIGN_OR_RETURN(int g2, Const(ln2 + ".weight", {h}));
  SURGE_ASSIGN_OR_RETURN(int b2, Const(ln2 + ".bias", {h}));
  return Add("SkipLayerNorm", {out, x1, g2, b2}, {{"epsilon", cfg_.eps}}, name + "norm2");
}

Result<int> HfBuilder::HeadOf(int x) {
  const int64_t h = cfg_.hidden;
  auto labels = [&](const std::string& w) -> Result<int64_t> {
    auto it = st_.entries().find(w);
    if (it == st_.entries().end()) return NotFoundError("tensor '{}' is missing", w);
    if (it->second.shape.size() != 2) {
      return InvalidArgumentError("tensor '{}' has shape {}, expected [labels, {}]", w,
                                  ShapeToString(it->second.shape), h);
    }
    return it->second.shape[0];
  };
  if (cfg_.head == Head::kToken) {
    SURGE_ASSIGN_OR_RETURN(int64_t n, labels("classifier.weight"));
    return Linear(x, "classifier", h, n, "none", "logits");
  }
  int cls = Cls(x);
  switch (cfg_.family) {
    case Family::kBert: {
      SURGE_ASSIGN_OR_RETURN(int pooled,
                             Linear(cls, prefix_ + "pooler.dense", h, h, "tanh", "pooled"));
      SURGE_ASSIGN_OR_RETURN(int64_t n, labels("classifier.weight"));
      return Linear(pooled, "classifier", h, n, "none", "logits");
    }
    case Family::kRoberta:
    case Family::kElectra: {
      const char* act = cfg_.family == Family::kRoberta ? "tanh" : "gelu";
      SURGE_ASSIGN_OR_RETURN(int d, Linear(cls, "classifier.dense", h, h, act, "classifier_dense"));
      SURGE_ASSIGN_OR_RETURN(int64_t n, labels("classifier.out_proj.weight"));
      return Linear(d, "classifier.out_proj", h, n, "none", "logits");
    }
    case Family::kDistilBert: {
      SURGE_ASSIGN_OR_RETURN(int d, Linear(cls, "pre_classifier", h, h, "relu", "pre_classifier"));
      SURGE_ASSIGN_OR_RETURN(int64_t n, labels("classifier.weight"));
      return Linear(d, "classifier", h, n, "none", "logits");
    }
  }
  return InternalError("unhandled architecture family");
}

Result<ir::Graph> HfBuilder::Build() {
  g_.name = cfg_.architecture;
  g_.metadata["hf.architecture"] = cfg_.architecture;
  g_.metadata["hf.model_type"] = cfg_.model_type;
  ir::SymShape bs{ir::Dim::Symbol("batch"), ir::Dim::Symbol("seq")};
  int ids = g_.AddInput("input_ids", DType::kInt64, bs);
  int mask = g_.AddInput("attention_mask", DType::kInt64, bs);
  int types = -1;
  if (cfg_.family == Family::kBert || cfg_.family == Family::kElectra) {
    types = g_.AddInput("token_type_ids", DType::kInt64, bs);
  }
  SURGE_ASSIGN_OR_RETURN(int x, Embeddings(ids, types));
  for (int64_t i = 0; i < cfg_.layers; ++i) {
    SURGE_ASSIGN_OR_RETURN(x, Layer(x, mask, i));
  }
  if (cfg_.head == Head::kNone) {
    ir::Node id;
    id.op_type = "Identity";
    id.name = "last_hidden_state";
    id.inputs = {x};
    int out = g_.AddValue("last_hidden_state");
    id.outputs = {out};
    g_.AddNode(std::move(id));
    g_.outputs = {out};
  } else {
    SURGE_ASSIGN_OR_RETURN(int logits, HeadOf(x));
    g_.outputs = {logits};
  }
  SURGE_RETURN_IF_ERROR(g_.Validate());
  return std::move(g_);
}

}  // namespace

Result<ir::Graph> ImportHuggingFace(const std::string& folder) {
  fs::path dir(folder);
  auto text = ReadFileToString((dir / "config.json").string());
  if (!text.ok()) {
    return NotFoundError("'{}' is not a Hugging Face model folder: cannot read config.json ({})",
                         folder, text.status().message());
  }
  json config = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return InvalidArgumentError("'{}/config.json' is not a JSON object", folder);
  }
  auto cfg = ParseConfig(config);
  if (!cfg.ok()) return cfg.status().WithContext(fmt::format("importing '{}'", folder));
  fs::path weights = dir / "model.safetensors";
  std::error_code ec;
  if (!fs::exists(weights, ec)) {
    return NotFoundError(
        "'{}' has no model.safetensors (sharded and .bin checkpoints are not "
        "supported)",
        folder);
  }
  SURGE_ASSIGN_OR_RETURN(SafeTensors st, SafeTensors::Open(weights.string()));
  // Base models are saved without the "<model_type>." prefix; heads with it.
  std::string prefix;
  for (std::string p : {"bert.", "roberta.", "distilbert.", "electra.", ""}) {
    if (st.Has(p + "embeddings.word_embeddings.weight")) {
      prefix = p;
      break;
    }
  }
  HfBuilder builder(*cfg, st, prefix);
  auto g = builder.Build();
  if (!g.ok()) return g.status().WithContext(fmt::format("importing '{}'", folder));
  SURGE_LOG_DEBUG("imported Hugging Face {} from '{}': {} nodes", cfg->architecture, folder,
                  g->nodes.size());
  return g;
}

}  // namespace surge::engine::import
