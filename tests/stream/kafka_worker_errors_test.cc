// Bad input to the stage workers (workers.h): endpoints they cannot work with are refused at
// start with the reason; a record on their input that is not of their kind is skipped and the
// worker goes on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "kafka_test_util.h"
#include "stream/checkpoint.h"
#include "stream/kafka/workers.h"

namespace surge::stream::kafka {
namespace {

using testing::kPatienceMs;

TEST(KafkaWorkerErrorsTest, EndpointsWithoutTopicOrGroupAreRefused) {
  WorkerOptions o;
  o.in = *KafkaUri::Parse("kafka://127.0.0.1:1/surge.posts");  // no group
  o.out = *KafkaUri::Parse("kafka://127.0.0.1:1/surge.terms");
  Status s = RunAnnotateWorker(o, AnnotateOptions());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("needs a topic and a group"), std::string::npos) << s.message();
  o.in = *KafkaUri::Parse("kafka://127.0.0.1:1/surge.terms?group=d");
  o.out = *KafkaUri::Parse("kafka://127.0.0.1:1");
  s = RunDetectWorker(o, DetectOptions());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--out"), std::string::npos) << s.message();
  o.out = *KafkaUri::Parse("kafka://127.0.0.1:1/surge.trends");
  s = RunRankWorker(o, RankOptions(), 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--shards"), std::string::npos) << s.message();
}

TEST(KafkaWorkerErrorsTest, RankNeedsASinglePartitionInput) {
  auto mc = testing::StartCluster(1);
  ASSERT_NE(mc, nullptr);
  ASSERT_TRUE(mc->CreateTopic("surge.candidates", 2).ok());
  ASSERT_TRUE(mc->CreateTopic("surge.trends", 1).ok());
  WorkerOptions o;
  o.in = *KafkaUri::Parse(mc->Uri("surge.candidates", "rank"));
  o.out = *KafkaUri::Parse(mc->Uri("surge.trends"));
  o.checkpoint_dir = "unused";
  Status s = RunRankWorker(o, RankOptions(), 2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("has 2 partitions"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("exactly 1"), std::string::npos) << s.message();
}

TEST(KafkaWorkerErrorsTest, DetectSkipsRecordsThatAreNotTermBatchesAndGoesOn) {
  auto mc = testing::StartCluster(1);
  ASSERT_NE(mc, nullptr);
  ASSERT_TRUE(mc->CreateTopic("surge.terms", 1).ok());
  ASSERT_TRUE(mc->CreateTopic("surge.candidates", 1).ok());
  auto producer = testing::MakeProducer(*mc);
  ASSERT_NE(producer, nullptr);
  ASSERT_TRUE(producer->Produce("surge.terms", "k", "not a term batch").ok());
  ASSERT_TRUE(producer->Produce("surge.terms", "k", "").ok());
  ASSERT_TRUE(producer->Flush(kPatienceMs).ok());
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("surge_worker_err_{}", getpid());
  std::filesystem::remove_all(dir);

  std::atomic<bool> stop{false};
  WorkerOptions o;
  o.in = *KafkaUri::Parse(mc->Uri("surge.terms", "detect"));
  o.in.properties = testing::FastConsumerProps();
  o.out = *KafkaUri::Parse(mc->Uri("surge.candidates"));
  o.checkpoint_dir = dir.string();
  o.checkpoint_interval_ms = 100;
  o.stop = &stop;
  Status result;
  std::thread worker([&] { result = RunDetectWorker(o, DetectOptions()); });
  // The worker consumed both records (its checkpoint is past them) and is still running.
  auto store = CheckpointStore::Open(dir.string());
  ASSERT_TRUE(store.ok());
  bool past = testing::WaitFor(
      [&] {
        auto c = store->LoadLatest("detect.surge.terms.0");
        return c.ok() && c->has_value() && (*c)->checkpoint.offsets.size() == 1 &&
               (*c)->checkpoint.offsets[0].next_offset == 2;
      },
      [] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); });
  stop = true;
  worker.join();
  EXPECT_TRUE(past) << "the worker did not checkpoint past the bad records";
  EXPECT_TRUE(result.ok()) << result.ToString();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace surge::stream::kafka
