#include "text/simhash.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace surge::text {
namespace {

TEST(SimHash, NearDuplicatesAreClose) {
  std::string a =
      "英伟达发布新一代推理芯片，AI推理革命正式到来，性能提升三倍，功耗降低一半，业内人士普遍看好";
  std::string b =
      "英伟达发布新一代推理芯片，AI推理革命正式到来！性能提升三倍，功耗降低一半，业内人士普遍看好";
  std::string c = "今天北京下雪了，朋友圈都在晒雪景，故宫的红墙白雪特别好看，周末打算去颐和园走走";
  uint64_t ha = SimHashText(a), hb = SimHashText(b), hc = SimHashText(c);
  EXPECT_EQ(HammingDistance(ha, hb), 0);
  EXPECT_GT(HammingDistance(ha, hc), 10);
  EXPECT_EQ(SimHashText(a), ha);            // deterministic
  EXPECT_EQ(SimHashText(a + "   \t"), ha);  // whitespace ignored
  std::vector<std::string_view> w1 = {"英伟达", "发布", "推理", "芯片"};
  EXPECT_EQ(SimHashWords(w1), SimHashWords(w1));
}

TEST(SimHash, EmptyAndInvalidInputAreDefined) {
  EXPECT_EQ(SimHashText(""), SimHashText(""));
  EXPECT_EQ(SimHashText("\xFF\xFE"), SimHashText("\xFF\xFE"));
  EXPECT_EQ(SimHash({}), 0u);
}

TEST(SimHashIndex, FindsWithinDistanceOnly) {
  auto idx = SimHashIndex::Create(3);
  ASSERT_TRUE(idx.ok());
  std::mt19937_64 rng(7);
  std::vector<uint64_t> fps;
  for (uint64_t i = 0; i < 2000; ++i) {
    fps.push_back(rng());
    idx->Insert(i, fps.back());
  }
  EXPECT_EQ(idx->size(), 2000u);
  // Flip 0..5 bits of a stored fingerprint at spread positions.
  for (int flips = 0; flips <= 5; ++flips) {
    uint64_t q = fps[42];
    for (int f = 0; f < flips; ++f) q ^= uint64_t{1} << (f * 13 % 64);
    auto m = idx->Query(q);
    bool found = std::any_of(m.begin(), m.end(), [](auto& x) { return x.id == 42; });
    EXPECT_EQ(found, flips <= 3) << flips;
    for (auto& x : m) EXPECT_LE(x.distance, 3);
  }
  // Brute force agreement on random queries near stored points.
  for (int t = 0; t < 200; ++t) {
    uint64_t q =
        fps[rng() % fps.size()] ^ (uint64_t{1} << (rng() % 64)) ^ (uint64_t{1} << (rng() % 64));
    auto m = idx->Query(q);
    size_t want = 0;
    for (uint64_t f : fps) want += HammingDistance(f, q) <= 3;
    EXPECT_EQ(m.size(), want);
  }
  EXPECT_TRUE(idx->Remove(42, fps[42]));
  EXPECT_FALSE(idx->Remove(42, fps[42]));
  EXPECT_TRUE(idx->Query(fps[42]).empty());
  EXPECT_EQ(idx->size(), 1999u);
}

TEST(SimHashIndex, NearDuplicatePostsFoundDistinctNot) {
  auto idx = SimHashIndex::Create(3);
  ASSERT_TRUE(idx.ok());
  std::vector<std::string> posts = {
      "英伟达发布新一代推理芯片，AI推理革命正式到来，性能提升三倍，功耗降低一半，业内人士普遍看好",
      "今天北京下雪了，朋友圈都在晒雪景，故宫的红墙白雪特别好看，周末打算去颐和园走走",
      "国足今晚对阵日本队，主教练赛前表示球队已经做好准备，希望球迷到现场为球队加油助威",
      "新款手机今天正式开售，官方旗舰店一分钟内售罄，黄牛加价五百元转卖，网友纷纷吐槽"};
  for (size_t i = 0; i < posts.size(); ++i) idx->Insert(i, SimHashText(posts[i]));
  auto m =
      idx->Query(SimHashText("英伟达发布新一代推理芯片，AI推理革命正式到来，性能提升三倍，功耗降低"
                             "一半，业内人士普遍看好！"));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].id, 0u);
  EXPECT_TRUE(
      idx->Query(SimHashText("周末去上海迪士尼乐园玩了一整天，排队两个小时才玩到一个项目，好累"))
          .empty());
  EXPECT_FALSE(SimHashIndex::Create(4).ok());
  EXPECT_FALSE(SimHashIndex::Create(-1).ok());
}

}  // namespace
}  // namespace surge::text
