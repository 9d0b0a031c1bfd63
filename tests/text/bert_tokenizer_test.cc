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
  BertOptions noclean, nochinese;
  noclean.clean_text = false;
  nochinese.handle_chinese_chars = false;
  toks["noclean"] = Load(noclean);
  toks["nochinese"] = Load(nochinese);

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
  EXPECT_GT(per_cfg["noclean"], 0u);
  EXPECT_GT(per_cfg["nochinese"], 0u);
}

std::vector<std::string> TokenStrings(const Tokenizer& tok, const Encoding& e) {
  std::vector<std::string> out;
  for (int32_t id : e.ids) out.emplace_back(tok.IdToToken(id));
  return out;
}

// Offsets must be inside the text, ordered, and special tokens must be (0, 0).
void ExpectSaneOffsets(const Encoding& e, std::string_view text) {
  const size_t chars = CharToByte(text).size() - 1;
  uint32_t prev = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    if (e.special_tokens_mask[i]) {
      EXPECT_EQ(e.offsets[i], Offset(0, 0));
      continue;
    }
    EXPECT_LE(e.offsets[i].first, e.offsets[i].second);
    EXPECT_LE(e.offsets[i].second, text.size());
    EXPECT_LE(e.char_offsets[i].second, chars);
    EXPECT_GE(e.offsets[i].first, prev);
    prev = e.offsets[i].first;
  }
}

class BertTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override { tok_ = Load(); }
  Encoding Enc(std::string_view text) {
    auto e = tok_->Encode(text);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return std::move(e).value();
  }
  int32_t Id(std::string_view t) { return tok_->TokenToId(t); }
  std::unique_ptr<BertTokenizer> tok_;
};

TEST_F(BertTokenizerTest, EmptyAndBlankTextGiveOnlySpecialTokens) {
  for (std::string_view text : {"", " ", "\t\n\r  \u3000", "\x01\x7f\u200d"}) {
    Encoding e = Enc(text);
    ASSERT_EQ(e.size(), 2u) << text;
    EXPECT_EQ(e.ids[0], Id("[CLS]"));
    EXPECT_EQ(e.ids[1], Id("[SEP]"));
    EXPECT_EQ(e.special_tokens_mask, (std::vector<int32_t>{1, 1}));
    EXPECT_EQ(e.attention_mask, (std::vector<int32_t>{1, 1}));
  }
  auto bare = tok_->Encode("", {.max_length = 0, .add_special_tokens = false});
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->size(), 0u);
}

TEST_F(BertTokenizerTest, InvalidUtf8BytesActAsReplacementCharsThatCleanTextRemoves) {
  // 0xFF and a truncated 3-byte sequence decode to U+FFFD (one per byte); clean_text drops U+FFFD
  // without splitting the word, so the result equals that of the text without them.
  Encoding bad =
      Enc("ab\xFF\xE4\xB8"
          "cd");
  Encoding good = Enc("abcd");
  EXPECT_EQ(bad.ids, good.ids);
  ExpectSaneOffsets(bad,
                    "ab\xFF\xE4\xB8"
                    "cd");
  EXPECT_EQ(bad.offsets.back() == Offset(0, 0), true);
  EXPECT_EQ(bad.offsets[bad.size() - 2].second, 7u);       // the last piece ends at 'd'
  EXPECT_EQ(bad.char_offsets[bad.size() - 2].second, 7u);  // every invalid byte is one char

  BertOptions raw;
  raw.clean_text = false;
  auto no_clean = Load(raw);
  auto e = no_clean->Encode("x\xFFy");
  ASSERT_TRUE(e.ok());
  ExpectSaneOffsets(*e, "x\xFFy");
  EXPECT_GT(e->size(), 2u);
}

TEST_F(BertTokenizerTest, ControlCharactersAreDroppedWithoutSplittingWords) {
  EXPECT_EQ(Enc("ab\x01"
                "c\x7f\u200b"
                "d\u00ad")
                .ids,
            Enc("abcd").ids);
  EXPECT_EQ(Enc("a\tb").ids, Enc("a b").ids);
  EXPECT_EQ(Enc("a\u3000b").ids, Enc("a b").ids);
}

TEST_F(BertTokenizerTest, EmojiAndZwjSequences) {
  std::string family = "👨‍👩‍👧";  // ZWJs (Cf) are removed: one word of three emoji
  Encoding e = Enc(family);
  ExpectSaneOffsets(e, family);
  ASSERT_GE(e.size(), 3u);
  EXPECT_EQ(e.offsets[1].first, 0u);
  EXPECT_EQ(e.offsets[e.size() - 2].second, family.size());
}

TEST_F(BertTokenizerTest, WordsOverOneHundredCharsBecomeOneUnknown) {
  std::string w100(100, 'a'), w101(101, 'a');
  Encoding e100 = Enc(w100);
  EXPECT_NE(e100.ids[1], Id("[UNK]"));
  Encoding e101 = Enc(w101);
  ASSERT_EQ(e101.size(), 3u);
  EXPECT_EQ(e101.ids[1], Id("[UNK]"));
  EXPECT_EQ(e101.offsets[1], Offset(0, 101));
  // The limit counts code points of the normalised word, not bytes.
  std::string cjk_free;
  for (int i = 0; i < 60; ++i) cjk_free += "é";  // 120 bytes, 60 chars
  EXPECT_NE(Enc(cjk_free).ids[1], Id("[UNK]"));
}

TEST_F(BertTokenizerTest, UnknownCharactersAndMixedScripts) {
  std::string text = "\U0001FAE8x";  // a code point the vocabulary has never seen, glued to 'x'
  Encoding e = Enc(text);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e.ids[1], Id("[UNK]"));
  EXPECT_EQ(e.offsets[1], Offset(0, 5));
  EXPECT_EQ(e.char_offsets[1], Offset(0, 2));

  std::string mixed =
      "Hello世界! İstanbul café Ｈｅｌｌｏ 東京タワー 서울 @user #话题# https://t.cn/x";
  Encoding m = Enc(mixed);
  ExpectSaneOffsets(m, mixed);
  auto toks = TokenStrings(*tok_, m);
  auto find = [&](Offset chars) {
    for (size_t i = 0; i < m.size(); ++i) {
      if (m.char_offsets[i] == chars) return static_cast<int>(i);
    }
    return -1;
  };
  // Chinese characters and punctuation are words of their own.
  ASSERT_GE(find({5, 6}), 0);
  EXPECT_TRUE(toks[find({5, 6})] == "世" || toks[find({5, 6})] == "[UNK]");
  ASSERT_GE(find({7, 8}), 0);
  EXPECT_EQ(toks[find({7, 8})], "!");
  EXPECT_EQ(m.char_offsets[1].first, 0u);  // "hello" starts the text
  // 'İ' (2 bytes) lowercases and loses its dot: the pieces of "istanbul" cover bytes 13..22.
  uint32_t lo = UINT32_MAX, hi = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    if (m.char_offsets[i].first >= 9 && m.char_offsets[i].second <= 17 &&
        !m.special_tokens_mask[i]) {
      lo = std::min(lo, m.offsets[i].first);
      hi = std::max(hi, m.offsets[i].second);
    }
  }
  EXPECT_EQ(lo, 13u);
  EXPECT_EQ(hi, 22u);
}

TEST_F(BertTokenizerTest, AddedTokensMatchLiterallyInRawText) {
  Encoding e = Enc("a[MASK]b [cls]");
  auto toks = TokenStrings(*tok_, e);
  ASSERT_GE(toks.size(), 5u);
  EXPECT_EQ(toks[2], "[MASK]");
  EXPECT_EQ(e.offsets[2], Offset(1, 7));
  EXPECT_EQ(e.special_tokens_mask[2], 0);
  EXPECT_EQ(toks[4], "[");  // lowercase [cls] is ordinary text
}

TEST_F(BertTokenizerTest, OneMegabyteTextEqualsItsLinesConcatenated) {
  std::vector<std::string> lines = CorpusLines();
  std::string big;
  std::vector<size_t> starts;
  for (size_t i = 0; big.size() < (1u << 20); ++i) {
    starts.push_back(big.size());
    big += lines[i % lines.size()];
    big += '\n';
  }
  auto whole = tok_->Encode(big, {.max_length = 0, .add_special_tokens = false});
  ASSERT_TRUE(whole.ok());
  ExpectSaneOffsets(*whole, big);
  size_t k = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    const std::string& line = lines[i % lines.size()];
    auto part = tok_->Encode(line, {.max_length = 0, .add_special_tokens = false});
    ASSERT_TRUE(part.ok());
    for (size_t j = 0; j < part->size(); ++j, ++k) {
      ASSERT_LT(k, whole->size());
      ASSERT_EQ(whole->ids[k], part->ids[j]) << "line " << i;
      ASSERT_EQ(whole->offsets[k].first, part->offsets[j].first + starts[i]);
    }
  }
  EXPECT_EQ(k, whole->size());
}

TEST_F(BertTokenizerTest, PairsTruncationAndTypeIds) {
  auto pair = tok_->EncodePair("今天天气很好", "明天下雨");
  ASSERT_TRUE(pair.ok());
  ASSERT_EQ(pair->size(), 6u + 4u + 3u);
  EXPECT_EQ(pair->type_ids, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(pair->char_offsets[8], Offset(0, 1));  // B's offsets index into B
  auto cut = tok_->EncodePair("今天天气很好", "明天下雨", {.max_length = 8});
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->size(), 8u);  // 5 tokens left: 3 of A and 2 of B
  // Both over half the budget: the budget is halved, the odd token going to the second one.
  EXPECT_EQ(LongestFirstLengths(6, 4, 5), (std::pair<size_t, size_t>(3, 2)));
  EXPECT_EQ(LongestFirstLengths(4, 4, 5), (std::pair<size_t, size_t>(2, 3)));
  EXPECT_EQ(LongestFirstLengths(10, 2, 5), (std::pair<size_t, size_t>(3, 2)));
  EXPECT_EQ(LongestFirstLengths(3, 3, 10), (std::pair<size_t, size_t>(3, 3)));
  auto small = tok_->EncodePair("a", "b", {.max_length = 2});
  EXPECT_EQ(small.status().code(), StatusCode::kInvalidArgument);
  auto single = tok_->Encode("今天天气很好", {.max_length = 4});
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->size(), 4u);
  EXPECT_EQ(single->ids.back(), Id("[SEP]"));
}

TEST_F(BertTokenizerTest, BatchPaddingAndBuffers) {
  std::vector<std::string_view> texts = {"今天天气很好", "hi", ""};
  auto longest = tok_->EncodeBatch(texts);
  ASSERT_TRUE(longest.ok());
  for (const Encoding& e : *longest) EXPECT_EQ(e.size(), 8u);
  EXPECT_EQ((*longest)[1].attention_mask, (std::vector<int32_t>{1, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_EQ((*longest)[1].ids.back(), tok_->pad_id());
  EXPECT_EQ((*longest)[1].special_tokens_mask.back(), 1);

  auto fixed = tok_->EncodeBatch(texts, {.max_length = 5, .padding = Padding::kMaxLength});
  ASSERT_TRUE(fixed.ok());
  for (const Encoding& e : *fixed) EXPECT_EQ(e.size(), 5u);
  EXPECT_FALSE(tok_->EncodeBatch(texts, {.max_length = 0, .padding = Padding::kMaxLength}).ok());
  auto none = tok_->EncodeBatch(texts, {.max_length = 0, .padding = Padding::kNone});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)[2].size(), 2u);

  // Straight into int64 tensors [3, 6] and int32 buffers.
  Tensor ids(DType::kInt64, {3, 6}), mask(DType::kInt64, {3, 6}), types(DType::kInt64, {3, 6});
  ASSERT_TRUE(tok_->EncodeBatchInto(texts, {}, &ids, &mask, &types).ok());
  // Row 0 is truncated to 6: [CLS], its first four tokens, [SEP].
  for (int64_t c = 0; c < 6; ++c) {
    EXPECT_EQ(ids.data_as<int64_t>()[c], c < 5 ? (*longest)[0].ids[c] : Id("[SEP]"));
  }
  EXPECT_EQ(mask.data_as<int64_t>()[6 + 3], 0);
  EXPECT_EQ(ids.data_as<int64_t>()[12], Id("[CLS]"));
  EXPECT_EQ(ids.data_as<int64_t>()[14], tok_->pad_id());

  std::vector<int32_t> ids32(3 * 6, -7), mask32(3 * 6, -7);
  BatchBuffers buffers;
  buffers.dtype = DType::kInt32;
  buffers.input_ids = ids32.data();
  buffers.attention_mask = mask32.data();
  buffers.batch = 3;
  buffers.seq_len = 6;
  ASSERT_TRUE(tok_->EncodeBatchInto(texts, {}, buffers).ok());
  for (int64_t i = 0; i < 18; ++i) EXPECT_EQ(ids32[i], ids.data_as<int64_t>()[i]);
  for (int64_t i = 0; i < 18; ++i) EXPECT_EQ(mask32[i], mask.data_as<int64_t>()[i]);

  Tensor wrong_dtype(DType::kFloat32, {3, 6});
  EXPECT_FALSE(tok_->EncodeBatchInto(texts, {}, &wrong_dtype, nullptr, nullptr).ok());
  Tensor wrong_rows(DType::kInt64, {2, 6});
  EXPECT_FALSE(tok_->EncodeBatchInto(texts, {}, &wrong_rows, nullptr, nullptr).ok());
  Tensor wrong_rank(DType::kInt64, {18});
  EXPECT_FALSE(tok_->EncodeBatchInto(texts, {}, &wrong_rank, nullptr, nullptr).ok());
  Tensor mismatched(DType::kInt32, {3, 6});
  EXPECT_FALSE(tok_->EncodeBatchInto(texts, {}, &ids, &mismatched, nullptr).ok());
  std::vector<std::string_view> two = {"a", "b"};
  EXPECT_FALSE(tok_->EncodeBatch(texts, {}, two).ok());

  // Pairs into buffers carry type ids.
  Tensor pids(DType::kInt32, {2, 8}), ptypes(DType::kInt32, {2, 8});
  ASSERT_TRUE(tok_->EncodeBatchInto(two, {}, &pids, nullptr, &ptypes, two).ok());
  EXPECT_EQ(ptypes.data_as<int32_t>()[3], 1);
  EXPECT_EQ(ptypes.data_as<int32_t>()[5], 0);
}

TEST_F(BertTokenizerTest, TokenizerJsonMatchesVocabFile) {
  auto from_json = BertTokenizer::FromTokenizerJson(kDir + "tokenizer.json");
  ASSERT_TRUE(from_json.ok()) << from_json.status().ToString();
  EXPECT_TRUE((*from_json)->options().lowercase);
  std::vector<std::string> lines = CorpusLines();
  for (size_t i = 0; i < lines.size(); i += 37) {
    auto a = tok_->Encode(lines[i]);
    auto b = (*from_json)->Encode(lines[i]);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->ids, b->ids);
    EXPECT_EQ(a->offsets, b->offsets);
  }
}

TEST_F(BertTokenizerTest, ConcurrentEncodingIsDeterministic) {
  std::vector<std::string> lines = CorpusLines();
  std::vector<std::vector<int32_t>> expected;
  for (size_t i = 0; i < 400; ++i) expected.push_back(Enc(lines[i]).ids);
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < 400; ++i) {
        auto e = tok_->Encode(lines[i]);
        if (!e.ok() || e->ids != expected[i]) ++bad[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
}

class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    path_ = (std::filesystem::temp_directory_path() /
             ("surge_tok_" + std::to_string(counter_++) + "_" + std::to_string(::getpid())))
                .string();
    std::ofstream(path_, std::ios::binary) << content;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

TEST(BertTokenizerLoading, BadInputsGiveClearErrors) {
  auto missing = BertTokenizer::FromVocabFile("/nonexistent/vocab.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/vocab.txt"), std::string::npos);

  TempFile empty("");
  EXPECT_FALSE(BertTokenizer::FromVocabFile(empty.path()).ok());
  TempFile no_unk("[CLS]\n[SEP]\nhello\n");
  auto e1 = BertTokenizer::FromVocabFile(no_unk.path());
  ASSERT_FALSE(e1.ok());
  EXPECT_NE(e1.status().message().find("[UNK]"), std::string::npos);
  TempFile no_cls("[UNK]\n[SEP]\n");
  EXPECT_FALSE(BertTokenizer::FromVocabFile(no_cls.path()).ok());
  TempFile binary("[UNK]\n[CLS]\n[SEP]\n\xFF\xFE\n");
  EXPECT_FALSE(BertTokenizer::FromVocabFile(binary.path()).ok());

  // CRLF line ends and trailing blanks are trimmed, as HF does.
  TempFile crlf("[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\nhello \r\n##s\r\n");
  auto ok = BertTokenizer::FromVocabFile(crlf.path());
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  auto e = (*ok)->Encode("Hellos");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->ids, (std::vector<int32_t>{2, 4, 5, 3}));

  for (std::string bad_json :
       {std::string("{"), std::string("[]"), std::string(R"({"model": {"type": "BPE"}})"),
        std::string(R"({"model": {"type": "WordPiece", "vocab": {"a": 5}}})"),
        std::string(R"({"model": {"type": "WordPiece", "vocab": {"[UNK]": 0}},
                        "pre_tokenizer": {"type": "Whitespace"}})"),
        std::string(R"({"model": {"type": "WordPiece", "vocab": {"[UNK]": 0, "[CLS]": 1,
                        "[SEP]": 2}}, "normalizer": {"type": "BertNormalizer",
                        "lowercase": "yes"}, "pre_tokenizer": {"type": "BertPreTokenizer"}})")}) {
    auto r = BertTokenizer::FromTokenizerJsonString(bad_json, "test.json");
    ASSERT_FALSE(r.ok()) << bad_json;
    EXPECT_NE(r.status().message().find("test.json"), std::string::npos);
  }
  EXPECT_EQ(BertTokenizer::FromTokenizerJson("/nonexistent/tokenizer.json").status().code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace surge::text
