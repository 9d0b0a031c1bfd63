#include "text/bert_tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "text/utf8.h"

namespace surge::text {
namespace {

const std::string kDir = std::string(SURGE_SOURCE_DIR) + "/tests/fixtures/text/";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> CorpusLines() {
  std::string text = ReadAll(kDir + "weibo_corpus.txt");
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

// Decodes the compact offsets of tokenizer_reference.jsonl (see make_tokenizer_reference.py).
std::vector<Offset> DecodeOffsets(const std::string& s) {
  static const std::string kAlphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCD";
  std::vector<Offset> out;
  int64_t prev_end = 0;
  for (size_t i = 0; i < s.size();) {
    int64_t gap, len;
    if (s[i] == '(') {
      size_t comma = s.find(',', i), close = s.find(')', i);
      gap = std::stoll(s.substr(i + 1, comma - i - 1));
      len = std::stoll(s.substr(comma + 1, close - comma - 1));
      i = close + 1;
    } else {
      size_t k = kAlphabet.find(s[i]);
      gap = static_cast<int64_t>(k / 10);
      len = static_cast<int64_t>(k % 10);
      ++i;
    }
    int64_t begin = prev_end + gap;
    out.emplace_back(static_cast<uint32_t>(begin), static_cast<uint32_t>(begin + len));
    prev_end = begin + len;
  }
  return out;
}

// Byte offset of every code point boundary (invalid bytes count as one code point each).
std::vector<uint32_t> CharToByte(std::string_view s) {
  std::vector<uint32_t> map;
  size_t pos = 0;
  while (pos < s.size()) {
    map.push_back(static_cast<uint32_t>(pos));
    pos += DecodeUtf8At(s, pos).length;
  }
  map.push_back(static_cast<uint32_t>(pos));
  return map;
}

BertOptions Cased(std::optional<bool> strip_accents = std::nullopt, bool lowercase = false) {
  BertOptions o;
  o.lowercase = lowercase;
  o.strip_accents = strip_accents;
  return o;
}

std::unique_ptr<BertTokenizer> Load(BertOptions options = {}) {
  auto tok = BertTokenizer::FromVocabFile(kDir + "vocab.txt", std::move(options));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return std::move(tok).value();
}

std::string Tokens(const Tokenizer& tok, const Encoding& e) {
  std::string s;
  for (size_t i = 0; i < e.size(); ++i) {
    s += std::string(tok.IdToToken(e.ids[i])) + "(" + std::to_string(e.char_offsets[i].first) +
         "," + std::to_string(e.char_offsets[i].second) + ") ";
  }
  return s;
}

TEST(BertTokenizerReference, MatchesHuggingFaceOnEveryRecord) {
  std::vector<std::string> lines = CorpusLines();
  ASSERT_GE(lines.size(), 5000u);
  std::map<std::string, std::unique_ptr<BertTokenizer>> toks;
  toks["lc"] = Load();
  toks["cased"] = Load(Cased());
  toks["cased_strip"] = Load(Cased(true));
  toks["lc_nostrip"] = Load(Cased(false, /*lowercase=*/true));

  std::ifstream in(kDir + "tokenizer_reference.jsonl");
  ASSERT_TRUE(in) << "missing tokenizer_reference.jsonl";
  std::string line;
  size_t records = 0, mismatches = 0;
  std::map<std::string, size_t> per_cfg;
  Encoding enc;
  while (std::getline(in, line)) {
    auto rec = nlohmann::json::parse(line);
    const std::string cfg = rec["cfg"];
    const BertTokenizer& tok = *toks.at(cfg);
    const std::string& a = lines.at(rec["a"].get<size_t>());
    std::string b;
    EncodeOptions options;
    if (rec.contains("max")) options.max_length = rec["max"];
    if (rec.contains("b")) b = lines.at(rec["b"].get<size_t>());
    std::string_view bv = b;
    ASSERT_TRUE(tok.EncodeTo(a, rec.contains("b") ? &bv : nullptr, options, &enc).ok());
    ++records;
    ++per_cfg[cfg];
    std::vector<int32_t> ids = rec["ids"].get<std::vector<int32_t>>();
    std::vector<Offset> offs = DecodeOffsets(rec["offs"]);
    std::vector<int32_t> types(ids.size(), 0);
    if (rec.contains("types")) {
      std::string t = rec["types"];
      for (size_t i = 0; i < t.size(); ++i) types[i] = t[i] - '0';
    }
    // Expected byte offsets from the character offsets: sequence B's offsets index into B.
    std::vector<uint32_t> map_a = CharToByte(a), map_b = CharToByte(b);
    std::vector<Offset> bytes;
    for (size_t i = 0; i < offs.size(); ++i) {
      const auto& m = types[i] == 1 ? map_b : map_a;
      bytes.emplace_back(m.at(offs[i].first), m.at(offs[i].second));
    }
    bool same =
        enc.ids == ids && enc.char_offsets == offs && enc.type_ids == types && enc.offsets == bytes;
    if (!same && ++mismatches <= 5) {
      ADD_FAILURE() << "cfg " << cfg << " line " << rec["a"] << (rec.contains("b") ? " pair" : "")
                    << " max " << options.max_length << "\n text: " << a
                    << "\n surge: " << Tokens(tok, enc) << "\n hf:    " <<
          [&] {
            Encoding ref;
            for (size_t i = 0; i < ids.size(); ++i) {
              ref.Push(ids[i], 0, false, {}, offs[i]);
            }
            return Tokens(tok, ref);
          }()
                    << "\n ids equal: " << (enc.ids == ids)
                    << " chars equal: " << (enc.char_offsets == offs)
                    << " bytes equal: " << (enc.offsets == bytes);
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << records << " records";
  EXPECT_GE(per_cfg["lc"], lines.size());
  EXPECT_GT(per_cfg["cased"], 0u);
  EXPECT_GT(per_cfg["cased_strip"], 0u);
  EXPECT_GT(per_cfg["lc_nostrip"], 0u);
}

}  // namespace
}  // namespace surge::text
