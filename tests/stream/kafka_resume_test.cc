// The commit protocol (PartitionCheckpointer) on the mock cluster: a stage that counts posts per
// partition is crashed (its consumer destroyed without commit or leaving the group) or rebalanced
// mid-stream; the next owner restores the partition checkpoints and the final counts show every
// post exactly once — none lost, none counted twice.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "kafka_test_util.h"
#include "stream/checkpoint.h"
#include "stream/kafka/partition_checkpointer.h"
#include "stream/kafka/post_source.h"
#include "stream/kafka/sinks.h"

namespace surge::stream::kafka {
namespace {

using testing::kPatienceMs;

constexpr char kTopic[] = "posts";
constexpr int kPartitions = 3;
constexpr int kPosts = 600;

// A stateful stage: per partition, how many times each post id was applied.
class CountingWorker {
 public:
  CountingWorker(const MockCluster& mc, CheckpointStore* store, const std::string& name) {
    PartitionStateHooks hooks;
    hooks.restore = [this](const TopicPartition& tp, const Checkpoint* c) -> Status {
      auto& counts = state_[tp];
      counts.clear();
      if (c == nullptr) return Status::Ok();
      const CheckpointBlob* blob = c->FindBlob("counts");
      if (blob == nullptr) return DataLossError("checkpoint {} has no 'counts' blob", c->name);
      std::istringstream in(blob->data);
      std::string id;
      int n;
      while (in >> id >> n) counts[id] = n;
      return Status::Ok();
    };
    hooks.snapshot = [this](const TopicPartition& tp) -> Result<std::vector<CheckpointBlob>> {
      std::string data;
      for (const auto& [id, n] : state_[tp]) data += fmt::format("{} {}\n", id, n);
      return std::vector<CheckpointBlob>{{"counts", std::move(data)}};
    };
    hooks.drop = [this](const TopicPartition& tp) { state_.erase(tp); };
    PartitionCheckpointer::Options o;
    o.stage = "count";
    o.worker_id = name;
    o.state_version = 1;
    checkpointer_ = std::make_unique<PartitionCheckpointer>(store, o, std::move(hooks));

    KafkaPostSourceOptions so;
    so.uri = *KafkaUri::Parse(mc.Uri(kTopic, "counters"));
    so.uri.properties = testing::FastConsumerProps();
    so.uri.properties.push_back({"client.id", name});
    so.max_batch = 37;  // batches cut across checkpoints at odd places
    so.on_rebalance = checkpointer_->Handler();
    auto source = KafkaPostSource::Create(std::move(so));
    EXPECT_TRUE(source.ok()) << source.status().ToString();
    if (source.ok()) {
      source_ = std::move(source).value();
      checkpointer_->Attach(&source_->consumer());
    }
  }

  // One poll; applies the batch and marks it applied.
  void Step() {
    PostBatch batch;
    Status s = source_->Poll(50, &batch);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (const auto& sp : batch.posts) {
      ++state_[{sp.topic, sp.partition}][sp.post.id];
      ++applied_;
    }
    for (const auto& next : batch.next_offsets) checkpointer_->MarkPosition(next);
  }
  void StepUntilApplied(int64_t n) {
    ASSERT_TRUE(testing::WaitFor([&] { return applied_ >= n; }, [&] { Step(); }))
        << "applied " << applied_ << " of " << n;
  }
  // Steps until the state holds every post, then a few more polls to catch late duplicates.
  void StepUntilAllCounted() {
    ASSERT_TRUE(testing::WaitFor([&] { return Distinct() >= kPosts; }, [&] { Step(); }))
        << "distinct " << Distinct();
    for (int i = 0; i < 10; ++i) Step();
  }

  size_t Distinct() const {
    size_t n = 0;
    for (const auto& [tp, counts] : state_) n += counts.size();
    return n;
  }
  // Every post exactly once across the partitions this worker owns.
  void ExpectExactlyOnce() const {
    std::map<std::string, int> all;
    for (const auto& [tp, counts] : state_) {
      for (const auto& [id, n] : counts) all[id] += n;
    }
    EXPECT_EQ(all.size(), static_cast<size_t>(kPosts)) << "posts lost";
    int doubled = 0;
    for (const auto& [id, n] : all) doubled += n != 1;
    EXPECT_EQ(doubled, 0) << "posts counted more than once";
  }

  PartitionCheckpointer& checkpointer() { return *checkpointer_; }
  KafkaConsumer& consumer() { return source_->consumer(); }
  bool ok() const { return source_ != nullptr; }
  int64_t applied() const { return applied_; }
  size_t owned() const { return state_.size(); }

 private:
  std::map<TopicPartition, std::map<std::string, int>> state_;
  std::unique_ptr<PartitionCheckpointer> checkpointer_;
  std::unique_ptr<KafkaPostSource> source_;
  int64_t applied_ = 0;
};

class KafkaResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("surge_resume_{}_{}", getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    auto store = CheckpointStore::Open(dir_.string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::make_unique<CheckpointStore>(std::move(store).value());
    mc_ = testing::StartCluster(1);
    ASSERT_NE(mc_, nullptr);
    ASSERT_TRUE(mc_->CreateTopic(kTopic, kPartitions).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void ProducePosts(int from, int to) {
    auto sink = KafkaPostSink::Create(*KafkaUri::Parse(mc_->Uri(kTopic)), kPatienceMs);
    ASSERT_TRUE(sink.ok()) << sink.status().ToString();
    for (int i = from; i < to; ++i) ASSERT_TRUE((*sink)->Write(testing::TestPost(i)).ok());
    ASSERT_TRUE((*sink)->Flush(kPatienceMs).ok());
  }

  std::map<TopicPartition, int64_t> Committed(KafkaConsumer& c) {
    std::vector<TopicPartition> tps;
    for (int p = 0; p < kPartitions; ++p) tps.push_back({kTopic, p});
    auto got = c.Committed(tps, kPatienceMs);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    std::map<TopicPartition, int64_t> out;
    if (got.ok()) {
      for (const auto& o : *got) out[{o.topic, o.partition}] = o.offset;
    }
    return out;
  }

  std::filesystem::path dir_;
  std::unique_ptr<CheckpointStore> store_;
  std::unique_ptr<MockCluster> mc_;
};

// Checkpoint at ~200, a second checkpoint at ~400 whose commit the broker refuses (so the group's
// committed offsets are older than the checkpoint), ~100 more applied, then a crash. Resuming
// from the committed offsets would count 200..400 twice; the checkpoint wins.
TEST_F(KafkaResumeTest, CrashResumesFromCheckpointWhenTheCommitIsOlder) {
  ProducePosts(0, kPosts);
  {
    CountingWorker a(*mc_, store_.get(), "worker-a");
    ASSERT_TRUE(a.ok());
    a.StepUntilApplied(200);
    ASSERT_TRUE(a.checkpointer().CheckpointAll().ok());
    EXPECT_EQ(a.checkpointer().counters().commit_failures, 0);
    auto first = a.checkpointer().positions();
    a.StepUntilApplied(400);
    mc_->PushRequestErrors(ApiKey::kOffsetCommit, {RD_KAFKA_RESP_ERR_OFFSET_METADATA_TOO_LARGE});
    ASSERT_TRUE(a.checkpointer().CheckpointAll().ok());
    ASSERT_EQ(a.checkpointer().counters().commit_failures, 1);
    auto committed = Committed(a.consumer());
    int64_t behind = 0;
    for (const auto& [tp, next] : a.checkpointer().positions()) {
      int64_t at_first = first.count(tp) ? first[tp] : kOffsetBeginning;
      EXPECT_EQ(committed[tp], at_first >= 0 ? at_first : kOffsetCommitted) << ToString(tp);
      if (next >= 0) behind += next - std::max<int64_t>(committed[tp], 0);
    }
    ASSERT_GT(behind, 0) << "the scenario needs committed offsets older than the checkpoint";
    a.StepUntilApplied(500);  // applied, never checkpointed: lost with the crash
    a.consumer().Abandon();
  }
  CountingWorker b(*mc_, store_.get(), "worker-b");
  ASSERT_TRUE(b.ok());
  b.StepUntilAllCounted();
  EXPECT_EQ(b.checkpointer().counters().restored, kPartitions);
  b.ExpectExactlyOnce();
}

// Committed offsets ahead of the checkpoint (as after a checkpoint lost to a bad disk): resuming
// from them would lose what the checkpoint does not hold; the checkpoint wins.
TEST_F(KafkaResumeTest, CrashResumesFromCheckpointWhenTheCommitIsNewer) {
  ProducePosts(0, kPosts);
  {
    CountingWorker a(*mc_, store_.get(), "worker-a");
    ASSERT_TRUE(a.ok());
    a.StepUntilApplied(200);
    ASSERT_TRUE(a.checkpointer().CheckpointAll().ok());
    a.StepUntilApplied(400);
    // A partition the worker has not read from yet (a slow fetch) has no position to commit.
    std::vector<TopicPartitionOffset> ahead;
    for (const auto& [tp, next] : a.checkpointer().positions()) {
      if (next >= 0) ahead.push_back({tp.topic, tp.partition, next});
    }
    ASSERT_FALSE(ahead.empty()) << "400 posts applied, yet no partition has a position";
    // The group can still be settling right after the first assignment (the coordinator then
    // refuses a commit with a retriable error); polling lets it settle. Offsets past the
    // checkpoint stay past it however far the worker reads on meanwhile.
    Status committed = a.consumer().Commit(ahead);
    ASSERT_TRUE(testing::WaitFor([&] { return committed.ok(); },
                                 [&] {
                                   a.Step();
                                   committed = a.consumer().Commit(ahead);
                                 }))
        << committed.ToString();
    a.consumer().Abandon();
  }
  CountingWorker b(*mc_, store_.get(), "worker-b");
  ASSERT_TRUE(b.ok());
  b.StepUntilAllCounted();
  b.ExpectExactlyOnce();
}

// Two workers share the partitions; one leaves mid-stream. Its revoke handler checkpoints its
// partitions; the survivor is revoked too (eager rebalance: its commit is refused while the group
// rebalances), re-assigned everything, and restores all partitions from their checkpoints.
TEST_F(KafkaResumeTest, RebalanceHandsPartitionStateOverThroughCheckpoints) {
  CountingWorker a(*mc_, store_.get(), "worker-a");
  CountingWorker b(*mc_, store_.get(), "worker-b");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(testing::WaitFor(
      [&] { return a.owned() + b.owned() == kPartitions && a.owned() > 0 && b.owned() > 0; },
      [&] {
        a.Step();
        b.Step();
      }))
      << "a owns " << a.owned() << ", b owns " << b.owned();
  ProducePosts(0, kPosts / 2);
  ASSERT_TRUE(testing::WaitFor([&] { return a.applied() + b.applied() >= kPosts / 2; },
                               [&] {
                                 a.Step();
                                 b.Step();
                               }));
  ASSERT_TRUE(b.consumer().Close().ok());
  EXPECT_GT(b.checkpointer().counters().checkpoints, 0);
  ProducePosts(kPosts / 2, kPosts);
  a.StepUntilAllCounted();
  EXPECT_EQ(a.owned(), static_cast<size_t>(kPartitions));
  a.ExpectExactlyOnce();
}

TEST_F(KafkaResumeTest, UnreadableCheckpointStopsTheStageInsteadOfRunningWithoutState) {
  ProducePosts(0, 10);
  // Every checkpoint of partition 0 is corrupt: the stage must not read that partition on.
  Checkpoint c;
  c.name = "count.posts.0";
  c.state_version = 1;
  c.offsets = {{kTopic, 0, 1}};
  ASSERT_TRUE(store_->Write(c).ok());
  ASSERT_TRUE(store_->Write(c).ok());
  auto files = store_->Files("count.posts.0");
  ASSERT_TRUE(files.ok());
  for (const auto& f : *files) std::filesystem::resize_file(f, 20);
  CountingWorker a(*mc_, store_.get(), "worker-a");
  ASSERT_TRUE(a.ok());
  Status error;
  ASSERT_TRUE(testing::WaitFor([&] { return !error.ok(); },
                               [&] {
                                 Status s = a.consumer().Poll(10, 50).status();
                                 if (!s.ok()) error = s;
                               }));
  EXPECT_EQ(error.code(), StatusCode::kDataLoss) << error.ToString();
  EXPECT_NE(error.message().find("count.posts.0"), std::string::npos) << error.message();
  // Polling on anyway reads nothing of the partitions it could not restore (new records are
  // waiting in all of them).
  ProducePosts(10, 100);
  std::set<int32_t> read_from;
  testing::WaitFor([] { return false; },
                   [&] {
                     auto batch = a.consumer().Poll(100, 50);
                     ASSERT_TRUE(batch.ok()) << batch.status().ToString();
                     for (const auto& m : *batch) read_from.insert(m.partition);
                   },
                   3000);
  EXPECT_EQ(read_from.count(0), 0u);
  EXPECT_EQ(read_from.size(), 0u) << "all partitions of the failed assignment are paused";
}

}  // namespace
}  // namespace surge::stream::kafka
