#include "stream/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/logging.h"
#include "core/mmap_file.h"
#include "engine/builder/builder.h"

namespace surge::stream {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Status Bad(std::string_view source, std::string_view what) {
  return InvalidArgumentError("{}: {}", source, what);
}

Result<std::string> RequiredString(const json& j, const char* key, std::string_view where,
                                   std::string_view source) {
  auto it = j.find(key);
  if (it == j.end()) return Bad(source, fmt::format("'{}{}' is required", where, key));
  if (!it->is_string() || it->get<std::string>().empty()) {
    return Bad(source, fmt::format("'{}{}' must be a non-empty string", where, key));
  }
  return it->get<std::string>();
}

void Softmax(const float* in, int n, float* out) {
  float m = *std::max_element(in, in + n);
  float sum = 0;
  for (int i = 0; i < n; ++i) sum += out[i] = std::exp(in[i] - m);
  for (int i = 0; i < n; ++i) out[i] /= sum;
}

}  // namespace

Result<ModelContract> ParseModelContract(std::string_view text, std::string_view source) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Bad(source, "not valid JSON");
  if (!j.is_object()) return Bad(source, "must be a JSON object");
  ModelContract c;
  auto fmt_it = j.find("format");
  if (fmt_it == j.end() || !fmt_it->is_number_integer() || fmt_it->get<int>() != 1) {
    return Bad(source, "'format' must be 1");
  }
  auto tok = j.find("tokenizer");
  if (tok == j.end() || !tok->is_object()) return Bad(source, "'tokenizer' object is required");
  SURGE_ASSIGN_OR_RETURN(std::string kind, RequiredString(*tok, "kind", "tokenizer.", source));
  if (kind != "bert_wordpiece") {
    return Bad(source, fmt::format("tokenizer.kind '{}' is not supported (bert_wordpiece)", kind));
  }
  SURGE_ASSIGN_OR_RETURN(c.vocab, RequiredString(*tok, "vocab", "tokenizer.", source));
  if (auto it = tok->find("lowercase"); it != tok->end()) {
    if (!it->is_boolean()) return Bad(source, "'tokenizer.lowercase' must be true or false");
    c.lowercase = it->get<bool>();
  }
  if (auto it = tok->find("max_length"); it != tok->end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 8 || it->get<int64_t>() > 512) {
      return Bad(source, "'tokenizer.max_length' must be an integer in 8..512");
    }
    c.max_length = it->get<int>();
  }
  auto cats = j.find("categories");
  if (cats == j.end() || !cats->is_array() || cats->empty()) {
    return Bad(source, "'categories' must be a non-empty array of names");
  }
  for (const auto& x : *cats) {
    if (!x.is_string() || x.get<std::string>().empty()) {
      return Bad(source, "'categories' must hold non-empty strings");
    }
    c.categories.push_back(x.get<std::string>());
  }
  if (auto it = j.find("sentiments"); it != j.end()) {
    if (!it->is_array() || it->size() != 3) {
      return Bad(source, "'sentiments' must list the 3 labels pos, neu and neg in output order");
    }
    const char* names[3] = {"pos", "neu", "neg"};
    for (int k = 0; k < 3; ++k) {
      int found = -1;
      for (int i = 0; i < 3; ++i) {
        if ((*it)[i].is_string() && (*it)[i].get<std::string>() == names[k]) found = i;
      }
      if (found < 0) {
        return Bad(source, fmt::format("'sentiments' must contain '{}' (pos, neu, neg)", names[k]));
      }
      c.sentiment_index[k] = found;
    }
  }
  auto outs = j.find("outputs");
  if (outs == j.end() || !outs->is_object()) return Bad(source, "'outputs' object is required");
  SURGE_ASSIGN_OR_RETURN(c.category_output, RequiredString(*outs, "category", "outputs.", source));
  SURGE_ASSIGN_OR_RETURN(c.sentiment_output,
                         RequiredString(*outs, "sentiment", "outputs.", source));
  SURGE_ASSIGN_OR_RETURN(c.keyword_output, RequiredString(*outs, "keyword", "outputs.", source));
  SURGE_ASSIGN_OR_RETURN(c.embedding_output,
                         RequiredString(*outs, "embedding", "outputs.", source));
  return c;
}

Result<std::shared_ptr<const ModelRunner>> ModelRunner::Load(const std::string& dir,
                                                             const ModelOptions& options) {
  if (!fs::is_directory(dir)) {
    return NotFoundError(
        "model folder '{}' does not exist (expected model.onnx, vocab.txt and "
        "surge_model.json in it)",
        dir);
  }
  const std::string contract_path = (fs::path(dir) / "surge_model.json").string();
  const std::string onnx_path = (fs::path(dir) / "model.onnx").string();
  if (!fs::exists(contract_path)) {
    return NotFoundError(
        "model folder '{}' has no surge_model.json (the contract: tokenizer, "
        "categories, output names)",
        dir);
  }
  if (!fs::exists(onnx_path)) return NotFoundError("model folder '{}' has no model.onnx", dir);
  SURGE_ASSIGN_OR_RETURN(std::string contract_text, ReadFileToString(contract_path));
  std::unique_ptr<ModelRunner> r(new ModelRunner());
  r->dir_ = dir;
  r->options_ = options;
  SURGE_ASSIGN_OR_RETURN(r->contract_, ParseModelContract(contract_text, contract_path));
  const ModelContract& c = r->contract_;
  text::BertOptions bo;
  bo.lowercase = c.lowercase;
  auto tok = text::BertTokenizer::FromVocabFile((fs::path(dir) / c.vocab).string(), bo);
  if (!tok.ok()) return tok.status().WithContext(fmt::format("model folder '{}'", dir));
  r->tokenizer_ = std::move(*tok);

  if (options.max_batch < 1 || options.max_batch > 4096) {
    return InvalidArgumentError("model batch size {} outside 1..4096", options.max_batch);
  }
  engine::BuilderConfig config;
  config.backend = options.backend;
  config.num_threads = options.threads;
  std::string spec;
  int opt_batch = std::min(16, options.max_batch);
  int opt_seq = std::min(32, c.max_length);
  for (const char* name : {"input_ids", "attention_mask", "token_type_ids"}) {
    spec += fmt::format("{}{}:1x1,{}x{},{}x{}", spec.empty() ? "" : ";", name, opt_batch, opt_seq,
                        options.max_batch, c.max_length);
  }
  SURGE_ASSIGN_OR_RETURN(config.profile, engine::Profile::Parse(spec));
  auto t0 = std::chrono::steady_clock::now();
  auto plan = engine::builder::Build(onnx_path, config);
  if (!plan.ok()) return plan.status().WithContext(fmt::format("building '{}'", onnx_path));
  auto eng = engine::Engine::LoadFromMemory(
      {reinterpret_cast<const uint8_t*>(plan->data()), plan->size()});
  if (!eng.ok())
    return eng.status().WithContext(fmt::format("loading the plan of '{}'", onnx_path));
  r->engine_ = std::move(*eng);
  r->build_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  // The contract's inputs and outputs must be there.
  for (const char* name : {"input_ids", "attention_mask", "token_type_ids"}) {
    bool found = false;
    for (const auto& in : r->engine_->inputs()) found |= in.name == name;
    if (!found) {
      return InvalidArgumentError(
          "model '{}' has no input '{}' (the contract needs input_ids, "
          "attention_mask, token_type_ids)",
          onnx_path, name);
    }
  }
  auto rank_of = [&](const std::string& name) -> int {
    for (const auto& o : r->engine_->outputs()) {
      if (o.name == name) return static_cast<int>(o.shape.size());
    }
    return -1;
  };
  struct Want {
    const std::string* name;
    int rank;
    const char* what;
  };
  for (const Want& w :
       {Want{&c.category_output, 2, "[batch, categories]"},
        Want{&c.sentiment_output, 2, "[batch, 3]"}, Want{&c.keyword_output, 2, "[batch, seq]"},
        Want{&c.embedding_output, 2, "[batch, hidden]"}}) {
    int rank = rank_of(*w.name);
    if (rank < 0) {
      return InvalidArgumentError("model '{}' has no output '{}' named by surge_model.json",
                                  onnx_path, *w.name);
    }
    if (rank != w.rank) {
      return InvalidArgumentError("model '{}': output '{}' has rank {}, expected {}", onnx_path,
                                  *w.name, rank, w.what);
    }
  }
  // One warm-up row checks the output shapes end to end and tells the embedding width.
  {
    SURGE_ASSIGN_OR_RETURN(auto session, r->NewSession());
    ModelOutputs probe;
    std::string_view text = "warm up";
    Status st = session->Run({&text, 1}, &probe);
    if (!st.ok()) return st.WithContext(fmt::format("model '{}' warm-up", onnx_path));
    r->hidden_ = probe.hidden;
  }
  SURGE_LOG_INFO(
      "model {}: plan built in {:.0f} ms ({} backend, batch <= {}, seq <= {}, {} "
      "categories, embedding {})",
      dir, r->build_ms_, options.backend, options.max_batch, c.max_length, c.categories.size(),
      r->hidden_);
  return std::shared_ptr<const ModelRunner>(std::move(r));
}

Result<std::unique_ptr<ModelSession>> ModelRunner::NewSession() const {
  std::unique_ptr<ModelSession> s(new ModelSession());
  s->runner_ = this;
  SURGE_ASSIGN_OR_RETURN(s->ctx_, engine_->CreateContext());
  return s;
}

Status ModelSession::Run(std::span<const std::string_view> texts, ModelOutputs* out) {
  const ModelRunner& r = *runner_;
  const ModelContract& c = r.contract_;
  const size_t n = texts.size();
  out->categories = static_cast<int>(c.categories.size());
  out->hidden = r.hidden_;
  out->category.assign(n * c.categories.size(), 0);
  out->sentiment.assign(n * 3, 0);
  out->embedding.clear();
  out->keywords.assign(n, {});
  if (enc_.size() < n) enc_.resize(n);
  text::EncodeOptions eo;
  eo.max_length = c.max_length;
  for (size_t i = 0; i < n; ++i) {
    SURGE_RETURN_IF_ERROR(r.tokenizer_->EncodeTo(texts[i], nullptr, eo, &enc_[i]));
  }
  // Length buckets: sort by token count, cut into batches of max_batch rows.
  order_.resize(n);
  for (size_t i = 0; i < n; ++i) order_[i] = i;
  std::stable_sort(order_.begin(), order_.end(),
                   [&](size_t a, size_t b) { return enc_[a].size() < enc_[b].size(); });
  const size_t max_batch = static_cast<size_t>(r.options_.max_batch);
  for (size_t begin = 0; begin < n; begin += max_batch) {
    size_t end = std::min(n, begin + max_batch);
    int64_t seq = static_cast<int64_t>(enc_[order_[end - 1]].size());
    seq = std::min<int64_t>((seq + 7) / 8 * 8, c.max_length);
    SURGE_RETURN_IF_ERROR(
        RunBatch(std::span<const size_t>(order_.data() + begin, end - begin), seq, out));
  }
  return Status::Ok();
}

Status ModelSession::RunBatch(std::span<const size_t> rows, int64_t seq, ModelOutputs* out) {
  const ModelRunner& r = *runner_;
  const ModelContract& c = r.contract_;
  const int64_t b = static_cast<int64_t>(rows.size());
  Tensor ids(DType::kInt64, {b, seq}), mask(DType::kInt64, {b, seq}),
      types(DType::kInt64, {b, seq});
  int64_t* pi = ids.data_as<int64_t>();
  int64_t* pm = mask.data_as<int64_t>();
  int64_t* pt = types.data_as<int64_t>();
  const int32_t pad = r.tokenizer_->pad_id();
  for (int64_t row = 0; row < b; ++row) {
    const text::Encoding& e = enc_[rows[row]];
    for (int64_t j = 0; j < seq; ++j) {
      bool real = j < static_cast<int64_t>(e.size());
      pi[row * seq + j] = real ? e.ids[j] : pad;
      pm[row * seq + j] = real ? 1 : 0;
      pt[row * seq + j] = real ? e.type_ids[j] : 0;
    }
    real_tokens_ += static_cast<int64_t>(e.size());
  }
  padded_tokens_ += b * seq;
  ++batches_;
  engine::TensorMap inputs;
  inputs.emplace("input_ids", std::move(ids));
  inputs.emplace("attention_mask", std::move(mask));
  inputs.emplace("token_type_ids", std::move(types));
  SURGE_ASSIGN_OR_RETURN(engine::TensorMap outputs, ctx_->Run(inputs));
  auto get = [&](const std::string& name, int64_t dim1, const char* what) -> Result<const Tensor*> {
    auto it = outputs.find(name);
    if (it == outputs.end()) return InternalError("model output '{}' missing", name);
    const Tensor& t = it->second;
    if (t.dtype() != DType::kFloat32 || t.rank() != 2 || t.dim(0) != b ||
        (dim1 > 0 && t.dim(1) != dim1)) {
      return InvalidArgumentError("model output '{}' is {} {}, expected float32 [{}, {}] ({})",
                                  name, DTypeName(t.dtype()), ShapeToString(t.shape()), b,
                                  dim1 > 0 ? std::to_string(dim1) : "H", what);
    }
    return &t;
  };
  const int64_t C = static_cast<int64_t>(c.categories.size());
  SURGE_ASSIGN_OR_RETURN(const Tensor* cat, get(c.category_output, C, "categories"));
  SURGE_ASSIGN_OR_RETURN(const Tensor* sent, get(c.sentiment_output, 3, "pos/neu/neg"));
  SURGE_ASSIGN_OR_RETURN(const Tensor* kw, get(c.keyword_output, seq, "one logit per token"));
  SURGE_ASSIGN_OR_RETURN(const Tensor* emb, get(c.embedding_output, 0, "hidden"));
  const int64_t H = emb->dim(1);
  if (out->hidden == 0) {
    out->hidden = static_cast<int>(H);
  } else if (out->hidden != H) {
    return InvalidArgumentError("model embedding width changed from {} to {}", out->hidden, H);
  }
  if (out->embedding.empty()) out->embedding.assign(out->keywords.size() * H, 0);
  const float* pc = cat->data_as<float>();
  const float* ps = sent->data_as<float>();
  const float* pk = kw->data_as<float>();
  const float* pe = emb->data_as<float>();
  for (int64_t row = 0; row < b; ++row) {
    const size_t i = rows[row];
    Softmax(pc + row * C, static_cast<int>(C), out->category.data() + i * C);
    float s[3];
    Softmax(ps + row * 3, 3, s);
    for (int k = 0; k < 3; ++k) out->sentiment[i * 3 + k] = s[c.sentiment_index[k]];
    double norm = 0;
    for (int64_t h = 0; h < H; ++h) norm += double(pe[row * H + h]) * pe[row * H + h];
    float inv = norm > 0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.f;
    for (int64_t h = 0; h < H; ++h) out->embedding[i * H + h] = pe[row * H + h] * inv;
    const text::Encoding& e = enc_[i];
    auto& list = out->keywords[i];
    list.clear();
    for (size_t j = 0; j < e.size() && static_cast<int64_t>(j) < seq; ++j) {
      if (e.special_tokens_mask[j]) continue;
      float p = 1.0f / (1.0f + std::exp(-pk[row * seq + j]));
      list.push_back({e.offsets[j].first, e.offsets[j].second, p});
    }
  }
  return Status::Ok();
}

}  // namespace surge::stream
