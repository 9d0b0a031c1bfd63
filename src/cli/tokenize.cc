// `surge tokenize`: BERT WordPiece (or SentencePiece) token ids of --text or of each stdin line.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "text/bert_tokenizer.h"
#include "text/sentencepiece_tokenizer.h"

namespace surge::cli {
namespace {

constexpr const char* kFixtureVocab = "tests/fixtures/text/vocab.txt";

struct TokenizeArgs {
  std::string vocab;
  std::string tokenizer_json;
  std::string spm;
  std::string text;
  std::string pair;
  int max_length = 0;
  bool json = false;
  bool no_special = false;
};

// The committed fixture vocabulary, looked for under the working directory and under the
// directories above the executable (build/<preset>/bin/surge lives three levels below the root).
std::string FindDefaultVocab() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(kFixtureVocab, ec)) return kFixtureVocab;
  fs::path dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  for (int up = 0; up < 5 && !ec && !dir.empty(); ++up, dir = dir.parent_path()) {
    if (fs::exists(dir / kFixtureVocab, ec)) return (dir / kFixtureVocab).string();
  }
  return "";
}

int RunTokenize(const TokenizeArgs& a) {
  int sources = !a.vocab.empty() + !a.tokenizer_json.empty() + !a.spm.empty();
  if (sources > 1) {
    std::cerr << "error: give only one of --vocab, --tokenizer and --spm\n";
    return 2;
  }
  if (a.max_length < 0) {
    std::cerr << "error: --max-length must be >= 0 (0: no truncation), not " << a.max_length
              << '\n';
    return 2;
  }
  Result<std::unique_ptr<text::Tokenizer>> tok = Status(StatusCode::kInternal, "unset");
  if (!a.spm.empty()) {
    auto t = text::SentencePieceTokenizer::Load(a.spm);
    tok = t.ok() ? Result<std::unique_ptr<text::Tokenizer>>(std::move(t).value())
                 : Result<std::unique_ptr<text::Tokenizer>>(t.status());
  } else if (!a.tokenizer_json.empty()) {
    auto t = text::BertTokenizer::FromTokenizerJson(a.tokenizer_json);
    tok = t.ok() ? Result<std::unique_ptr<text::Tokenizer>>(std::move(t).value())
                 : Result<std::unique_ptr<text::Tokenizer>>(t.status());
  } else {
    std::string vocab = a.vocab.empty() ? FindDefaultVocab() : a.vocab;
    if (vocab.empty()) {
      std::cerr << "error: no --vocab, --tokenizer or --spm given and the default vocabulary ("
                << kFixtureVocab << ") was not found from here\n";
      return 2;
    }
    auto t = text::BertTokenizer::FromVocabFile(vocab);
    tok = t.ok() ? Result<std::unique_ptr<text::Tokenizer>>(std::move(t).value())
                 : Result<std::unique_ptr<text::Tokenizer>>(t.status());
  }
  if (!tok.ok()) {
    std::cerr << "error: " << tok.status().ToString() << '\n';
    return 1;
  }
  text::EncodeOptions options;
  options.max_length = a.max_length;
  options.add_special_tokens = !a.no_special;
  text::Encoding enc;
  auto run = [&](const std::string& line) {
    std::string_view pair = a.pair;
    Status st = (*tok)->EncodeTo(line, a.pair.empty() ? nullptr : &pair, options, &enc);
    if (!st.ok()) {
      std::cerr << "error: " << st.ToString() << '\n';
      return false;
    }
    if (a.json) {
      nlohmann::json j;
      j["ids"] = enc.ids;
      nlohmann::json tokens = nlohmann::json::array(), offsets = nlohmann::json::array(),
                     chars = nlohmann::json::array();
      for (size_t i = 0; i < enc.size(); ++i) {
        tokens.push_back(std::string((*tok)->IdToToken(enc.ids[i])));
        offsets.push_back({enc.offsets[i].first, enc.offsets[i].second});
        chars.push_back({enc.char_offsets[i].first, enc.char_offsets[i].second});
      }
      j["tokens"] = std::move(tokens);
      j["type_ids"] = enc.type_ids;
      j["offsets"] = std::move(offsets);
      j["char_offsets"] = std::move(chars);
      std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    } else {
      for (size_t i = 0; i < enc.size(); ++i) {
        std::cout << (i ? " " : "") << (*tok)->IdToToken(enc.ids[i]) << '/' << enc.ids[i];
      }
      std::cout << '\n';
    }
    return true;
  };
  if (!a.text.empty()) return run(a.text) ? 0 : 1;
  for (std::string line; std::getline(std::cin, line);) {
    if (!run(line)) return 1;
  }
  return 0;
}

SURGE_REGISTER_COMMAND(
    tokenize, "tokenize", "BERT WordPiece / SentencePiece token ids of text (HF-compatible)",
    [](CLI::App& sub) -> std::function<int()> {
      auto a = std::make_shared<TokenizeArgs>();
      sub.add_option("--vocab", a->vocab, "BERT vocab.txt (default: the test fixture vocabulary)");
      sub.add_option("--tokenizer", a->tokenizer_json, "HF tokenizer.json with a WordPiece model");
      sub.add_option("--spm", a->spm, "SentencePiece .model (XLM-R ids)");
      sub.add_option("--text", a->text, "text to encode (default: stdin lines)");
      sub.add_option("--pair", a->pair, "second sequence of a pair");
      sub.add_option("--max-length", a->max_length,
                     "truncate to N tokens including specials (0: off)");
      sub.add_flag("--json", a->json,
                   "one JSON object per line: ids, tokens, type_ids, offsets "
                   "(bytes), char_offsets");
      sub.add_flag("--no-special", a->no_special, "do not add [CLS]/[SEP] (or <s>/</s>)");
      return [a] { return RunTokenize(*a); };
    });

}  // namespace
}  // namespace surge::cli
