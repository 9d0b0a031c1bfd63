#include "text/new_words.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>

#include "text/segmenter.h"

namespace surge::text {
namespace {

std::vector<std::string> Background() {
  std::ifstream in(std::string(SURGE_SOURCE_DIR) + "/tests/fixtures/text/weibo_corpus.txt");
  EXPECT_TRUE(in.good()) << "missing tests/fixtures/text/weibo_corpus.txt";
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::string BurstPost(std::mt19937& rng) {
  static const std::vector<std::string> before = {
      "今天",   "#",      "大家都在说", "关于", "刚刚看到", "我觉得",   "英伟达发布会上的",
      "所谓",   "真正的", "这就是",     "【",   "期待",     "网友热议", "谁能解释一下",
      "转发：", "吐槽"};
  static const std::vector<std::string> after = {
      "来了",   "#",          "太厉害了", "到底是什么", "！", "会改变世界吗",
      "时代",   "概念股大涨", "的意义",   "，你怎么看", "】", "是真的",
      "刷屏了", "要开始了",   "?",        "引发讨论"};
  return before[rng() % before.size()] + "AI推理革命" + after[rng() % after.size()];
}

bool HasWord(const std::vector<WordCandidate>& c, std::string_view w) {
  return std::any_of(c.begin(), c.end(), [&](const WordCandidate& x) { return x.word == w; });
}

std::string Dump(const std::vector<WordCandidate>& c) {
  std::string s;
  for (const auto& x : c) {
    s += x.word + "(" + std::to_string(x.count) + "," + std::to_string(x.npmi) + "," +
         std::to_string(x.left_entropy) + "," + std::to_string(x.right_entropy) + ") ";
  }
  return s;
}

TEST(NewWords, FindsBurstWordNotItsFragmentsAndPushesItToTheSegmenter) {
  auto bg = Background();
  ASSERT_GE(bg.size(), 5000u);
  auto seg_or = Segmenter::Create();
  ASSERT_TRUE(seg_or.ok()) << seg_or.status().ToString()
                           << "\nrun scripts/setup to install python3-jieba.";
  auto& seg = *seg_or.value();

  NewWordOptions o;
  o.window_posts = 8000;
  o.min_count = 20;
  o.is_known = [&](std::string_view w) { return seg.Lookup(w).value_or(0) > 0; };
  NewWordDetector d(o);
  std::mt19937 rng(1234);
  for (size_t i = 0; i < 4000; ++i) d.AddPost(bg[i]);
  EXPECT_FALSE(HasWord(d.Candidates(0), "AI推理革命"));
  for (size_t i = 4000; i < bg.size(); ++i) {
    d.AddPost(bg[i]);
    if (i % 5 == 0) d.AddPost(BurstPost(rng));
  }
  auto c = d.Candidates(0);
  ASSERT_TRUE(HasWord(c, "AI推理革命")) << Dump(c);
  for (const char* frag : {"AI推理", "推理革", "理革命", "推理革命", "AI推理革", "革命来"}) {
    EXPECT_FALSE(HasWord(c, frag)) << frag << " in " << Dump(c);
  }
  auto it = std::find_if(c.begin(), c.end(), [](auto& x) { return x.word == "AI推理革命"; });
  EXPECT_GE(it->count, 350);
  EXPECT_GT(it->left_entropy, 1.0);
  EXPECT_GT(it->right_entropy, 1.0);

  // Push the discovered words into the segmenter at run time.
  std::string text = "网友热议AI推理革命到底是什么";
  auto before = seg.LCut(text);
  EXPECT_EQ(std::count(before.begin(), before.end(), "AI推理革命"), 0);
  std::vector<NewWord> add;
  for (const auto& x : c) add.push_back({x.word, std::nullopt});
  ASSERT_TRUE(seg.AddWords(add).ok());
  auto after = seg.LCut(text);
  EXPECT_EQ(std::count(after.begin(), after.end(), "AI推理革命"), 1);
  auto after_no_hmm = seg.LCut(text, false);
  EXPECT_EQ(std::count(after_no_hmm.begin(), after_no_hmm.end(), "AI推理革命"), 1);
}

TEST(NewWords, WindowExpiryForgetsOldBursts) {
  auto bg = Background();
  NewWordOptions o;
  o.window_posts = 1500;
  o.min_count = 20;
  NewWordDetector d(o);
  std::mt19937 rng(99);
  for (int i = 0; i < 300; ++i) d.AddPost(BurstPost(rng));
  for (int i = 0; i < 200; ++i) d.AddPost(bg[i]);
  EXPECT_TRUE(HasWord(d.Candidates(0), "AI推理革命"));
  for (size_t i = 200; i < 1800; ++i) d.AddPost(bg[i]);
  EXPECT_EQ(d.window_size(), 1500u);
  EXPECT_FALSE(HasWord(d.Candidates(0), "AI推理革命"));
}

TEST(NewWords, BoundedMemoryAndOddInput) {
  NewWordOptions o;
  o.window_posts = 100;
  o.max_tracked = 64;
  o.max_post_bytes = 64;
  o.min_count = 2;
  o.sketch_width = 1 << 12;
  NewWordDetector d(o);
  std::mt19937 rng(5);
  std::string junk;
  for (int i = 0; i < 3000; ++i) {
    junk.clear();
    for (int j = 0; j < 100; ++j) junk.push_back(static_cast<char>(rng()));
    d.AddPost(junk);
    d.AddPost("中文" + std::to_string(i % 17) + "测试\xFF数据");
  }
  EXPECT_LE(d.window_size(), 100u);
  EXPECT_LE(d.tracked(), 64u);
  d.AddPost("");
  (void)d.Candidates(10);
}

}  // namespace
}  // namespace surge::text
