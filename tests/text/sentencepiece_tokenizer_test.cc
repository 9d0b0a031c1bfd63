#include "text/sentencepiece_tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "text/utf8.h"

namespace surge::text {
namespace {

const std::string kDir = std::string(SURGE_SOURCE_DIR) + "/tests/fixtures/text/";

std::vector<std::string> CorpusLines() {
  std::ifstream in(kDir + "weibo_corpus.txt", std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size();) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

std::unique_ptr<SentencePieceTokenizer> Load() {
  auto tok = SentencePieceTokenizer::Load(kDir + "spm_tiny.model");
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return std::move(tok).value();
}

TEST(SentencePieceTokenizer, MatchesSentencePieceReferenceWithXlmrIds) {
  auto tok = Load();
  ASSERT_TRUE(tok);
  std::vector<std::string> lines = CorpusLines();
  std::ifstream in(kDir + "spm_reference.jsonl");
  ASSERT_TRUE(in);
  size_t records = 0, mismatches = 0, pairs = 0;
  Encoding enc;
  for (std::string line; std::getline(in, line);) {
    auto rec = nlohmann::json::parse(line);
    const std::string& a = lines.at(rec["a"].get<size_t>());
    std::string b = rec.contains("b") ? lines.at(rec["b"].get<size_t>()) : "";
    std::string_view bv = b;
    ASSERT_TRUE(tok->EncodeTo(a, rec.contains("b") ? &bv : nullptr, {}, &enc).ok());
    pairs += rec.contains("b");
    ++records;
    auto ids = rec["ids"].get<std::vector<int32_t>>();
    auto offs = rec["offs"].get<std::vector<uint32_t>>();
    std::vector<Offset> expected;
    for (size_t i = 0; i + 1 < offs.size(); i += 2) expected.emplace_back(offs[i], offs[i + 1]);
    // Byte offsets must describe the same ranges as the code point offsets.
    std::vector<uint32_t> char_to_byte;
    std::string_view text = a;
    for (size_t i = 0; i < enc.size(); ++i) {
      if (i > 0 && enc.ids[i - 1] == 2 && enc.ids[i] == 2 && rec.contains("b")) text = bv;
      if (enc.special_tokens_mask[i]) continue;
      std::vector<uint32_t> starts;
      for (size_t p = 0; p < text.size(); p += DecodeUtf8At(text, p).length) {
        starts.push_back(static_cast<uint32_t>(p));
      }
      starts.push_back(static_cast<uint32_t>(text.size()));
      EXPECT_EQ(enc.offsets[i].first, starts.at(enc.char_offsets[i].first));
      EXPECT_EQ(enc.offsets[i].second, starts.at(enc.char_offsets[i].second));
    }
    if ((enc.ids != ids || enc.char_offsets != expected) && ++mismatches <= 3) {
      std::string got, want;
      for (size_t i = 0; i < enc.size(); ++i)
        got += std::to_string(enc.ids[i]) + "(" + std::to_string(enc.char_offsets[i].first) + "," +
               std::to_string(enc.char_offsets[i].second) + ") ";
      for (size_t i = 0; i < ids.size(); ++i)
        want += std::to_string(ids[i]) + "(" + std::to_string(expected[i].first) + "," +
                std::to_string(expected[i].second) + ") ";
      ADD_FAILURE() << "line " << rec["a"] << ": " << a << "\n got  " << got << "\n want " << want;
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << records;
  EXPECT_GT(records, 1000u);
  EXPECT_GT(pairs, 0u);
}

TEST(SentencePieceTokenizer, SpecialTokensTruncationAndCharOffsets) {
  auto tok = Load();
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->TokenToId("<s>"), 0);
  EXPECT_EQ(tok->TokenToId("<pad>"), 1);
  EXPECT_EQ(tok->TokenToId("</s>"), 2);
  EXPECT_EQ(tok->TokenToId("<unk>"), 3);
  EXPECT_EQ(tok->IdToToken(tok->vocab_size() - 1), "<mask>");
  EXPECT_EQ(tok->pad_id(), 1);

  auto enc = tok->Encode("今天天气 good");
  ASSERT_TRUE(enc.ok());
  ASSERT_GE(enc->size(), 3u);
  EXPECT_EQ(enc->ids.front(), 0);
  EXPECT_EQ(enc->ids.back(), 2);
  for (size_t i = 1; i + 1 < enc->size(); ++i) {
    // Every code point of the text is 3 bytes until the space.
    const auto [cb, ce] = enc->char_offsets[i];
    const auto [bb, be] = enc->offsets[i];
    if (be <= 12) {
      EXPECT_EQ(bb, cb * 3);
      EXPECT_EQ(be, ce * 3);
    }
  }
  auto cut = tok->EncodePair("今天天气很好，我们去公园散步吧", "明天下雨", {.max_length = 8});
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->size(), 8u);
  EXPECT_EQ(tok->Encode("x", {.max_length = 1}).status().code(), StatusCode::kInvalidArgument);
}

TEST(SentencePieceTokenizer, BadModelFilesAreErrors) {
  auto missing = SentencePieceTokenizer::Load(kDir + "no_such.model");
  EXPECT_FALSE(missing.ok());
  auto not_a_model = SentencePieceTokenizer::Load(kDir + "vocab.txt");
  EXPECT_FALSE(not_a_model.ok());
  EXPECT_NE(not_a_model.status().message().find("vocab.txt"), std::string::npos);
}

}  // namespace
}  // namespace surge::text
