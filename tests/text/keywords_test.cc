#include "text/keywords.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace surge::text {
namespace {

struct Env {
  std::unique_ptr<Segmenter> seg;
  std::unique_ptr<KeywordExtractor> kw;
};

Env& Shared() {
  static Env env = [] {
    Env e;
    auto s = Segmenter::Create();
    if (!s.ok()) {
      ADD_FAILURE() << s.status().ToString()
                    << "\njieba's data is missing; run scripts/setup to install python3-jieba.";
      std::abort();
    }
    e.seg = std::move(s).value();
    auto k = KeywordExtractor::Create(e.seg.get());
    if (!k.ok()) {
      ADD_FAILURE() << k.status().ToString() << "\nrun scripts/setup to install python3-jieba.";
      std::abort();
    }
    e.kw = std::move(k).value();
    return e;
  }();
  return env;
}

std::vector<std::string> Words(const std::vector<Keyword>& k) {
  std::vector<std::string> w;
  for (const auto& x : k) w.push_back(x.word);
  return w;
}

bool Has(const std::vector<Keyword>& k, std::string_view w) {
  return std::any_of(k.begin(), k.end(), [&](const Keyword& x) { return x.word == w; });
}

const char* kNews =
    "此外，公司拟对全资子公司吉林欧亚置业有限公司增资4."
    "3亿元，增资后，吉林欧亚置业注册资本由7000万元"
    "增加到5亿元。吉林欧亚置业主要经营范围为房地产开发及百货零售等业务。";

TEST(Keywords, TfIdfOrderMatchesJiebaWithoutNumbers) {
  auto& e = Shared();
  // jieba 0.42.1 extract_tags(topK=8): 欧亚 吉林 置业 增资 4.3 7000 经营范围 亿元.
  auto k = e.kw->TfIdf(kNews, 6);
  EXPECT_EQ(Words(k),
            (std::vector<std::string>{"欧亚", "吉林", "置业", "增资", "经营范围", "亿元"}));
  for (size_t i = 1; i < k.size(); ++i) EXPECT_GE(k[i - 1].weight, k[i].weight);
  EXPECT_FALSE(Has(e.kw->TfIdf(kNews, 0), "4.3"));
  EXPECT_FALSE(Has(e.kw->TfIdf(kNews, 0), "7000"));
}

TEST(Keywords, FiltersNumbersSingleCharsStopWordsPunctuation) {
  auto& e = Shared();
  EXPECT_TRUE(e.kw->Filtered("2024"));
  EXPECT_TRUE(e.kw->Filtered("3.5%"));
  EXPECT_TRUE(e.kw->Filtered("１２３"));
  EXPECT_TRUE(e.kw->Filtered("的"));
  EXPECT_TRUE(e.kw->Filtered("我们"));
  EXPECT_TRUE(e.kw->Filtered("The"));
  EXPECT_TRUE(e.kw->Filtered("……"));
  EXPECT_TRUE(e.kw->Filtered("😀😀"));
  EXPECT_FALSE(e.kw->Filtered("5G"));
  EXPECT_FALSE(e.kw->Filtered("显卡"));
  auto k = e.kw->TfIdf("2024 2024 2024 年 年 的 的 显卡涨价 显卡", 0);
  EXPECT_EQ(Words(k), (std::vector<std::string>{"显卡", "涨价"}));
}

TEST(Keywords, NewWordsGetHighIdf) {
  Env e;
  auto s = Segmenter::Create();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  e.seg = std::move(s).value();
  auto kw = KeywordExtractor::Create(e.seg.get());
  ASSERT_TRUE(kw.ok());
  e.kw = std::move(kw).value();
  ASSERT_TRUE(e.seg->AddWord("AI推理革命").ok());
  std::string text = "大家都在讨论AI推理革命，手机厂商发布新品，手机价格上涨";
  // Unknown to idf.txt: jieba's median idf keeps it below the common word 手机 (twice).
  EXPECT_DOUBLE_EQ(e.kw->Idf("AI推理革命"), e.kw->median_idf());
  auto before = e.kw->TfIdf(text, 0);
  ASSERT_TRUE(Has(before, "AI推理革命"));
  EXPECT_NE(before[0].word, "AI推理革命");
  e.kw->AddNewWords({"AI推理革命"});
  EXPECT_DOUBLE_EQ(e.kw->Idf("AI推理革命"), e.kw->new_word_idf());
  EXPECT_GT(e.kw->new_word_idf(), e.kw->median_idf());
  auto after = e.kw->TfIdf(text, 3);
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after[0].word, "AI推理革命");
}

TEST(Keywords, TextRankRanksConnectedWords) {
  auto& e = Shared();
  auto k = e.kw->TextRank(kNews, 5);
  ASSERT_FALSE(k.empty());
  EXPECT_DOUBLE_EQ(k[0].weight, 1.0);  // jieba scales the best node to 1
  EXPECT_TRUE(Has(k, "置业") || Has(k, "欧亚") || Has(k, "吉林")) << k[0].word;
  for (const auto& x : k) EXPECT_FALSE(e.kw->Filtered(x.word)) << x.word;
  EXPECT_TRUE(e.kw->TextRank("", 5).empty());
  EXPECT_TRUE(e.kw->TextRank("的的的", 5).empty());
}

TEST(Keywords, BadIdfFileIsAnError) {
  auto& e = Shared();
  KeywordOptions o;
  o.idf_path = "/nonexistent/idf.txt";
  auto k = KeywordExtractor::Create(e.seg.get(), o);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("/nonexistent/idf.txt"), std::string::npos);
  EXPECT_FALSE(KeywordExtractor::Create(nullptr).ok());
}

TEST(Keywords, InvalidUtf8DoesNotBecomeAKeyword) {
  auto& e = Shared();
  auto k = e.kw->TfIdf("显卡\xFF\xFE涨价\xC0", 0);
  for (const auto& x : k) EXPECT_TRUE(x.word == "显卡" || x.word == "涨价") << x.word;
}

}  // namespace
}  // namespace surge::text
