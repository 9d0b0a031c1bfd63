// The raw-frequency baseline: counting rules on hand-made posts, and its (poor) score on a small
// generated stream.
#include <gtest/gtest.h>

#include "stream/eval/eval.h"
#include "stream/eval/frequency_baseline.h"
#include "stream/sim/generator.h"
#include "text/keywords.h"
#include "text/segmenter.h"

namespace surge::stream::eval {
namespace {

class FrequencyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto s = text::Segmenter::Create();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    seg_ = s->release();
    auto k = text::KeywordExtractor::Create(seg_);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    kw_ = k->release();
  }
  static void TearDownTestSuite() {
    delete kw_;
    delete seg_;
  }
  static Post MakePost(std::string id, int64_t ts, std::string user, std::string text) {
    Post p;
    p.id = std::move(id);
    p.ts_ms = ts;
    p.user.id = std::move(user);
    p.text = std::move(text);
    return p;
  }
  static text::Segmenter* seg_;
  static text::KeywordExtractor* kw_;
};
text::Segmenter* FrequencyTest::seg_ = nullptr;
text::KeywordExtractor* FrequencyTest::kw_ = nullptr;

TEST_F(FrequencyTest, CountsPostsPerWordAndBigramPerBucket) {
  FrequencyBaselineOptions o;
  o.k = 4;
  auto base = FrequencyBaseline::Create(seg_, kw_, o);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  std::vector<TrendUpdate> out;
  (*base)->Add(MakePost("p1", 60000, "a", "手机电脑手机"), &out);
  (*base)->Add(MakePost("p2", 61000, "b", "手机电脑"), &out);
  (*base)->Add(MakePost("p3", 62000, "a", "手机天气"), &out);
  (*base)->Add(MakePost("p4", 63000, "c", "今天2024，的"), &out);  // stop word, number, punctuation
  EXPECT_TRUE(out.empty());
  (*base)->Add(MakePost("p5", 185000, "d", "电脑"), &out);  // closes the bucket [60000, 120000)
  (*base)->Add(MakePost("p6", 100000, "e", "电脑"), &out);  // late: counted in the open bucket
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].hashtag, "#手机#");
  EXPECT_EQ(out[0].posts, 3);  // once per post, though p1 holds it twice
  EXPECT_EQ(out[0].authors, 2);
  EXPECT_EQ(out[0].rank, 1);
  EXPECT_EQ(out[0].updated_ms, 120000);
  EXPECT_EQ(out[0].samples, (std::vector<std::string>{"p1", "p2", "p3"}));
  EXPECT_FALSE(out[0].prev_rank.has_value());
  EXPECT_EQ(out[1].hashtag, "#电脑#");
  EXPECT_EQ(out[1].posts, 2);
  EXPECT_EQ(out[2].hashtag, "#手机电脑#");  // ties: first seen first
  EXPECT_EQ(out[2].terms, (std::vector<std::string>{"手机", "电脑"}));
  EXPECT_EQ(out[2].posts, 2);
  EXPECT_EQ(out[3].posts, 1);
  for (const auto& t : out) {
    EXPECT_EQ(t.hashtag.find("今天"), std::string::npos);
    EXPECT_EQ(t.hashtag.find("2024"), std::string::npos);
  }
  out.clear();
  (*base)->Finish(&out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].hashtag, "#电脑#");
  EXPECT_EQ(out[0].posts, 2);
  EXPECT_EQ(out[0].updated_ms, 240000);
  ASSERT_TRUE(out[0].prev_rank.has_value());
  EXPECT_EQ(*out[0].prev_rank, 2);
  EXPECT_EQ(out[0].first_seen_ms, 120000);
}

TEST_F(FrequencyTest, RejectsBadOptions) {
  FrequencyBaselineOptions o;
  o.k = 0;
  EXPECT_FALSE(FrequencyBaseline::Create(seg_, kw_, o).ok());
  o.k = 10;
  o.bucket_ms = 0;
  EXPECT_FALSE(FrequencyBaseline::Create(seg_, kw_, o).ok());
  EXPECT_FALSE(FrequencyBaseline::Create(nullptr, kw_, {}).ok());
}

TEST_F(FrequencyTest, OnASmallGeneratedStreamSpamAndChatterCrowdItOut) {
  auto s =
      sim::LoadScenario(std::string(SURGE_SOURCE_DIR) + "/src/stream/sim/scenarios/small.yaml");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto g = sim::Generator::Create(*s);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  FrequencyBaselineOptions o;
  o.bucket_ms = s->bucket_ms;
  auto base = FrequencyBaseline::Create(seg_, kw_, o);
  ASSERT_TRUE(base.ok());
  std::vector<TrendUpdate> updates;
  std::vector<sim::SimPost> batch;
  while ((*g)->NextBatch(&batch)) {
    for (const auto& p : batch) (*base)->Add(p.post, &updates);
  }
  (*base)->Finish(&updates);
  const auto lists = CutIntoLists(updates);
  ASSERT_EQ(lists.size(), 8u);  // 8 one-minute buckets
  for (const auto& l : lists) EXPECT_EQ(l.topics.size(), 10u);
  auto r = Evaluate((*g)->truth(), lists);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->spam_surfaced, 1);  // the bot ring's phrase is among the most frequent words
  EXPECT_LT(r->precision_at_k, 0.5);
  EXPECT_GT(r->noise_slots, r->event_slots);
}

}  // namespace
}  // namespace surge::stream::eval
