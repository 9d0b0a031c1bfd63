#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "stream/web/trend_store.h"
#include "web_test_util.h"

namespace surge::stream::web {
namespace {

using json = nlohmann::json;
using testing::MakeList;
using testing::MakeUpdate;

TEST(TrendStoreTest, EmptyBeforeTheFirstBucket) {
  TrendStore store;
  auto cur = store.Current();
  ASSERT_NE(cur, nullptr);
  EXPECT_EQ(cur->seq, 0u);
  EXPECT_EQ(cur->bucket_ms, 0);
  auto j = json::parse(cur->json);
  EXPECT_EQ(j["bucket"], 0);
  EXPECT_TRUE(j["trends"].empty());
  EXPECT_FALSE(store.Topic("t1").has_value());
}

TEST(TrendStoreTest, PublishSortsByRankAndRendersJson) {
  TrendStore store;
  std::vector<TrendUpdate> list = {MakeUpdate("b", 2, 50), MakeUpdate("a", 1, 90),
                                   MakeUpdate("c", 3, 10)};
  ASSERT_TRUE(store.Publish(60000, list).ok());
  auto cur = store.Current();
  EXPECT_EQ(cur->seq, 1u);
  EXPECT_EQ(cur->bucket_ms, 60000);
  ASSERT_EQ(cur->trends.size(), 3u);
  EXPECT_EQ(cur->trends[0].topic_id, "a");
  EXPECT_EQ(cur->trends[1].topic_id, "b");
  EXPECT_EQ(cur->trends[2].topic_id, "c");
  for (const auto& t : cur->trends) EXPECT_EQ(t.updated_ms, 60000);

  auto j = json::parse(cur->json);
  EXPECT_EQ(j["bucket"], 60000);
  EXPECT_EQ(j["seq"], 1);
  EXPECT_GT(j["updated"].get<int64_t>(), 0);
  ASSERT_EQ(j["trends"].size(), 3u);
  // Each entry is the shared trend-update format.
  auto back = ParseTrend(j["trends"][0].dump());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->topic_id, "a");
  EXPECT_EQ(back->hashtag, "#话题a#");
  EXPECT_DOUBLE_EQ(back->heat, 90);

  auto top2 = json::parse(HotListJson(*cur, 2));
  EXPECT_EQ(top2["trends"].size(), 2u);
  EXPECT_EQ(top2["spark"].size(), 2u);
  EXPECT_TRUE(top2["spark"].contains("a"));
  EXPECT_FALSE(top2["spark"].contains("c"));
}

TEST(TrendStoreTest, PrevRankIsTheRankInThePreviousList) {
  TrendStore store;
  ASSERT_TRUE(store.Publish(1000, {MakeUpdate("a", 1, 9), MakeUpdate("b", 2, 8)}).ok());
  auto first = store.Current();
  EXPECT_FALSE(first->trends[0].prev_rank.has_value());
  EXPECT_FALSE(first->trends[1].prev_rank.has_value());

  auto c = MakeUpdate("c", 1, 20);
  c.prev_rank = 42;  // whatever the producer says, the store's own previous list counts
  ASSERT_TRUE(store.Publish(2000, {c, MakeUpdate("b", 2, 9), MakeUpdate("a", 3, 5)}).ok());
  auto second = store.Current();
  EXPECT_EQ(second->trends[0].topic_id, "c");
  EXPECT_FALSE(second->trends[0].prev_rank.has_value());  // new
  EXPECT_EQ(second->trends[1].prev_rank, 2);              // b stayed
  EXPECT_EQ(second->trends[2].prev_rank, 1);              // a fell from 1 to 3

  // a leaves for a bucket, then comes back: new again.
  ASSERT_TRUE(store.Publish(3000, {MakeUpdate("c", 1, 20)}).ok());
  ASSERT_TRUE(store.Publish(4000, {MakeUpdate("a", 1, 20), MakeUpdate("c", 2, 10)}).ok());
  auto fourth = store.Current();
  EXPECT_FALSE(fourth->trends[0].prev_rank.has_value());
  EXPECT_EQ(fourth->trends[1].prev_rank, 1);
  // The old snapshot is immutable.
  EXPECT_EQ(second->trends[0].topic_id, "c");
  EXPECT_EQ(second->seq, 2u);
}

TEST(TrendStoreTest, RefusesBadListsWholeAndKeepsTheCurrentOne) {
  TrendStore store(TrendStoreOptions{.max_list = 5});
  ASSERT_TRUE(store.Publish(1000, MakeList(3)).ok());
  auto before = store.Current();

  auto expect_refused = [&](int64_t bucket, std::vector<TrendUpdate> list, std::string want) {
    Status s = store.Publish(bucket, std::move(list));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << want;
    EXPECT_NE(s.message().find(want), std::string::npos) << s.message();
    EXPECT_EQ(store.Current(), before);
  };
  expect_refused(1000, MakeList(2), "must be published in order");
  expect_refused(500, MakeList(2), "must be published in order");
  expect_refused(2000, MakeList(6), "at most 5");
  expect_refused(2000, {MakeUpdate("a", 1, 1), MakeUpdate("a", 2, 1)}, "'a' appears twice");
  expect_refused(2000, {MakeUpdate("a", 1, 1), MakeUpdate("b", 1, 1)}, "rank 1 appears twice");
  expect_refused(2000, {MakeUpdate("a", 0, 1)}, "rank 0 is not >= 1");
  expect_refused(2000, {MakeUpdate("bad id", 1, 1)}, "topic_id 'bad id'");
  expect_refused(2000, {MakeUpdate("", 1, 1)}, "topic_id ''");
  expect_refused(2000, {MakeUpdate(std::string(129, 'x'), 1, 1)}, "1..128 characters");
  expect_refused(2000, {MakeUpdate("a", 1, std::nan(""))}, "heat is not a finite number");
  expect_refused(2000, {MakeUpdate("a", 1, std::numeric_limits<double>::infinity())},
                 "heat is not a finite number");
  auto bad_sentiment = MakeUpdate("a", 1, 1);
  bad_sentiment.sentiment.neg = 1.5;
  expect_refused(2000, {bad_sentiment}, "sentiment");
  auto bad_posts = MakeUpdate("a", 1, 1);
  bad_posts.posts = -1;
  expect_refused(2000, {bad_posts}, "must be >= 0");
  auto bad_updated = MakeUpdate("a", 1, 1);
  bad_updated.updated_ms = 1999;
  expect_refused(2000, {bad_updated}, "updated 1999 differs from the bucket end 2000");
  // The error names the entry.
  Status s = store.Publish(2000, {MakeUpdate("a", 1, 1), MakeUpdate("b", 0, 1)});
  EXPECT_NE(s.message().find("bucket 2000, entry 1"), std::string::npos) << s.message();

  // Nothing was lost: the next good list still gets prev ranks from the accepted one.
  ASSERT_TRUE(store.Publish(2000, MakeList(2)).ok());
  EXPECT_EQ(store.Current()->trends[0].prev_rank, 1);
  EXPECT_EQ(store.Current()->seq, 2u);
}

TEST(TrendStoreTest, AnEmptyListIsAValidBucket) {
  TrendStore store;
  ASSERT_TRUE(store.Publish(1000, MakeList(2)).ok());
  ASSERT_TRUE(store.Publish(2000, {}).ok());
  EXPECT_TRUE(store.Current()->trends.empty());
  EXPECT_EQ(store.Current()->bucket_ms, 2000);
  auto t1 = store.Topic("t1");
  ASSERT_TRUE(t1.has_value());
  EXPECT_FALSE(t1->on_list);
  EXPECT_EQ(t1->last_listed_ms, 1000);
}

TEST(TrendStoreTest, HistoryIsBoundedAndSparklinesAlignToBuckets) {
  TrendStoreOptions o;
  o.history_buckets = 5;
  o.spark_points = 4;
  TrendStore store(o);
  // a is listed in every bucket; b only in buckets 2 and 4 (of 1..8).
  for (int b = 1; b <= 8; ++b) {
    std::vector<TrendUpdate> list = {MakeUpdate("a", 1, 100.0 * b)};
    if (b == 2 || b == 4 || b == 8) list.push_back(MakeUpdate("b", 2, 10.0 * b));
    ASSERT_TRUE(store.Publish(b * 1000, list).ok());
  }
  auto a = store.Topic("a");
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->history.size(), 5u);  // bounded
  EXPECT_EQ(a->history.front().bucket_ms, 4000);
  EXPECT_EQ(a->history.back().bucket_ms, 8000);
  EXPECT_DOUBLE_EQ(a->history.back().heat, 800);
  EXPECT_EQ(a->history.back().rank, 1);

  auto cur = store.Current();
  EXPECT_EQ(cur->spark_buckets, (std::vector<int64_t>{5000, 6000, 7000, 8000}));
  ASSERT_EQ(cur->spark.size(), 2u);
  EXPECT_EQ(cur->spark[0], (std::vector<std::optional<double>>{500, 600, 700, 800}));
  EXPECT_EQ(cur->spark[1],
            (std::vector<std::optional<double>>{std::nullopt, std::nullopt, std::nullopt, 80}));
  auto j = json::parse(cur->json);
  EXPECT_TRUE(j["spark"]["b"][0].is_null());
  EXPECT_DOUBLE_EQ(j["spark"]["b"][3].get<double>(), 80);

  auto b = store.Topic("b");
  ASSERT_TRUE(b.has_value());
  ASSERT_EQ(b->history.size(), 3u);  // only the buckets it was listed in
  EXPECT_EQ(b->history[0].bucket_ms, 2000);
  EXPECT_EQ(b->history[0].rank, 2);
}

TEST(TrendStoreTest, TopicsThatLeftAreDroppedAfterKeepBuckets) {
  TrendStoreOptions o;
  o.keep_buckets = 3;
  TrendStore store(o);
  ASSERT_TRUE(store.Publish(1000, {MakeUpdate("gone", 1, 5), MakeUpdate("stay", 2, 4)}).ok());
  ASSERT_TRUE(store.AddSamplePosts("gone", {{"p1", "文本", "u1", 900}}).ok());
  for (int b = 2; b <= 4; ++b) {
    ASSERT_TRUE(store.Publish(b * 1000, {MakeUpdate("stay", 1, 4)}).ok());
    auto gone = store.Topic("gone");
    ASSERT_TRUE(gone.has_value()) << "bucket " << b;
    EXPECT_FALSE(gone->on_list);
    EXPECT_EQ(gone->samples.size(), 1u);
  }
  ASSERT_TRUE(store.Publish(5000, {MakeUpdate("stay", 1, 4)}).ok());
  EXPECT_FALSE(store.Topic("gone").has_value());
  EXPECT_TRUE(store.Topic("stay").has_value());
  EXPECT_EQ(store.topic_count(), 1u);
}

TEST(TrendStoreTest, TopicCountIsBoundedEvenWithManyUnlistedTopics) {
  TrendStoreOptions o;
  o.max_topics = 10;
  o.keep_buckets = 1000;
  TrendStore store(o);
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(store.AddSamplePosts("s" + std::to_string(i), {{"p", "x", "u", 1}}).ok());
    ASSERT_TRUE(store.Publish(1000 * (i + 1), MakeList(3)).ok());
    EXPECT_LE(store.topic_count(), 10u);
  }
  for (int i = 1; i <= 3; ++i) EXPECT_TRUE(store.Topic("t" + std::to_string(i)).has_value());
  EXPECT_TRUE(store.Topic("s49").has_value());  // the newest unlisted ones stay
  EXPECT_FALSE(store.Topic("s0").has_value());
}

TEST(TrendStoreTest, SamplePostsAreBoundedNewestFirstAndDeduplicated) {
  TrendStoreOptions o;
  o.max_samples = 3;
  o.max_sample_bytes = 10;
  TrendStore store(o);
  // Samples may come before the topic is listed.
  ASSERT_TRUE(store.AddSamplePosts("t1", {{"p1", "一", "u1", 1}, {"p2", "二", "u2", 2}}).ok());
  auto d = store.Topic("t1");
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->latest.has_value());
  ASSERT_EQ(d->samples.size(), 2u);
  EXPECT_EQ(d->samples[0].id, "p2");

  ASSERT_TRUE(store
                  .AddSamplePosts("t1", {{"p2", "again", "u2", 2},
                                         {"p3", "三", "u3", 3},
                                         {"p4", "四五六七八", "u4", 4}})
                  .ok());
  d = store.Topic("t1");
  ASSERT_EQ(d->samples.size(), 3u);
  EXPECT_EQ(d->samples[0].id, "p4");
  EXPECT_EQ(d->samples[1].id, "p3");
  EXPECT_EQ(d->samples[2].id, "p2");
  EXPECT_EQ(d->samples[2].text, "二");  // the first copy is kept
  // 15 bytes of 3-byte characters cut to 10 bytes ends on a character boundary: 3 characters.
  EXPECT_EQ(d->samples[0].text, "四五六…");

  ASSERT_TRUE(store.Publish(1000, {MakeUpdate("t1", 1, 5)}).ok());
  d = store.Topic("t1");
  ASSERT_TRUE(d->latest.has_value());
  EXPECT_EQ(d->samples.size(), 3u);
  auto j = json::parse(TopicDetailJson("t1", *d));
  EXPECT_EQ(j["topic_id"], "t1");
  EXPECT_EQ(j["on_list"], true);
  EXPECT_EQ(j["samples"][0]["id"], "p4");
  EXPECT_EQ(j["samples"][0]["user"], "u4");
  EXPECT_EQ(j["history"][0]["rank"], 1);
  EXPECT_EQ(j["latest"]["hashtag"], "#话题t1#");
}

TEST(TrendStoreTest, SamplePostsBadInput) {
  TrendStore store;
  Status s = store.AddSamplePosts("bad/id", {{"p1", "x", "u", 1}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'bad/id'"), std::string::npos) << s.message();
  s = store.AddSamplePosts("t1", {{"p1", "x", "u", 1}, {"", "y", "u", 2}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("post 1 has no id"), std::string::npos) << s.message();
  EXPECT_FALSE(store.Topic("t1").has_value());  // refused whole
}

TEST(TrendStoreTest, HealthIsValidatedAndRendered) {
  TrendStore store;
  EXPECT_EQ(store.Health().updated_ms, 0);
  EXPECT_EQ(json::parse(store.HealthJsonNow())["model"], "lexical only");
  PipelineHealth h;
  h.posts_per_s = 1234.5;
  h.lag_ms = 80;
  h.inference_p99_ms = 4.25;
  h.dead_letters = 3;
  h.dead_letter_kinds = {{"json", 2}, {"bad_utf8", 1}};
  h.buckets = 7;
  h.posts_total = 99999;
  h.model = "bert-tiny-weibo";
  h.backend = "cuda";
  h.source = "simulator";
  ASSERT_TRUE(store.UpdateHealth(h).ok());
  auto j = json::parse(store.HealthJsonNow());
  EXPECT_DOUBLE_EQ(j["posts_per_s"].get<double>(), 1234.5);
  EXPECT_DOUBLE_EQ(j["inference_p99_ms"].get<double>(), 4.25);
  EXPECT_EQ(j["dead_letter_kinds"]["json"], 2);
  EXPECT_EQ(j["model"], "bert-tiny-weibo");
  EXPECT_EQ(j["backend"], "cuda");
  EXPECT_EQ(j["live"], true);
  EXPECT_GT(j["updated"].get<int64_t>(), 0);
  EXPECT_EQ(store.Health().posts_total, 99999);

  PipelineHealth bad = h;
  bad.lag_ms = -1;
  Status s = store.UpdateHealth(bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("lag_ms -1"), std::string::npos) << s.message();
  bad = h;
  bad.posts_per_s = std::nan("");
  EXPECT_FALSE(store.UpdateHealth(bad).ok());
  bad = h;
  bad.dead_letters = -2;
  EXPECT_FALSE(store.UpdateHealth(bad).ok());
  EXPECT_EQ(store.Health().model, "bert-tiny-weibo");  // the last good one stays
}

TEST(TrendStoreTest, ListenersAreCalledPerBucketInOrderUntilUnsubscribed) {
  TrendStore store;
  std::vector<uint64_t> seqs;
  std::vector<std::string> health;
  TrendStoreListener l;
  l.on_trends = [&](const std::shared_ptr<const HotList>& list) { seqs.push_back(list->seq); };
  l.on_health = [&](const PipelineHealth&, const std::string& j) { health.push_back(j); };
  uint64_t token = store.Subscribe(l);
  for (int b = 1; b <= 3; ++b) ASSERT_TRUE(store.Publish(b * 1000, MakeList(2)).ok());
  ASSERT_FALSE(store.Publish(1000, MakeList(2)).ok());  // refused: no call
  ASSERT_TRUE(store.UpdateHealth({}).ok());
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2, 3}));
  ASSERT_EQ(health.size(), 1u);
  EXPECT_NE(health[0].find("\"model\":\"lexical only\""), std::string::npos);
  store.Unsubscribe(token);
  ASSERT_TRUE(store.Publish(9000, MakeList(2)).ok());
  EXPECT_EQ(seqs.size(), 3u);
}

TEST(TrendStoreTest, ValidTopicIds) {
  EXPECT_TRUE(ValidTopicId("t42"));
  EXPECT_TRUE(ValidTopicId("topic_1.2:x-y"));
  EXPECT_TRUE(ValidTopicId(std::string(128, 'a')));
  EXPECT_FALSE(ValidTopicId(""));
  EXPECT_FALSE(ValidTopicId(std::string(129, 'a')));
  EXPECT_FALSE(ValidTopicId("a/b"));
  EXPECT_FALSE(ValidTopicId("a b"));
  EXPECT_FALSE(ValidTopicId("话题"));
  EXPECT_FALSE(ValidTopicId("a%2F"));
}

// One publisher, sample and health writers, and readers at once: every reader sees whole,
// consistent snapshots in publish order.
TEST(TrendStoreTest, ConcurrentPublishAndRead) {
  TrendStoreOptions o;
  o.keep_buckets = 5;
  TrendStore store(o);
  constexpr int kBuckets = 400;
  std::atomic<bool> done{false};
  std::atomic<int> listener_calls{0};
  uint64_t token = store.Subscribe({[&](const std::shared_ptr<const HotList>& l) {
                                      // A listener may read the store.
                                      EXPECT_EQ(store.Current()->seq >= l->seq, true);
                                      listener_calls.fetch_add(1);
                                    },
                                    nullptr});
  std::thread publisher([&] {
    for (int b = 1; b <= kBuckets; ++b) {
      // The list rotates through 30 topic ids, so topics keep entering, leaving and expiring.
      std::vector<TrendUpdate> list;
      for (int r = 1; r <= 10; ++r) {
        list.push_back(MakeUpdate("t" + std::to_string((b + r * 3) % 30), r, 1000.0 / r));
      }
      EXPECT_TRUE(store.Publish(b * 1000, list).ok());
    }
    done = true;
  });
  std::thread samples([&] {
    for (int i = 0; !done; ++i) {
      EXPECT_TRUE(store
                      .AddSamplePosts("t" + std::to_string(i % 30),
                                      {{"p" + std::to_string(i), "样本", "u", i}})
                      .ok());
    }
  });
  std::thread health([&] {
    for (int i = 0; !done; ++i) {
      PipelineHealth h;
      h.buckets = i;
      EXPECT_TRUE(store.UpdateHealth(h).ok());
    }
  });
  std::vector<std::thread> readers;
  std::atomic<int64_t> reads{0};
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      uint64_t last_seq = 0;
      while (!done) {
        auto cur = store.Current();
        EXPECT_GE(cur->seq, last_seq);
        last_seq = cur->seq;
        for (size_t i = 0; i < cur->trends.size(); ++i) {
          EXPECT_EQ(cur->trends[i].rank, static_cast<int>(i) + 1);
          EXPECT_EQ(cur->trends[i].updated_ms, cur->bucket_ms);
        }
        EXPECT_EQ(cur->spark.size(), cur->trends.size());
        if (!cur->trends.empty()) {
          auto d = store.Topic(cur->trends[0].topic_id);
          if (d) {
            EXPECT_LE(d->samples.size(), 8u);
          }
        }
        EXPECT_FALSE(store.HealthJsonNow().empty());
        reads.fetch_add(1);
      }
    });
  }
  publisher.join();
  samples.join();
  health.join();
  for (auto& t : readers) t.join();
  store.Unsubscribe(token);
  EXPECT_EQ(listener_calls.load(), kBuckets);
  EXPECT_EQ(store.Current()->seq, static_cast<uint64_t>(kBuckets));
  EXPECT_GT(reads.load(), 0);
  // 30 ids rotate through a 10-entry list, each unlisted for at most a few buckets: all stay,
  // and the store never holds more than the ids that exist.
  EXPECT_LE(store.topic_count(), 30u);
}

}  // namespace
}  // namespace surge::stream::web
