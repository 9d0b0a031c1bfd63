// The scaled-out pipeline as separate processes on the mock cluster: two annotate workers (one
// consumer group), two detect workers (one group, one shard per terms partition) and a rank
// worker, each a `surge worker` process. Mid-stream one annotate and one detect worker are killed
// with SIGKILL and restarted; the hot lists on surge.trends must equal those of the single-process
// pipeline (`surge trends`' engine) on the same posts: no post lost, none counted twice.
//
// The posts topic has one partition, so one annotate worker reads at a time and the other stands
// by (it takes over when the first dies): detect then sees the posts in input order, as the
// single-process pipeline does. With several posts partitions, annotate workers interleave their
// batches on the terms topic and detect's order-dependent weights (author rate, near-duplicates)
// make the lists differ slightly from the single-process run.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "kafka_test_util.h"
#include "resources.h"
#include "stream/checkpoint.h"
#include "stream/kafka/sinks.h"
#include "stream/pipeline.h"
#include "stream/source.h"
#include "synthetic.h"

namespace surge::stream::kafka {
namespace {

namespace fs = std::filesystem;
using kafka::testing::kPatienceMs;

const std::string kSurge = std::string(SURGE_BINARY_DIR) + "/bin/surge";

// A child process running `surge ...`; killed (SIGKILL) if still running at destruction.
class Worker {
 public:
  Worker(std::string name, std::vector<std::string> args, const fs::path& log)
      : name_(std::move(name)) {
    std::vector<std::string> argv = {kSurge};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    std::string log_path = log.string();
    pid_ = fork();
    if (pid_ == 0) {  // only async-signal-safe calls until exec
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      execv(cargv[0], cargv.data());
      _exit(127);
    }
  }
  ~Worker() {
    if (pid_ > 0) Kill();
  }
  void Kill() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // SIGTERM and wait; the exit status (-1 if it had to be killed).
  int Stop(int timeout_ms = kPatienceMs) {
    kill(pid_, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    Kill();
    return -1;
  }
  bool Running() {
    int status = 0;
    return pid_ > 0 && waitpid(pid_, &status, WNOHANG) == 0;
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  pid_t pid_ = -1;
};

std::string Summary(const TrendUpdate& u) {
  std::string terms;
  for (const auto& t : u.terms) terms += t + ",";
  return fmt::format("{} #{} {} heat={:.6f} posts={} authors={} prev={} terms={}", u.topic_id,
                     u.rank, u.hashtag, u.heat, u.posts, u.authors,
                     u.prev_rank ? std::to_string(*u.prev_rank) : "-", terms);
}

TEST(KafkaWorkersTest, KilledWorkersLoseAndDoubleCountNothing) {
  if (!fs::exists(kSurge)) GTEST_SKIP() << kSurge << " is not built (target surge)";
  ::surge::stream::testing::StreamSpec spec;
  spec.buckets = 12;
  spec.background_per_bucket = 600;
  spec.bursts = {{"AI推理革命", {"芯片", "算力", "发布会"}, 4, 160, 1, 4},
                 {"国足逆转绝杀", {"比赛", "进球", "球迷"}, 7, 200, 1, 3}};
  const std::vector<Post> posts = ::surge::stream::testing::MakeStream(spec);
  const fs::path dir = fs::temp_directory_path() / fmt::format("surge_workers_{}", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir / "checkpoints");
  { std::ofstream(dir / "posts.jsonl") << ::surge::stream::testing::ToJsonl(posts); }

  // The single-process reference: same options, deterministic (one annotate thread).
  PipelineOptions po;
  po.threads = 1;
  po.detect_shards = 2;
  po.annotate.new_words = false;
  auto pipeline = Pipeline::Create(po, ::surge::stream::testing::LexicalResources());
  ASSERT_TRUE(pipeline.ok()) << pipeline.status().ToString();
  auto source = JsonlSource::Open((dir / "posts.jsonl").string());
  ASSERT_TRUE(source.ok());
  MemoryTrendSink reference;
  ASSERT_TRUE((*pipeline)->Run(source->get(), {&reference}, nullptr).ok());
  ASSERT_GT(reference.lists.size(), 2u);
  // The last bucket closes only at the end of input, which a Kafka stream never reaches.
  const int64_t last_end = reference.lists.back().bucket_end_ms;
  std::map<int64_t, std::vector<TrendUpdate>> want;
  size_t want_updates = 0;
  for (const HotList& l : reference.lists) {
    if (l.bucket_end_ms < last_end && !l.updates.empty()) {
      // As a reader of surge.trends sees them (the JSON rounds heat to 0.01).
      for (const TrendUpdate& u : l.updates) {
        auto parsed = ParseTrend(TrendToJson(u));
        ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
        want[l.bucket_end_ms].push_back(*parsed);
      }
      want_updates += l.updates.size();
    }
  }
  ASSERT_GE(want.size(), 2u) << "the stream should put topics on several hot lists";

  auto mc = kafka::testing::StartCluster(1);
  ASSERT_NE(mc, nullptr);
  ASSERT_TRUE(mc->CreateTopic("surge.posts", 1).ok());
  ASSERT_TRUE(mc->CreateTopic("surge.terms", 2).ok());
  ASSERT_TRUE(mc->CreateTopic("surge.candidates", 1).ok());
  ASSERT_TRUE(mc->CreateTopic("surge.trends", 1).ok());
  const std::string b = mc->bootstrap();
  const std::string group_props = "&session.timeout.ms=6000&heartbeat.interval.ms=300";
  auto annotate = [&](const std::string& name) {
    return std::make_unique<Worker>(
        name,
        std::vector<std::string>{
            "worker", "annotate", "--in",
            fmt::format("kafka://{}/surge.posts?group=annotate{}", b, group_props), "--out",
            fmt::format("kafka://{}/surge.terms", b), "--no-new-words", "--max-batch", "400",
            "--worker-id", name},
        dir / (name + ".log"));
  };
  auto detect = [&](const std::string& name) {
    return std::make_unique<Worker>(
        name,
        std::vector<std::string>{
            "worker", "detect", "--in",
            fmt::format("kafka://{}/surge.terms?group=detect{}", b, group_props), "--out",
            fmt::format("kafka://{}/surge.candidates", b), "--checkpoint-dir",
            (dir / "checkpoints").string(), "--checkpoint-interval-ms", "300", "--worker-id", name},
        dir / (name + ".log"));
  };
  std::unique_ptr<Worker> a1 = annotate("annotate-1"), a2 = annotate("annotate-2");
  std::unique_ptr<Worker> d1 = detect("detect-1"), d2 = detect("detect-2");
  Worker rank("rank",
              {"worker", "rank", "--in",
               fmt::format("kafka://{}/surge.candidates?group=rank{}", b, group_props), "--out",
               fmt::format("kafka://{}/surge.trends", b), "--checkpoint-dir",
               (dir / "checkpoints").string(), "--checkpoint-interval-ms", "300", "--shards", "2",
               "--worker-id", "rank"},
              dir / "rank.log");

  auto sink = KafkaPostSink::Create(*KafkaUri::Parse(mc->Uri("surge.posts")), kPatienceMs);
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  auto produce = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) ASSERT_TRUE((*sink)->Write(posts[i]).ok());
    ASSERT_TRUE((*sink)->Flush(kPatienceMs).ok());
  };
  auto reader = kafka::testing::MakeConsumer(*mc, "trend-reader");
  ASSERT_NE(reader, nullptr);
  ASSERT_TRUE(reader->Assign({{"surge.trends", 0, kOffsetBeginning}}).ok());
  std::map<int64_t, std::vector<TrendUpdate>> got;  // bucket end -> updates in arrival order
  size_t got_updates = 0;
  auto read_trends = [&](int ms) {
    kafka::testing::PollUntil(
        *reader,
        [&](Message& m) {
          auto u = ParseTrend(m.value);
          ASSERT_TRUE(u.ok()) << u.status().ToString();
          got[u->updated_ms].push_back(*u);
          ++got_updates;
        },
        [] { return false; }, ms);
  };
  auto all_alive = [&] {
    for (Worker* w : {a1.get(), a2.get(), d1.get(), d2.get(), &rank}) {
      if (!w->Running()) {
        ADD_FAILURE() << w->name() << " exited; see " << (dir / (w->name() + ".log"));
        return false;
      }
    }
    return true;
  };

  // First half; once a hot list is out the pipeline is mid-stream: kill, produce, restart.
  const size_t half = posts.size() / 2;
  produce(0, half);
  ASSERT_TRUE(kafka::testing::WaitFor([&] { return got_updates > 0 || !all_alive(); },
                                      [&] { read_trends(200); }, 2 * kPatienceMs))
      << "no hot list from the first half";
  ASSERT_TRUE(all_alive());
  // The kill must hit state: wait until each detect worker has checkpointed a partition it owns.
  auto store = CheckpointStore::Open((dir / "checkpoints").string());
  ASSERT_TRUE(store.ok());
  auto writers = [&] {
    std::set<std::string> ids;
    for (int p = 0; p < 2; ++p) {
      auto c = store->LoadLatest(fmt::format("detect.surge.terms.{}", p));
      if (c.ok() && c->has_value()) ids.insert((*c)->checkpoint.worker_id);
    }
    return ids;
  };
  ASSERT_TRUE(kafka::testing::WaitFor(
      [&] {
        return writers() == std::set<std::string>{"detect-1", "detect-2"} || !all_alive();
      },
      [&] { read_trends(200); }))
      << "the detect workers did not each own a partition";
  d1->Kill();
  a1->Kill();
  produce(half, posts.size());
  d1 = detect("detect-1");
  a1 = annotate("annotate-1");

  ASSERT_TRUE(kafka::testing::WaitFor(
      [&] {
        size_t complete = 0;
        for (const auto& [end, updates] : want) {
          if (got.count(end) && got[end].size() >= updates.size()) ++complete;
        }
        return complete == want.size() || !all_alive();
      },
      [&] { read_trends(200); }, 3 * kPatienceMs))
      << "got " << got_updates << " updates over " << got.size() << " buckets, want "
      << want_updates << " over " << want.size();
  read_trends(1000);  // anything more (a duplicated hot list) shows up here
  ASSERT_TRUE(all_alive());

  for (const auto& [end, updates] : want) {
    const std::vector<TrendUpdate>& g = got[end];
    ASSERT_EQ(g.size(), updates.size()) << "bucket ending " << end << ": a hot list twice or cut";
    for (size_t i = 0; i < updates.size(); ++i) {
      EXPECT_EQ(Summary(g[i]), Summary(updates[i])) << "bucket ending " << end << " rank " << i + 1;
      EXPECT_EQ(g[i].samples, updates[i].samples);
      EXPECT_EQ(g[i].first_seen_ms, updates[i].first_seen_ms);
    }
  }
  for (const auto& [end, updates] : got) {
    EXPECT_TRUE(want.count(end) || end == last_end)
        << "an extra hot list for bucket ending " << end;
  }
  // Clean stops: each worker checkpoints what it owns and leaves the group.
  for (Worker* w : {a1.get(), a2.get(), d1.get(), d2.get(), &rank}) {
    EXPECT_EQ(w->Stop(), 0) << w->name() << "; see " << (dir / (w->name() + ".log"));
  }
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace surge::stream::kafka
