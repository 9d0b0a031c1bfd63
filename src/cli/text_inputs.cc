#include "cli/text_inputs.h"

#include <algorithm>
#include <fstream>

#include "cli/engine_io.h"
#include "engine/builder/builder.h"
#include "text/bert_tokenizer.h"

namespace surge::cli {
namespace {

bool Has(const std::string& s, std::string_view part) { return s.find(part) != s.npos; }

// The largest sequence length the model takes (its default profile's seq max), 0 if unknown.
int64_t ModelMaxSeq(const engine::ir::Graph& graph) {
  auto p = engine::builder::ResolveProfile(graph, {});
  if (!p.ok()) return 0;
  for (const auto& ip : p->inputs) {
    if (Has(ip.name, "input_ids") && ip.max.size() == 2) return ip.max[1];
  }
  return 0;
}

}  // namespace

void AddTextInputOptions(CLI::App& sub, TextInputOptions* o) {
  sub.add_option("--vocab", o->vocab, "the model's BERT vocab.txt (with --texts)");
  sub.add_option("--tokenizer", o->tokenizer_json, "or its tokenizer.json (with --texts)");
  sub.add_option("--max-length", o->max_length,
                 "tokens per post incl. [CLS]/[SEP] (0: min(128, model positions))");
  sub.add_option("--batch", o->batch, "posts per batch")->capture_default_str();
}

std::vector<std::string> SplitCommaList(const std::string& text) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    if (end > pos) out.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

Result<std::unique_ptr<text::Tokenizer>> LoadTokenizer(const TextInputOptions& o) {
  if (o.vocab.empty() == o.tokenizer_json.empty()) {
    return InvalidArgumentError(
        "text inputs need exactly one of --vocab VOCAB.txt and --tokenizer tokenizer.json (the "
        "model's own vocabulary)");
  }
  if (!o.vocab.empty()) {
    SURGE_ASSIGN_OR_RETURN(auto t, text::BertTokenizer::FromVocabFile(o.vocab));
    return std::unique_ptr<text::Tokenizer>(std::move(t));
  }
  SURGE_ASSIGN_OR_RETURN(auto t, text::BertTokenizer::FromTokenizerJson(o.tokenizer_json));
  return std::unique_ptr<text::Tokenizer>(std::move(t));
}

Result<std::vector<std::string>> ReadTextLines(const std::string& path, size_t max_lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open text file '{}'", path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    lines.push_back(std::move(line));
    if (max_lines > 0 && lines.size() >= max_lines) break;
  }
  if (lines.empty()) {
    return InvalidArgumentError("text file '{}' has no non-empty line (one post per line)", path);
  }
  return lines;
}

Result<std::vector<engine::TensorMap>> TextBatches(const engine::ir::Graph& graph,
                                                   const std::vector<std::string>& texts,
                                                   const text::Tokenizer& tok,
                                                   const TextInputOptions& o) {
  if (o.batch < 1) return InvalidArgumentError("--batch must be >= 1, not {}", o.batch);
  const int64_t model_max = ModelMaxSeq(graph);
  int max_length = o.max_length;
  if (max_length == 0) {
    max_length = static_cast<int>(model_max > 0 ? std::min<int64_t>(128, model_max) : 128);
  }
  if (max_length < 3) return InvalidArgumentError("--max-length {} is too small", max_length);
  if (model_max > 0 && max_length > model_max) {
    return InvalidArgumentError("--max-length {} exceeds the {} positions this model takes",
                                max_length, model_max);
  }
  enum class Role { kIds, kMask, kTypes, kPositions };
  std::vector<std::pair<std::string, Role>> roles;
  for (int id : graph.inputs) {
    const auto& v = graph.values[id];
    Role r;
    if (Has(v.name, "input_ids")) {
      r = Role::kIds;
    } else if (Has(v.name, "mask")) {
      r = Role::kMask;
    } else if (Has(v.name, "token_type") || Has(v.name, "segment")) {
      r = Role::kTypes;
    } else if (Has(v.name, "position")) {
      r = Role::kPositions;
    } else {
      return InvalidArgumentError(
          "the model's input '{}' cannot be made from text (known: input_ids, attention_mask, "
          "token_type_ids, position_ids); pass tensors with --inputs",
          v.name);
    }
    if (!v.shape || v.shape->size() != 2) {
      return InvalidArgumentError("the model's input '{}' is not [batch, seq]", v.name);
    }
    roles.emplace_back(v.name, r);
  }
  const int64_t vocab = VocabSize(graph);
  std::vector<engine::TensorMap> out;
  text::BatchOptions bo;
  bo.max_length = max_length;
  for (size_t begin = 0; begin < texts.size(); begin += o.batch) {
    const size_t end = std::min(texts.size(), begin + o.batch);
    std::vector<std::string_view> views(texts.begin() + begin, texts.begin() + end);
    SURGE_ASSIGN_OR_RETURN(auto encs, tok.EncodeBatch(views, bo));
    const int64_t b = static_cast<int64_t>(encs.size());
    const int64_t s = encs.empty() ? 0 : static_cast<int64_t>(encs[0].size());
    engine::TensorMap m;
    for (const auto& [name, role] : roles) {
      Tensor t(DType::kInt64, {b, s});
      int64_t* p = t.data_as<int64_t>();
      for (int64_t r = 0; r < b; ++r) {
        for (int64_t c = 0; c < s; ++c) {
          const auto& e = encs[r];
          int64_t v = 0;
          switch (role) {
            case Role::kIds:
              v = e.ids[c];
              if (vocab > 0 && v >= vocab) {
                return InvalidArgumentError(
                    "text line {} has token id {} ('{}'), outside the model's {}-row embedding "
                    "table: the vocabulary ({} entries) does not belong to this model",
                    begin + r + 1, v, tok.IdToToken(static_cast<int32_t>(v)), vocab,
                    tok.vocab_size());
              }
              break;
            case Role::kMask:
              v = e.attention_mask[c];
              break;
            case Role::kTypes:
              v = e.type_ids[c];
              break;
            case Role::kPositions:
              v = c;
              break;
          }
          p[r * s + c] = v;
        }
      }
      m.emplace(name, std::move(t));
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace surge::cli
