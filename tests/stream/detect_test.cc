#include "stream/detect.h"

#include <gtest/gtest.h>

#include <set>

#include "resources.h"
#include "stream/codec.h"
#include "stream/hash.h"
#include "synthetic.h"

namespace surge::stream {
namespace {

using testing::AnnotateAll;
using testing::DetectAll;

testing::StreamSpec EventSpec() {
  testing::StreamSpec spec;
  spec.buckets = 12;
  spec.background_per_bucket = 1200;
  spec.bursts = {{"AI推理革命", {"芯片", "算力", "发布会"}, 6, 150, 1, 3}};
  return spec;
}

std::unique_ptr<DetectStage> NewStage(const DetectOptions& o = {}, int32_t shard = 0,
                                      int32_t shards = 1) {
  auto d = DetectStage::Create(o, shard, shards);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return std::move(*d);
}

std::set<std::string> SignificantTerms(const CandidateBatch& b) {
  std::set<std::string> s;
  for (const auto& c : b.candidates) {
    if (c.significant && !c.is_pair()) s.insert(c.text);
  }
  return s;
}

TEST(DetectTest, FindsTheBurstAndOnlyTheBurst) {
  auto blocks = AnnotateAll(testing::MakeStream(EventSpec()));
  auto d = NewStage();
  auto batches = DetectAll(d.get(), blocks);
  ASSERT_EQ(batches.size(), 12u);  // one per bucket
  for (size_t i = 0; i < batches.size(); ++i) {
    EXPECT_EQ(batches[i].bucket, batches[0].bucket + static_cast<int64_t>(i));
    EXPECT_EQ(batches[i].shards, 1);
  }
  // Background only: nothing significant.
  for (int b = 0; b < 6; ++b) {
    EXPECT_TRUE(SignificantTerms(batches[b]).empty())
        << b << ": " << ::testing::PrintToString(SignificantTerms(batches[b]));
  }
  // The event's first bucket already shows its pieces.
  auto first = SignificantTerms(batches[6]);
  EXPECT_TRUE(first.count("推理") && first.count("革命")) << ::testing::PrintToString(first);
  auto peak = SignificantTerms(batches[7]);
  EXPECT_TRUE(peak.count("推理") && peak.count("芯片")) << ::testing::PrintToString(peak);
  // Stats of a tracked term: posts, unique authors, samples sorted by post key.
  for (const auto& c : batches[7].candidates) {
    if (c.text != "推理" || c.is_pair()) continue;
    EXPECT_GT(c.posts, 100);
    EXPECT_NEAR(c.authors.Estimate(), static_cast<double>(c.posts), 0.15 * c.posts);
    EXPECT_EQ(c.samples.size(), static_cast<size_t>(DetectOptions{}.samples));
    for (size_t i = 1; i < c.samples.size(); ++i) {
      EXPECT_LT(c.samples[i - 1].post_key, c.samples[i].post_key);
    }
    EXPECT_NE(c.samples[0].text.find("推理"), std::string::npos);
    EXPECT_EQ(c.young, 0);
  }
  // Pairs of the phrase's pieces burst too.
  bool pair = false;
  for (const auto& c : batches[7].candidates) {
    pair |= c.is_pair() && c.significant &&
            std::set<std::string>{c.text, c.text_b} == std::set<std::string>{"推理", "革命"};
  }
  EXPECT_TRUE(pair);
  EXPECT_GT(d->stats().posts, 14400);
}

TEST(DetectTest, ReplayedPostsCountOnce) {
  auto blocks = AnnotateAll(testing::MakeStream(EventSpec()));
  auto once = NewStage();
  auto a = DetectAll(once.get(), blocks);
  // Every block delivered twice (an at-least-once replay).
  auto twice = NewStage();
  std::vector<CandidateBatch> b;
  for (const auto& blk : blocks) {
    ASSERT_TRUE(twice->Process(TermBatch{blk, 0, 1}, &b).ok());
    ASSERT_TRUE(twice->Process(TermBatch{blk, 0, 1}, &b).ok());
  }
  twice->Finish(&b);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    std::string x, y;
    EncodeCandidateBatch(a[i], &x);
    CandidateBatch bi = b[i];
    bi.replays_dropped = a[i].replays_dropped;
    bi.read_wall = a[i].read_wall;
    EncodeCandidateBatch(bi, &y);
    EXPECT_EQ(x, y) << "bucket " << i;
  }
  EXPECT_EQ(twice->stats().replays_dropped, once->stats().posts);
}

TEST(DetectTest, SnapshotRestoreContinuesExactly) {
  auto blocks = AnnotateAll(testing::MakeStream(EventSpec()), 700);
  auto straight = NewStage();
  auto a = DetectAll(straight.get(), blocks);
  // Stop after 60% of the blocks (inside the burst), snapshot, restore into a new stage.
  const size_t cut = blocks.size() * 6 / 10;
  auto first = NewStage();
  std::vector<CandidateBatch> b;
  for (size_t i = 0; i < cut; ++i) {
    ASSERT_TRUE(first->Process(TermBatch{blocks[i], 0, 1}, &b).ok());
    first->offsets().Advance({0, static_cast<int64_t>(i)});
  }
  std::string snap;
  first->Snapshot(&snap);
  first.reset();
  auto second = NewStage();
  ASSERT_TRUE(second->Restore(snap).ok());
  EXPECT_EQ(second->offsets().next.at(0), static_cast<int64_t>(cut));
  for (size_t i = cut; i < blocks.size(); ++i) {
    ASSERT_TRUE(second->Process(TermBatch{blocks[i], 0, 1}, &b).ok());
  }
  second->Finish(&b);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    std::string x, y;
    EncodeCandidateBatch(a[i], &x);
    EncodeCandidateBatch(b[i], &y);
    EXPECT_EQ(x, y) << "bucket " << i;
  }
  // Snapshots of equal states are equal bytes.
  std::string s1, s2;
  straight->Snapshot(&s1);
  second->Snapshot(&s2);
  auto o1 = straight->offsets(), o2 = second->offsets();
  EXPECT_EQ(s1.size() > 0, true);
}

TEST(DetectTest, RestoreRejectsForeignOrCorruptSnapshots) {
  auto blocks = AnnotateAll(testing::MakeStream(EventSpec()), 1000);
  auto d = NewStage();
  std::vector<CandidateBatch> out;
  for (size_t i = 0; i < 4; ++i) ASSERT_TRUE(d->Process(TermBatch{blocks[i], 0, 1}, &out).ok());
  std::string snap;
  d->Snapshot(&snap);
  DetectOptions other;
  other.bucket_ms = 30000;
  auto e = NewStage(other);
  Status st = e->Restore(snap);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("30000"), std::string::npos) << st.message();
  auto f = NewStage({}, 1, 2);
  EXPECT_EQ(f->Restore(snap).code(), StatusCode::kInvalidArgument);
  std::string bad = snap;
  bad[bad.size() / 2] ^= 1;
  auto g = NewStage();
  EXPECT_EQ(g->Restore(bad).code(), StatusCode::kDataLoss);
  EXPECT_EQ(g->open_bucket(), INT64_MIN);  // untouched
  EXPECT_EQ(g->Restore(snap.substr(0, 100)).code(), StatusCode::kDataLoss);
}

TEST(DetectTest, ShardsOwnDisjointKeys) {
  auto blocks = AnnotateAll(testing::MakeStream(EventSpec()));
  std::set<std::string> found;
  for (int32_t s = 0; s < 3; ++s) {
    auto d = NewStage({}, s, 3);
    for (const auto& b : DetectAll(d.get(), blocks)) {
      EXPECT_EQ(b.shard, s);
      for (const auto& c : b.candidates) {
        EXPECT_EQ(PartitionOf(c.key, 3), s);
        if (c.significant && !c.is_pair()) found.insert(c.text);
      }
    }
    // A batch for another partition is refused.
    std::vector<CandidateBatch> out;
    EXPECT_EQ(d->Process(TermBatch{blocks[0], (s + 1) % 3, 3}, &out).code(),
              StatusCode::kFailedPrecondition);
  }
  EXPECT_TRUE(found.count("推理") && found.count("革命") && found.count("芯片"));
}

TEST(DetectTest, TrackedKeysAreBounded) {
  testing::StreamSpec spec = EventSpec();
  spec.bursts.push_back({"国足逆转绝杀", {"比赛", "进球"}, 6, 150, 1, 3});
  spec.bursts.push_back({"央行意外降准", {"银行", "利率"}, 6, 150, 1, 3});
  auto blocks = AnnotateAll(testing::MakeStream(spec));
  DetectOptions o;
  o.max_tracked = 8;
  auto d = NewStage(o);
  size_t max_candidates = 0;
  for (const auto& b : DetectAll(d.get(), blocks)) {
    max_candidates = std::max(max_candidates, b.candidates.size());
  }
  EXPECT_LE(max_candidates, 8u);
  EXPECT_GT(d->stats().tracked_evicted, 0);
  EXPECT_LE(d->stats().tracked, 8);
  // The table memory does not depend on the stream.
  auto fresh = NewStage(o);
  EXPECT_EQ(fresh->stats().memory_bytes - 0, NewStage(o)->stats().memory_bytes);
}

TEST(DetectTest, OptionsAreValidated) {
  DetectOptions o;
  o.bucket_ms = 0;
  EXPECT_FALSE(DetectStage::Create(o, 0, 1).ok());
  o = {};
  o.half_life_buckets = -1;
  EXPECT_FALSE(DetectStage::Create(o, 0, 1).ok());
  o = {};
  o.near_dup_bits = 9;
  EXPECT_FALSE(DetectStage::Create(o, 0, 1).ok());
  EXPECT_FALSE(DetectStage::Create({}, 2, 2).ok());
}

}  // namespace
}  // namespace surge::stream
