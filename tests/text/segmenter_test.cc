#include "text/segmenter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "text/hmm_model.h"
#include "text/jieba_dict.h"

namespace surge::text {
namespace {

using Words = std::vector<std::string>;

const std::string kFixtureDir = std::string(SURGE_SOURCE_DIR) + "/tests/fixtures/text";

// The jieba data comes from Debian's python3-jieba; a missing file is a setup error, not a skip.
Segmenter& Shared() {
  static std::unique_ptr<Segmenter> seg = [] {
    auto r = Segmenter::Create();
    if (!r.ok()) {
      ADD_FAILURE() << r.status().ToString()
                    << "\njieba's dictionary was not found at its Debian path (" << kDefaultJiebaDir
                    << "); run scripts/setup to install python3-jieba.";
      std::abort();
    }
    return std::move(r).value();
  }();
  return *seg;
}

std::unique_ptr<Segmenter> Fresh() {
  auto r = Segmenter::Create();
  if (!r.ok()) {
    ADD_FAILURE() << r.status().ToString() << "\nrun scripts/setup to install python3-jieba.";
    return nullptr;
  }
  return std::move(r).value();
}

std::string Join(const Words& w) {
  std::string s;
  for (size_t i = 0; i < w.size(); ++i) {
    if (i) s += " | ";
    s += w[i];
  }
  return s;
}

struct RefLine {
  std::string text;
  Words hmm;
  std::optional<Words> nohmm;
};

std::vector<RefLine> LoadReference() {
  std::ifstream in(kFixtureDir + "/jieba_reference.jsonl");
  EXPECT_TRUE(in.good()) << "missing fixture jieba_reference.jsonl; make it with "
                            "tools/fixtures/make_jieba_reference.py";
  std::vector<RefLine> refs;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    RefLine r;
    r.text = j["text"].get<std::string>();
    r.hmm = j["hmm"].get<Words>();
    if (j.contains("nohmm")) r.nohmm = j["nohmm"].get<Words>();
    refs.push_back(std::move(r));
  }
  return refs;
}

TEST(Segmenter, MissingDictionaryIsAClearError) {
  SegmenterOptions o;
  o.dict_path = "/nonexistent/dict.txt";
  auto r = Segmenter::Create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/dict.txt"), std::string::npos)
      << r.status().ToString();
}

TEST(Segmenter, CorruptDictionaryNamesTheLine) {
  auto r = PrefixDict::Parse("中国 10 ns\n人民 abc n\n", "test.txt");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("line 2"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(PrefixDict::Parse("中国\n", "t").ok());
  EXPECT_FALSE(PrefixDict::Parse("\xFF\xFE 3\n", "t").ok());
}

TEST(Segmenter, PrefixDictHasPrefixesWithZeroFrequency) {
  auto r = PrefixDict::Parse("清华大学 10 nt\n清华 5 nr\n大学 7 n\n", "t");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->total(), 22);
  auto n = r->Find("清华大");
  ASSERT_NE(n, PrefixDict::kNone);
  EXPECT_EQ(r->Freq(n), 0);
  EXPECT_EQ(r->Freq(r->Find("清华大学")), 10);
  EXPECT_EQ(r->Find("华大"), PrefixDict::kNone);
}

TEST(Segmenter, HmmTablesParse) {
  auto m = HmmModel::FromSources("P={'B': -0.2, 'E': -3.14e+100, 'M': -3.14e+100, 'S': -1.4}",
                                 "P={'B': {'E': -0.5, 'M': -0.9}, 'E': {'B': -0.5, 'S': -0.8},\n"
                                 " 'M': {'E': -0.3, 'M': -1.2}, 'S': {'B': -0.7, 'S': -0.6}}",
                                 "P={'B': {'\\u4e00': -3.6}, 'S': {'\\u4e00': -4.9,}}");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->num_emit_chars(), 1u);
  EXPECT_FALSE(HmmModel::FromSources("P={'X': 1}", "P={}", "P={}").ok());
  EXPECT_FALSE(HmmModel::FromSources("P={'B': ", "P={}", "P={}").ok());
}

TEST(Segmenter, KnownSentences) {
  Segmenter& s = Shared();
  EXPECT_EQ(s.LCut("我来到北京清华大学"), (Words{"我", "来到", "北京", "清华大学"}));
  EXPECT_EQ(s.LCut("他来到了网易杭研大厦"), (Words{"他", "来到", "了", "网易", "杭研", "大厦"}));
  EXPECT_EQ(s.LCut("他来到了网易杭研大厦", false),
            (Words{"他", "来到", "了", "网易", "杭", "研", "大厦"}));
  EXPECT_EQ(s.LCut("a\r\nb"), (Words{"a", "\r\n", "b"}));
}

TEST(Segmenter, MatchesJiebaOnEveryCorpusLine) {
  Segmenter& s = Shared();
  auto refs = LoadReference();
  ASSERT_GE(refs.size(), 5000u);
  size_t mismatches = 0, nohmm_lines = 0;
  for (size_t i = 0; i < refs.size(); ++i) {
    Words got = s.LCut(refs[i].text, true);
    if (got != refs[i].hmm) {
      if (++mismatches <= 5) {
        ADD_FAILURE() << "line " << i << " HMM=True\n got: " << Join(got)
                      << "\nwant: " << Join(refs[i].hmm);
      }
    }
    if (refs[i].nohmm) {
      ++nohmm_lines;
      Words got2 = s.LCut(refs[i].text, false);
      if (got2 != *refs[i].nohmm && ++mismatches <= 5) {
        ADD_FAILURE() << "line " << i << " HMM=False\n got: " << Join(got2)
                      << "\nwant: " << Join(*refs[i].nohmm);
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_GE(nohmm_lines, 200u);
}

TEST(Segmenter, SpansCoverInputExactly) {
  Segmenter& s = Shared();
  std::string text =
      "AI推理革命来了!\xF0\x9F\x98\x80 ０９ＡＢ\t\x01\x7F 😀👍🏽 مرحبا "
      "Привет";
  std::vector<WordSpan> spans;
  s.Cut(text, &spans);
  uint32_t pos = 0;
  for (const WordSpan& w : spans) {
    EXPECT_EQ(w.offset, pos);
    EXPECT_GT(w.size, 0u);
    pos += w.size;
  }
  EXPECT_EQ(pos, text.size());
}

TEST(Segmenter, EmptyText) {
  Segmenter& s = Shared();
  EXPECT_TRUE(s.LCut("").empty());
  std::vector<WordSpan> spans;
  s.Cut("", &spans, false);
  EXPECT_TRUE(spans.empty());
}

TEST(Segmenter, InvalidUtf8BytesAreReplacementCharacterWords) {
  Segmenter& s = Shared();
  // 0xFF, a truncated 3-byte sequence (2 bytes) and an overlong "/" each give one U+FFFD per byte.
  std::string text =
      "中国\xFF人民\xE4\xB8"
      "abc\xC0\xAF";
  Words got = s.LCut(text);
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(got, (Words{"中国", r, "人民", r, r, "abc", r, r})) << Join(got);
  std::vector<WordSpan> spans;
  s.Cut(text, &spans);
  ASSERT_EQ(spans.size(), 8u);
  EXPECT_EQ(spans[1].offset, 6u);
  EXPECT_EQ(spans[1].size, 1u);
  // Same words as jieba gives for the text with U+FFFD in place of each bad byte.
  std::string replaced = "中国" + r + "人民" + r + r + "abc" + r + r;
  EXPECT_EQ(s.LCut(replaced), got);
}

TEST(Segmenter, ControlCharactersEmojiFullWidthMixedScripts) {
  Segmenter& s = Shared();
  // Expected words from jieba 0.42.1 lcut(HMM=True).
  EXPECT_EQ(s.LCut(std::string("中国\x00人民\x1c好", 17)),
            (Words{"中国", std::string("\x00", 1), "人民", "\x1c", "好"}));
  EXPECT_EQ(s.LCut("我爱😀北京"), (Words{"我", "爱", "😀", "北京"}));
  EXPECT_EQ(s.LCut("ＡＢＣ１２３"), (Words{"Ａ", "Ｂ", "Ｃ", "１", "２", "３"}));
  EXPECT_EQ(s.LCut("GPU-4090显卡3.5%涨价"), (Words{"GPU", "-", "4090", "显卡", "3.5%", "涨价"}));
  EXPECT_EQ(s.LCut("東京タワー와 서울"), (Words{"東京", "タ", "ワ", "ー", "와", " ", "서", "울"}));
}

TEST(Segmenter, OneMegabyteTextEqualsLineByLine) {
  Segmenter& s = Shared();
  auto refs = LoadReference();
  ASSERT_FALSE(refs.empty());
  std::string big;
  Words want;
  for (size_t i = 0; big.size() < (1u << 20); i = (i + 1) % refs.size()) {
    big += refs[i].text;
    big += '\n';
    want.insert(want.end(), refs[i].hmm.begin(), refs[i].hmm.end());
    want.push_back("\n");
  }
  Words got = s.LCut(big);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want);
}

TEST(Segmenter, OneMegabyteHanBlockWithoutSeparators) {
  Segmenter& s = Shared();
  std::string unit = "中华人民共和国成立了AI推理革命新词发现";
  std::string big;
  while (big.size() < (1u << 20)) big += unit;
  std::vector<WordSpan> spans = {{0, 0}};  // Cut appends
  s.Cut(big, &spans);
  ASSERT_GT(spans.size(), 1u);
  uint64_t pos = 0;
  for (size_t i = 1; i < spans.size(); ++i) {
    ASSERT_EQ(spans[i].offset, pos);
    pos += spans[i].size;
  }
  EXPECT_EQ(pos, big.size());
  // jieba 0.42.1 on two units.
  const Words one = {"中华人民共和国", "成立", "了", "AI", "推理", "革命", "新词", "发现"};
  Words two = one;
  two.insert(two.end(), one.begin(), one.end());
  EXPECT_EQ(s.LCut(unit + unit), two);
}

TEST(Segmenter, AddWordMakesOneWord) {
  auto s = Fresh();
  ASSERT_TRUE(s);
  std::string text = "今天AI推理革命来了";
  Words before = s->LCut(text);
  EXPECT_EQ(std::count(before.begin(), before.end(), "AI推理革命"), 0) << Join(before);
  // jieba's suggest_freq for this word (checked against jieba 0.42.1).
  EXPECT_EQ(s->SuggestFreq("AI推理革命"), 1);
  ASSERT_TRUE(s->AddWord("AI推理革命", 50000).ok());
  Words after = s->LCut(text);
  EXPECT_EQ(after, (Words{"今天", "AI推理革命", "来", "了"})) << Join(after);
  EXPECT_EQ(s->Lookup("AI推理"), 0);
  EXPECT_EQ(s->Lookup("AI推理革命"), 50000);
  EXPECT_FALSE(s->AddWord("", 3).ok());
  EXPECT_FALSE(s->AddWord("bad\xFF", 3).ok());
  EXPECT_FALSE(s->AddWord("负数", -1).ok());
}

TEST(Segmenter, AddWordWithoutFrequencyUsesSuggestFreq) {
  auto s = Fresh();
  ASSERT_TRUE(s);
  int64_t total = s->total();
  // jieba 0.42.1: add_word('杭研大厦') gives freq 1 and lcut(..., HMM=False) keeps it whole.
  ASSERT_TRUE(s->AddWord("杭研大厦").ok());
  EXPECT_EQ(s->total(), total + s->Lookup("杭研大厦").value());
  EXPECT_EQ(s->LCut("他来到了网易杭研大厦", false),
            (Words{"他", "来到", "了", "网易", "杭研大厦"}));
}

TEST(Segmenter, FrequencyZeroForcesSplit) {
  auto s = Fresh();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->AddWord("杭研", 0).ok());
  Words w = s->LCut("他来到了网易杭研大厦");
  EXPECT_EQ(w, (Words{"他", "来到", "了", "网易", "杭", "研", "大厦"})) << Join(w);
}

TEST(Segmenter, UserDictionaryFormat) {
  auto s = Fresh();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->LoadUserDictText("\xEF\xBB\xBF云计算 5 n\n\n创新办 3 i\n凱特琳 nz\n台中\n"
                                  "multi word 7\n",
                                  "user.txt")
                  .ok());
  EXPECT_EQ(s->Lookup("云计算"), 5);
  EXPECT_EQ(s->Lookup("创新办"), 3);
  EXPECT_TRUE(s->Lookup("凱特琳").has_value());
  EXPECT_EQ(s->Lookup("multi word"), 7);
  EXPECT_FALSE(s->LoadUserDictText("ok 1\n\xFF\xFE 2\n", "bad.txt").ok());
  EXPECT_FALSE(s->LoadUserDict("/nonexistent/user.txt").ok());
  char path[] = "/tmp/surge_userdict_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string content = "李小福 2 nr\n";
  ASSERT_EQ(write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  close(fd);
  EXPECT_TRUE(s->LoadUserDict(path).ok());
  unlink(path);
  EXPECT_EQ(s->Lookup("李小福"), 2);
}

TEST(Segmenter, UserDictionaryMatchesJiebaLoadUserdict) {
  auto s = Fresh();
  ASSERT_TRUE(s);
  // Expected totals and words from jieba 0.42.1 after jieba.load_userdict() of the same text:
  // BOM, suggested frequencies, frequency 0 (forced split), tags, spaces, blank lines.
  EXPECT_EQ(s->total(), 60101967);
  ASSERT_TRUE(
      s->LoadUserDictText("\xEF\xBB\xBF推理革命 100 n\nAI推理\n杭研 0\n中国人工 3 nz\n的一 50\n"
                          "清华 0\nGPU加速 20000 n\nmulti word 7\na1.2 4\n国大 9 x\n理起小\n"
                          "  北京大厦  \n\n大学 1\n",
                          "user.txt")
          .ok());
  EXPECT_EQ(s->total(), 60122144);
  EXPECT_EQ(s->Lookup("AI推理"), 1);
  EXPECT_EQ(s->Lookup("multi word"), 7);
  for (bool hmm : {true, false}) {
    EXPECT_EQ(s->LCut("他说AI推理革命来了", hmm),
              (Words{"他", "说", "AI推理", "革命", "来", "了"}));
    EXPECT_EQ(s->LCut("网易杭研大厦", hmm), (Words{"网易", "杭", "研", "大厦"}));
    EXPECT_EQ(s->LCut("清华大学和中国人工智能", hmm),
              (Words{"清华大学", "和", "中国", "人工智能"}));
    EXPECT_EQ(s->LCut("用GPU加速的multi word a1.2 测试", hmm),
              (Words{"用", "GPU加速", "的", "multi", " ", "word", " ", "a1.2", " ", "测试"}));
    EXPECT_EQ(s->LCut("北京大厦", hmm), (Words{"北京大厦"}));
  }
}

TEST(Segmenter, CloneChangesIndependently) {
  auto s = Fresh();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->AddWord("杭研大厦", 100).ok());
  auto c = s->Clone();
  ASSERT_TRUE(c->AddWord("网易杭研", 100000).ok());
  EXPECT_EQ(c->Lookup("杭研大厦"), 100);
  EXPECT_EQ(c->Lookup("网易杭研"), 100000);
  EXPECT_FALSE(s->Lookup("网易杭研").has_value());
  EXPECT_EQ(c->total(), s->total() + 100000);
}

TEST(Segmenter, AddWordIsSafeAgainstConcurrentCuts) {
  auto s = Fresh();
  ASSERT_TRUE(s);
  const std::string text = "新词发现让推理革命成为热词推理革命";
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      std::vector<WordSpan> spans;
      while (!stop.load()) {
        spans.clear();
        s->Cut(text, &spans);
        uint32_t pos = 0;
        for (auto& w : spans) pos += w.size;
        if (pos != text.size()) bad.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(s->AddWord("词" + std::to_string(i), 10 + i).ok());
  }
  ASSERT_TRUE(s->AddWord("推理革命", 100000).ok());
  stop = true;
  for (auto& th : readers) th.join();
  EXPECT_EQ(bad.load(), 0);
  Words w = s->LCut(text);
  EXPECT_EQ(std::count(w.begin(), w.end(), "推理革命"), 2) << Join(w);
}

}  // namespace
}  // namespace surge::text
