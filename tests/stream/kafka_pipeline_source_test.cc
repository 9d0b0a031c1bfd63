// KafkaPipelineSource: a Kafka topic feeding the embedded pipeline (surge trends / surge demo
// --source kafka://...), against the mock cluster.
#include <gtest/gtest.h>

#include "kafka_test_util.h"
#include "stream/kafka/pipeline_source.h"
#include "stream/pipeline.h"

namespace surge::stream::kafka {
namespace {

using testing::kPatienceMs;
using testing::MakeConsumer;
using testing::MakeProducer;
using testing::StartCluster;
using testing::TestPost;

// The source's URI with the tests' brisk consumer properties, less their 1 s metadata refresh:
// librdkafka 2.0.2's group leader rejoins when a metadata answer comes while it waits for its
// assignor's, and the mock answers joins after whole seconds, so a 1 s refresh often lands there
// and adds rounds of 5 s to the join.
std::string SourceUri(const MockCluster& mc, const std::string& topic, const std::string& group) {
  std::string uri = mc.Uri(topic, group);
  for (const auto& [k, v] : testing::FastConsumerProps()) {
    uri += "&" + k + "=" + (k == "topic.metadata.refresh.interval.ms" ? "60000" : v);
  }
  return uri;
}

// The group coordinator answers every join "loading" after 2 s for at least `ms` in all, whatever
// the client's backoff between attempts (as after a failover, while it loads the group's offsets).
Status CoordinatorLoadingFor(MockCluster& mc, int ms) {
  constexpr int kLoadingMs = 2000;
  std::vector<std::pair<rd_kafka_resp_err_t, int>> loading(
      ms / kLoadingMs + 1, {RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS, kLoadingMs});
  return mc.PushBrokerErrors(1, ApiKey::kJoinGroup, loading);
}

// A one-thread lexical pipeline run over `source`, and its health afterwards.
struct RunOutcome {
  Status status;
  PipelineHealth health;
};
RunOutcome RunPipeline(PostSource* source, DeadLetterSink* dead) {
  PipelineOptions o;
  o.threads = 1;
  o.annotate.new_words = false;
  auto pipeline = Pipeline::Create(o);
  if (!pipeline.ok()) return {pipeline.status(), {}};
  MemoryTrendSink sink;
  Status st = (*pipeline)->Run(source, {&sink}, dead);
  return {st, (*pipeline)->health()};
}

TEST(KafkaPipelineSourceTest, FeedsThePipelineDeadLettersBadRecordsAndCommitsAtTheEnd) {
  auto mc = StartCluster(1);
  ASSERT_NE(mc, nullptr);
  ASSERT_TRUE(mc->CreateTopic("surge.posts", 2).ok());
  auto producer = MakeProducer(*mc);
  ASSERT_NE(producer, nullptr);
  const int kPosts = 300;
  for (int i = 1; i <= kPosts; ++i) {
    // ProducerRecord views its bytes: keep them alive across Produce.
    const std::string key = "p" + std::to_string(i), value = PostToJson(TestPost(i));
    ProducerRecord r;
    r.topic = "surge.posts";
    r.key = key;
    r.value = value;
    ASSERT_TRUE(producer->Produce(r).ok());
    if (i == 100 || i == 200) {
      ProducerRecord bad;
      bad.topic = "surge.posts";
      bad.key = "bad";
      bad.value = i == 100 ? "{not json" : R"({"id":"x","ts":1,"user":{"id":"u"}})";
      ASSERT_TRUE(producer->Produce(bad).ok());
    }
  }
  ASSERT_TRUE(producer->Flush(kPatienceMs).ok());

  // The stream ends 3 s after the last record.
  auto source = KafkaPipelineSource::Open(SourceUri(*mc, "surge.posts", "trends"), 3000);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ((*source)->name(), "kafka:surge.posts");
  auto dead = DeadLetterSink::Open("");
  ASSERT_TRUE(dead.ok());
  RunOutcome run = RunPipeline(source->get(), dead->get());
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  PipelineHealth& h = run.health;
  EXPECT_EQ(h.posts, kPosts);
  EXPECT_EQ(h.dead_letters, 2);
  EXPECT_EQ(h.dead_letters_by_kind["json"], 1);
  EXPECT_EQ(h.dead_letters_by_kind["missing_field"], 1);
  EXPECT_TRUE(h.finished);

  // Nothing is committed before the run has flushed; CommitAll commits every record read.
  auto probe = MakeConsumer(*mc, "trends");
  ASSERT_NE(probe, nullptr);
  auto before = probe->Committed({{"surge.posts", 0}, {"surge.posts", 1}}, kPatienceMs);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  for (const auto& tpo : *before) EXPECT_EQ(tpo.offset, kOffsetCommitted);
  ASSERT_TRUE((*source)->CommitAll().ok());
  auto after = probe->Committed({{"surge.posts", 0}, {"surge.posts", 1}}, kPatienceMs);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  int64_t total = 0;
  for (const auto& tpo : *after) total += tpo.offset;
  EXPECT_EQ(total, kPosts + 2);  // every record, the dead letters included
}

// A join that outlasts its allowance is waited for while the brokers answer for the topic: here
// the coordinator is still loading the group's offsets (after a failover) for longer than that.
TEST(KafkaPipelineSourceTest, WaitsForASlowJoinWhileTheBrokersAnswer) {
  auto mc = StartCluster(1);
  ASSERT_NE(mc, nullptr);
  ASSERT_TRUE(mc->CreateTopic("surge.posts", 2).ok());
  auto producer = MakeProducer(*mc);
  ASSERT_NE(producer, nullptr);
  const int kPosts = 40;
  for (int i = 1; i <= kPosts; ++i) {
    const std::string value = PostToJson(TestPost(i));
    ProducerRecord r;
    r.topic = "surge.posts";
    r.value = value;
    ASSERT_TRUE(producer->Produce(r).ok());
  }
  ASSERT_TRUE(producer->Flush(kPatienceMs).ok());
  // Loading for longer than the join allowance (idle_ms + 10 s), shorter than the rebalance's.
  const int kIdleMs = 3000;
  ASSERT_TRUE(CoordinatorLoadingFor(*mc, kIdleMs + 10000).ok());

  auto source = KafkaPipelineSource::Open(SourceUri(*mc, "surge.posts", "trends"), kIdleMs);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  RunOutcome run = RunPipeline(source->get(), nullptr);
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  EXPECT_EQ(run.health.posts, kPosts);
}

// A group that does not settle within the rebalance's allowance either (idle_ms + 60 s) fails the
// run with that reason, not as unreachable brokers: they answer.
TEST(KafkaPipelineSourceTest, ARebalanceThatDoesNotSettleIsAClearError) {
  auto mc = StartCluster(1);
  ASSERT_NE(mc, nullptr);
  ASSERT_TRUE(mc->CreateTopic("surge.posts", 1).ok());
  const int kIdleMs = 1000;
  ASSERT_TRUE(CoordinatorLoadingFor(*mc, kIdleMs + 60000 + 10000).ok());
  auto source = KafkaPipelineSource::Open(SourceUri(*mc, "surge.posts", "trends"), kIdleMs);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  RunOutcome run = RunPipeline(source->get(), nullptr);
  ASSERT_FALSE(run.status.ok());
  EXPECT_EQ(run.status.code(), StatusCode::kUnavailable) << run.status.ToString();
  EXPECT_NE(
      run.status.message().find("group 'trends' assigned this reader no partition in 61000 ms"),
      std::string::npos)
      << run.status.ToString();
  EXPECT_EQ(run.health.posts, 0);
}

TEST(KafkaPipelineSourceTest, AUriWithoutATopicIsRefused) {
  auto s = KafkaPipelineSource::Open("kafka://127.0.0.1:9092", 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("posts topic"), std::string::npos) << s.status().ToString();
  auto bad = KafkaPipelineSource::Open("kafka://", 0);
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace surge::stream::kafka
