#include "stream/hashtag.h"

#include <gtest/gtest.h>

namespace surge::stream {
namespace {

TEST(HashtagTest, GrowsPiecesBackIntoThePhrase) {
  std::vector<std::string_view> texts = {
      "今天AI推理革命来了，芯片太强",   "AI推理革命！处理器发布会",
      "刚看到AI推理革命的消息，厉害",   "#AI推理革命# 芯片都发布了",
      "大家怎么看AI推理革命？处理器好", "关于手机的新闻",
  };
  std::vector<SeedTerm> seeds = {{"推理", 5}, {"革命", 4}, {"芯片", 1}};
  Phrase p = BestPhrase(texts, seeds);
  EXPECT_EQ(p.text, "AI推理革命");
  EXPECT_EQ(p.support, 5);
  EXPECT_EQ(NormalizeHashtag(p.text), "#AI推理革命#");
}

TEST(HashtagTest, StopsWhereContextsVary) {
  std::vector<std::string_view> texts = {"我爱北京天安门", "你爱北京烤鸭", "他说北京下雪了",
                                         "北京今天很冷"};
  std::vector<SeedTerm> seeds = {{"北京", 1}};
  EXPECT_EQ(BestPhrase(texts, seeds).text, "北京");
}

TEST(HashtagTest, NeedsSupport) {
  std::vector<std::string_view> texts = {"独一无二的句子"};
  std::vector<SeedTerm> seeds = {{"句子", 1}};
  Phrase p = BestPhrase(texts, seeds);
  EXPECT_TRUE(p.text.empty());
}

TEST(HashtagTest, Normalisation) {
  EXPECT_EQ(NormalizeHashtag("ＡＩ推理革命"), "#AI推理革命#");  // full-width folded
  EXPECT_EQ(NormalizeHashtag("  #国足#  逆转！！"), "#国足 逆转#");
  EXPECT_EQ(NormalizeHashtag("，。！"), "");
  EXPECT_EQ(NormalizeHashtag("Hello\u3000World"), "#Hello World#");
  // Cut to the maximum number of code points, never inside a character.
  EXPECT_EQ(NormalizeHashtag("一二三四五六七八九十", 4), "#一二三四#");
  EXPECT_EQ(NormalizeHashtag("ab\xff"
                             "cd"),
            "#abcd#");  // invalid UTF-8 dropped
}

}  // namespace
}  // namespace surge::stream
