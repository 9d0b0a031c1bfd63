#include "stream/rank.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "resources.h"
#include "stream/codec.h"
#include "synthetic.h"

namespace surge::stream {
namespace {

using testing::AnnotateAll;
using testing::DetectAll;

testing::StreamSpec TwoEventsAndSpam() {
  testing::StreamSpec spec;
  spec.buckets = 16;
  spec.background_per_bucket = 1200;
  spec.bursts = {
      {"AI推理革命", {"芯片", "算力", "发布会"}, 5, 160, 1, 4},
      {"国足逆转绝杀", {"比赛", "进球", "球迷"}, 8, 200, 1, 3},
  };
  testing::Burst spam;
  spam.phrase = "奶茶零元领取";
  spam.terms = {"优惠券", "私信", "链接"};
  spam.start_bucket = 4;
  spam.peak_per_bucket = 400;
  spam.rise_buckets = 0;
  spam.decay_buckets = 0;
  spam.spam = true;
  spam.bots = 40;
  spec.bursts.push_back(spam);
  // A second spam burst later.
  spam.start_bucket = 10;
  spec.bursts.push_back(spam);
  return spec;
}

std::string Describe(const std::vector<HotList>& lists) {
  std::string s;
  for (const auto& l : lists) {
    s += "bucket " + std::to_string(l.bucket) + ":";
    for (const auto& u : l.updates) {
      s += " " + u.topic_id + u.hashtag + "(" + std::to_string(static_cast<int>(u.heat));
      for (const auto& t : u.terms) s += " " + t;
      s += ")";
    }
    s += "\n";
  }
  return s;
}

std::vector<HotList> RankAll(const std::vector<CandidateBatch>& batches, RankStage* r) {
  std::vector<HotList> lists;
  for (const auto& b : batches) EXPECT_TRUE(r->Process(b, &lists).ok());
  r->Finish(&lists);
  return lists;
}

class RankTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto blocks = AnnotateAll(testing::MakeStream(TwoEventsAndSpam()));
    auto d = DetectStage::Create({}, 0, 1);
    batches_ = new std::vector<CandidateBatch>(DetectAll(d->get(), blocks));
  }
  static void TearDownTestSuite() { delete batches_; }
  static std::vector<CandidateBatch>* batches_;
};
std::vector<CandidateBatch>* RankTest::batches_ = nullptr;

TEST_F(RankTest, ListsEachEventOnceWithItsPhraseAndStableIds) {
  auto r = RankStage::Create({}, 1);
  ASSERT_TRUE(r.ok());
  auto lists = RankAll(*batches_, r->get());
  ASSERT_EQ(lists.size(), batches_->size());
  std::map<std::string, std::set<std::string>> ids;  // hashtag -> topic ids
  std::map<std::string, int64_t> first;              // hashtag -> first bucket listed
  for (const auto& l : lists) {
    std::set<std::string> seen;
    int rank = 0;
    for (const auto& u : l.updates) {
      EXPECT_EQ(u.rank, ++rank);
      EXPECT_EQ(u.updated_ms, l.bucket_end_ms);
      EXPECT_TRUE(seen.insert(u.hashtag).second) << "duplicate topic in a list\n"
                                                 << Describe(lists);
      ids[u.hashtag].insert(u.topic_id);
      if (!first.count(u.hashtag)) first[u.hashtag] = l.bucket - lists[0].bucket;
      EXPECT_FALSE(u.terms.empty());
      EXPECT_GT(u.authors, 0);
      EXPECT_LE(u.samples.size(), 3u);
    }
  }
  ASSERT_TRUE(ids.count("#AI推理革命#")) << Describe(lists);
  ASSERT_TRUE(ids.count("#国足逆转绝杀#")) << Describe(lists);
  EXPECT_EQ(ids["#AI推理革命#"].size(), 1u) << Describe(lists);
  EXPECT_EQ(ids["#国足逆转绝杀#"].size(), 1u) << Describe(lists);
  EXPECT_EQ(first["#AI推理革命#"], 5) << Describe(lists);
  EXPECT_EQ(first["#国足逆转绝杀#"], 8) << Describe(lists);
  // The bot ring never makes the list.
  for (const auto& [tag, _] : ids) {
    EXPECT_EQ(tag.find("奶茶"), std::string::npos) << Describe(lists);
  }
  EXPECT_GE((*r)->stats().spam_topics, 1);
  // prev_rank on a topic's second listing; the list has nothing else in it.
  for (size_t i = 1; i < lists.size(); ++i) {
    for (const auto& u : lists[i].updates) {
      bool was = false;
      for (const auto& p : lists[i - 1].updates) was |= p.topic_id == u.topic_id;
      EXPECT_EQ(u.prev_rank.has_value(), was);
    }
  }
  EXPECT_EQ(ids.size(), 2u) << Describe(lists);
}

TEST_F(RankTest, TopicsLeaveTheListWhenTheyFade) {
  auto r = RankStage::Create({}, 1);
  auto lists = RankAll(*batches_, r->get());
  // The last buckets have neither event.
  EXPECT_TRUE(lists.back().updates.empty()) << Describe(lists);
  bool left = false;
  for (const auto& l : lists) left |= !l.left_list.empty();
  EXPECT_TRUE(left);
}

TEST_F(RankTest, ReplayedBatchesAreIgnoredAndSnapshotsRoundTrip) {
  auto a = RankStage::Create({}, 1);
  auto lists_a = RankAll(*batches_, a->get());
  auto b = RankStage::Create({}, 1);
  std::vector<HotList> lists_b;
  const size_t cut = batches_->size() / 2;
  for (size_t i = 0; i < cut; ++i) {
    ASSERT_TRUE((*b)->Process((*batches_)[i], &lists_b).ok());
    ASSERT_TRUE((*b)->Process((*batches_)[i], &lists_b).ok());  // replay
  }
  EXPECT_EQ((*b)->stats().replayed_batches, static_cast<int64_t>(cut));
  std::string snap;
  (*b)->Snapshot(&snap);
  auto c = RankStage::Create({}, 1);
  ASSERT_TRUE((*c)->Restore(snap).ok());
  for (size_t i = cut; i < batches_->size(); ++i) {
    ASSERT_TRUE((*c)->Process((*batches_)[i], &lists_b).ok());
  }
  (*c)->Finish(&lists_b);
  ASSERT_EQ(lists_a.size(), lists_b.size());
  for (size_t i = 0; i < lists_a.size(); ++i) {
    ASSERT_EQ(lists_a[i].updates.size(), lists_b[i].updates.size()) << i;
    for (size_t k = 0; k < lists_a[i].updates.size(); ++k) {
      EXPECT_EQ(TrendToJson(lists_a[i].updates[k]), TrendToJson(lists_b[i].updates[k]));
    }
  }
  auto two = RankStage::Create({}, 2);
  EXPECT_EQ((*two)->Restore(snap).code(), StatusCode::kInvalidArgument);
  std::string bad = snap;
  bad[20] ^= 4;
  EXPECT_EQ((*c)->Restore(bad).code(), StatusCode::kDataLoss);
}

TEST_F(RankTest, WaitsForEveryShard) {
  auto r = RankStage::Create({}, 2);
  std::vector<HotList> lists;
  CandidateBatch b0 = (*batches_)[0];
  b0.shards = 2;
  CandidateBatch b1 = b0;
  b1.shard = 1;
  b1.candidates.clear();
  ASSERT_TRUE((*r)->Process(b0, &lists).ok());
  EXPECT_TRUE(lists.empty());
  ASSERT_TRUE((*r)->Process(b1, &lists).ok());
  EXPECT_EQ(lists.size(), 1u);
  CandidateBatch wrong = b0;
  wrong.shards = 3;
  EXPECT_EQ((*r)->Process(wrong, &lists).code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace surge::stream
