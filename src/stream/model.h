// The annotate stage's model: a BERT-class encoder with four heads, from a model folder.
//
// ## The model-folder contract
//
//   DIR/model.onnx          the network
//   DIR/vocab.txt           WordPiece vocabulary (one token per line, id = line - 1)
//   DIR/surge_model.json    what the network means:
//
//   {"format":1,
//    "tokenizer":{"kind":"bert_wordpiece","vocab":"vocab.txt","lowercase":true,"max_length":64},
//    "categories":["科技","体育",...],
//    "sentiments":["pos","neu","neg"],
//    "outputs":{"category":"category_logits","sentiment":"sentiment_logits",
//               "keyword":"keyword_logits","embedding":"embedding"}}
//
// ONNX inputs: input_ids, attention_mask, token_type_ids, int64 [batch, seq] ([CLS] text [SEP],
// padding with attention 0). Outputs (float32): category_logits [batch, C] with C =
// len(categories); sentiment_logits [batch, 3] in the order of "sentiments" (which must name pos,
// neu and neg); keyword_logits [batch, seq], one logit per token that the token belongs to a
// keyword; embedding [batch, H], the pooled [CLS] vector. Every key above is required except
// "lowercase" (default true), "max_length" (default 64, 8..512) and "sentiments" (default
// ["pos","neu","neg"]); unknown keys are ignored.
//
// ModelRunner::Load builds a plan with Surge's engine (profile: batch 1..max_batch, seq
// 1..max_length) and checks that the outputs exist with the right ranks. Inference runs in
// length-bucketed batches: texts are sorted by token count and cut into batches of at most
// max_batch whose padded length is the longest row, rounded up to a multiple of 8.
//
// Thread safety: a ModelRunner is immutable and shared; each worker thread makes its own
// ModelSession (it owns an execution context and scratch).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/runtime/engine.h"
#include "text/bert_tokenizer.h"

namespace surge::stream {

struct ModelContract {
  std::string vocab = "vocab.txt";
  bool lowercase = true;
  int max_length = 64;
  std::vector<std::string> categories;
  int sentiment_index[3] = {0, 1, 2};  // where pos, neu, neg are in sentiment_logits
  std::string category_output = "category_logits";
  std::string sentiment_output = "sentiment_logits";
  std::string keyword_output = "keyword_logits";
  std::string embedding_output = "embedding";
};

// Parses surge_model.json; errors name `source`, the key and what is valid.
Result<ModelContract> ParseModelContract(std::string_view json, std::string_view source);

struct ModelOptions {
  std::string backend = "cpu";
  int max_batch = 64;
  int threads = 1;  // engine threads per session (0: all cores)
};

// Per text: a keyword probability for a byte range of the text (one WordPiece token).
struct TokenWeight {
  uint32_t begin = 0;
  uint32_t end = 0;
  float prob = 0;
};

struct ModelOutputs {
  int categories = 0;
  int hidden = 0;
  std::vector<float> category;                     // N x categories, softmax
  std::vector<float> sentiment;                    // N x 3 (pos, neu, neg), softmax
  std::vector<float> embedding;                    // N x hidden, L2-normalised
  std::vector<std::vector<TokenWeight>> keywords;  // N lists, sigmoid of keyword_logits
};

class ModelSession;

class ModelRunner {
 public:
  static Result<std::shared_ptr<const ModelRunner>> Load(const std::string& dir,
                                                         const ModelOptions& options = {});
  const ModelContract& contract() const { return contract_; }
  const std::string& dir() const { return dir_; }
  int hidden() const { return hidden_; }
  double build_ms() const { return build_ms_; }
  // A session; the runner must outlive it.
  Result<std::unique_ptr<ModelSession>> NewSession() const;

 private:
  friend class ModelSession;
  ModelRunner() = default;
  std::string dir_;
  ModelContract contract_;
  ModelOptions options_;
  std::unique_ptr<text::BertTokenizer> tokenizer_;
  std::shared_ptr<const engine::Engine> engine_;
  int hidden_ = 0;
  double build_ms_ = 0;
};

class ModelSession {
 public:
  // Runs the model on `texts` (any number; batched internally). Fills `out` for every text in
  // order.
  Status Run(std::span<const std::string_view> texts, ModelOutputs* out);
  int64_t batches() const { return batches_; }
  int64_t padded_tokens() const { return padded_tokens_; }
  int64_t real_tokens() const { return real_tokens_; }

 private:
  friend class ModelRunner;
  ModelSession() = default;
  Status RunBatch(std::span<const size_t> rows, int64_t seq, ModelOutputs* out);

  const ModelRunner* runner_ = nullptr;
  std::unique_ptr<engine::ExecutionContext> ctx_;
  std::vector<text::Encoding> enc_;
  std::vector<size_t> order_;
  int64_t batches_ = 0;
  int64_t padded_tokens_ = 0;
  int64_t real_tokens_ = 0;
};

}  // namespace surge::stream
