#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "stream/post.h"
#include "stream/web/replay.h"
#include "web_test_util.h"

namespace surge::stream::web {
namespace {

using testing::MakeUpdate;

ReplayOptions AtSpeed(double speed) {
  ReplayOptions o;
  o.speed = speed;
  return o;
}

class ReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("surge_replay_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    auto p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  static std::string Line(const std::string& id, int rank, int64_t updated) {
    auto t = MakeUpdate(id, rank, 100.0 / rank);
    t.updated_ms = updated;
    t.samples = {"p-" + id + "-" + std::to_string(updated)};
    return TrendToJson(t) + "\n";
  }
  std::filesystem::path dir_;
};

TEST_F(ReplayTest, GroupsLinesIntoBucketsByUpdated) {
  auto path =
      Write("t.jsonl", Line("a", 1, 60000) + Line("b", 2, 60000) + "\n" + Line("b", 1, 120000) +
                           Line("a", 2, 120000) + Line("c", 1, 180000));
  auto f = ReadTrendFile(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->buckets.size(), 3u);
  EXPECT_EQ(f->buckets[0].bucket_ms, 60000);
  EXPECT_EQ(f->buckets[0].trends.size(), 2u);
  EXPECT_EQ(f->buckets[1].trends[0].topic_id, "b");
  EXPECT_EQ(f->buckets[2].trends.size(), 1u);
  EXPECT_EQ(f->lines, 5);
  EXPECT_EQ(f->bad_lines, 0);
}

TEST_F(ReplayTest, BadLinesAreSkippedCountedAndNamed) {
  auto path =
      Write("t.jsonl", Line("a", 1, 60000) + "{not json\n" + R"({"topic_id":"x"})" + "\n" +
                           Line("b", 1, 120000) + Line("old", 1, 60000) + Line("c", 2, 120000));
  auto f = ReadTrendFile(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->lines, 6);
  EXPECT_EQ(f->bad_lines, 3);
  ASSERT_EQ(f->errors.size(), 3u);
  EXPECT_EQ(f->errors[0].rfind("line 2: ", 0), 0u) << f->errors[0];
  EXPECT_NE(f->errors[1].find("line 3: "), std::string::npos);
  EXPECT_NE(f->errors[1].find("'rank' is required"), std::string::npos) << f->errors[1];
  EXPECT_NE(f->errors[2].find("line 5: updated 60000 is before the bucket being read (120000)"),
            std::string::npos)
      << f->errors[2];
  // The good lines are all kept.
  ASSERT_EQ(f->buckets.size(), 2u);
  EXPECT_EQ(f->buckets[1].trends.size(), 2u);
}

TEST_F(ReplayTest, UnusableOrMissingFilesAreErrors) {
  auto f = ReadTrendFile(Write("bad.jsonl", "nope\n[]\n"));
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("no usable trend update in 2 lines"), std::string::npos)
      << f.status().message();
  EXPECT_NE(f.status().message().find("first error: line 1"), std::string::npos);
  EXPECT_EQ(ReadTrendFile(Write("empty.jsonl", "")).status().code(), StatusCode::kInvalidArgument);
  auto missing = ReadTrendFile((dir_ / "missing.jsonl").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.jsonl"), std::string::npos);
  EXPECT_EQ(ReadSamplePosts((dir_ / "missing.jsonl").string(), {}).status().code(),
            StatusCode::kNotFound);
}

TEST_F(ReplayTest, SamplePostsAreReadForTheNamedIdsOnly) {
  Post p;
  p.user.id = "u1";
  std::string text;
  for (std::string id : {"p1", "p2", "p3"}) {
    p.id = id;
    p.ts_ms = 5;
    p.text = "帖子" + id;
    text += PostToJson(p) + "\n";
  }
  text += "garbage\n";
  int64_t bad = 0;
  auto posts = ReadSamplePosts(Write("posts.jsonl", text), {"p1", "p3", "p9"}, &bad);
  ASSERT_TRUE(posts.ok()) << posts.status().ToString();
  EXPECT_EQ(posts->size(), 2u);
  EXPECT_EQ(posts->at("p3").text, "帖子p3");
  EXPECT_EQ(posts->at("p3").user, "u1");
  EXPECT_EQ(bad, 1);
}

TEST_F(ReplayTest, ReplayPublishesEveryBucketWithSamplesAndHealth) {
  auto f = ReadTrendFile(Write("t.jsonl", Line("a", 1, 60000) + Line("b", 2, 60000) +
                                              Line("b", 1, 120000) + Line("a", 2, 120000)));
  ASSERT_TRUE(f.ok());
  std::unordered_map<std::string, SamplePost> posts = {
      {"p-a-60000", {"p-a-60000", "第一条", "u1", 59000}},
      {"p-a-120000", {"p-a-120000", "第二条", "u2", 119000}}};
  TrendStore store;
  std::vector<int64_t> seen;
  store.Subscribe(
      {[&](const std::shared_ptr<const HotList>& l) { seen.push_back(l->bucket_ms); }, nullptr});
  ReplayOptions o;
  o.speed = 0;
  o.source = "replay: t.jsonl";
  auto refused = Replay(*f, posts, o, &store, nullptr);
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(*refused, 0);
  EXPECT_EQ(seen, (std::vector<int64_t>{60000, 120000}));
  auto cur = store.Current();
  EXPECT_EQ(cur->trends[0].topic_id, "b");
  EXPECT_EQ(cur->trends[0].prev_rank, 2);
  auto a = store.Topic("a");
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->samples.size(), 2u);
  EXPECT_EQ(a->samples[0].text, "第二条");
  EXPECT_EQ(store.Health().buckets, 2);
  EXPECT_FALSE(store.Health().live);
  EXPECT_EQ(store.Health().source, "replay: t.jsonl");
}

TEST_F(ReplayTest, ABucketTheStoreRefusesIsSkippedAndCounted) {
  // Two updates with the same rank in the middle bucket.
  auto f = ReadTrendFile(Write("t.jsonl", Line("a", 1, 60000) + Line("a", 1, 120000) +
                                              Line("b", 1, 120000) + Line("a", 1, 180000)));
  ASSERT_TRUE(f.ok());
  TrendStore store;
  auto refused = Replay(*f, {}, AtSpeed(0), &store, nullptr);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(*refused, 1);
  EXPECT_EQ(store.Current()->bucket_ms, 180000);
  EXPECT_EQ(store.Current()->seq, 2u);
}

TEST_F(ReplayTest, LoopMovesBucketTimesOnAndStopsWhenAsked) {
  auto f = ReadTrendFile(
      Write("t.jsonl", Line("a", 1, 60000) + Line("a", 1, 120000) + Line("a", 1, 180000)));
  ASSERT_TRUE(f.ok());
  TrendStore store;
  std::atomic<bool> stop{false};
  std::vector<int64_t> seen;
  store.Subscribe({[&](const std::shared_ptr<const HotList>& l) {
                     seen.push_back(l->bucket_ms);
                     if (seen.size() == 7) stop = true;
                   },
                   nullptr});
  ReplayOptions o;
  o.speed = 0;
  o.loop = true;
  auto refused = Replay(*f, {}, o, &store, &stop);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(*refused, 0);
  // Laps follow on one bucket gap after the last: 60k..180k, 240k..360k, 420k.
  EXPECT_EQ(seen, (std::vector<int64_t>{60000, 120000, 180000, 240000, 300000, 360000, 420000}));
  EXPECT_EQ(store.Current()->trends[0].first_seen_ms, 1000 + 2 * 180000);
}

TEST_F(ReplayTest, PacedReplayStopsDuringAWait) {
  auto f = ReadTrendFile(Write("t.jsonl", Line("a", 1, 60000) + Line("a", 1, 3600000)));
  ASSERT_TRUE(f.ok());
  TrendStore store;
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    testing::WaitFor([&] { return store.Current()->seq == 1; });
    stop = true;
  });
  // At real-time speed the second bucket is ~an hour away: only `stop` can end this.
  auto refused = Replay(*f, {}, AtSpeed(1), &store, &stop);
  stopper.join();
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(store.Current()->seq, 1u);
  EXPECT_FALSE(Replay(*f, {}, AtSpeed(-1), &store, nullptr).ok());
}

}  // namespace
}  // namespace surge::stream::web
