#include "stream/pipeline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "resources.h"
#include "stream/codec.h"
#include "stream/memory_channel.h"
#include "synthetic.h"

namespace surge::stream {
namespace {

namespace fs = std::filesystem;

testing::StreamSpec Spec() {
  testing::StreamSpec spec;
  spec.buckets = 12;
  spec.background_per_bucket = 1000;
  spec.bursts = {{"AI推理革命", {"芯片", "算力", "发布会"}, 5, 150, 1, 3}};
  return spec;
}

std::string TempPath(const std::string& name) {
  return (fs::temp_directory_path() /
          ("surge_pipeline_test." + std::to_string(getpid()) + "." + name))
      .string();
}

std::set<std::string> Hashtags(const MemoryTrendSink& sink) {
  std::set<std::string> tags;
  for (const auto& l : sink.lists) {
    for (const auto& u : l.updates) tags.insert(u.hashtag);
  }
  return tags;
}

PipelineOptions Options(int threads) {
  PipelineOptions o;
  o.threads = threads;
  o.block_records = 700;
  return o;
}

TEST(PipelineTest, BadRecordsGoToDeadLettersAndTheStreamGoesOn) {
  auto posts = testing::MakeStream(Spec());
  std::string jsonl = testing::ToJsonl(posts);
  // Bad records spread through the file, before and during the burst.
  std::string with_bad;
  size_t line = 0, bad = 0;
  for (size_t pos = 0; pos < jsonl.size();) {
    size_t nl = jsonl.find('\n', pos);
    with_bad.append(jsonl, pos, nl - pos + 1);
    pos = nl + 1;
    if (++line % 997 == 0) {
      with_bad += (bad % 2 ? "{\"id\":\"x\",\"ts\":\"late\"}\n" : "{broken\n");
      ++bad;
    }
  }
  const std::string in = TempPath("in.jsonl"), dl = TempPath("dead.jsonl");
  std::ofstream(in, std::ios::binary) << with_bad;
  for (int threads : {1, 2}) {
    auto p = Pipeline::Create(Options(threads), testing::LexicalResources());
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    auto src = JsonlSource::Open(in);
    auto dead = DeadLetterSink::Open(dl);
    MemoryTrendSink sink;
    Status st = (*p)->Run(src->get(), {&sink}, dead->get());
    ASSERT_TRUE(st.ok()) << st.ToString();
    PipelineHealth h = (*p)->health();
    EXPECT_TRUE(h.finished);
    EXPECT_EQ(h.posts, static_cast<int64_t>(posts.size()));
    EXPECT_EQ(h.dead_letters, static_cast<int64_t>(bad));
    EXPECT_EQ(h.records_read, static_cast<int64_t>(posts.size() + bad));
    EXPECT_EQ(h.dead_letters_by_kind["json"], static_cast<int64_t>((bad + 1) / 2));
    EXPECT_EQ(h.buckets, 12);
    EXPECT_GT(h.posts_per_second, 0);
    EXPECT_GT(h.latency_p99_ms, 0);
    ASSERT_EQ(sink.lists.size(), 12u);
    EXPECT_TRUE(Hashtags(sink).count("#AI推理革命#")) << threads;
    EXPECT_NE(h.source.find("in.jsonl"), std::string::npos);
    EXPECT_FALSE(h.model);
    EXPECT_EQ(h.inference_p99_ms, 0);
    // Every update comes with sample posts of its topic (for the dashboard).
    for (const auto& l : sink.lists) {
      ASSERT_EQ(l.samples.size(), l.updates.size());
      for (size_t i = 0; i < l.updates.size(); ++i) {
        ASSERT_FALSE(l.samples[i].empty());
        const Sample& smp = l.samples[i][0];
        EXPECT_FALSE(smp.text.empty());
        EXPECT_FALSE(smp.user.empty());
        EXPECT_GE(smp.ts_ms, l.bucket_start_ms);
        EXPECT_LT(smp.ts_ms, l.bucket_end_ms);
      }
    }
    // The dead-letter file names every bad record with its line.
    std::ifstream d(dl);
    std::string l;
    size_t n = 0;
    while (std::getline(d, l)) {
      EXPECT_NE(l.find("\"line\":"), std::string::npos);
      ++n;
    }
    EXPECT_EQ(n, bad);
    // After the run, health keeps the final counts: it no longer reads the sink.
    dead->reset();
    EXPECT_EQ((*p)->health().dead_letters, static_cast<int64_t>(bad));
  }
  // Without a dead-letter sink the run keeps its own, and counts the same.
  auto p = Pipeline::Create(Options(1), testing::LexicalResources());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto src = JsonlSource::Open(in);
  MemoryTrendSink sink;
  ASSERT_TRUE((*p)->Run(src->get(), {&sink}, nullptr).ok());
  EXPECT_EQ((*p)->health().dead_letters, static_cast<int64_t>(bad));
  EXPECT_EQ((*p)->health().dead_letters_by_kind["json"], static_cast<int64_t>((bad + 1) / 2));
  fs::remove(in);
  fs::remove(dl);
}

TEST(PipelineTest, OneThreadIsDeterministicAndShardsAgreeOnTheStory) {
  auto posts = testing::MakeStream(Spec());
  std::vector<std::string> runs;
  for (int shards : {1, 1, 3}) {
    PipelineOptions o = Options(1);
    o.detect_shards = shards;
    auto p = Pipeline::Create(o, testing::LexicalResources());
    ASSERT_TRUE(p.ok());
    PostGeneratorSource src(std::make_unique<VectorPostGenerator>(posts), "vector");
    MemoryTrendSink sink;
    ASSERT_TRUE((*p)->Run(&src, {&sink}, nullptr).ok());
    std::string all;
    for (const auto& l : sink.lists) {
      for (const auto& u : l.updates) all += TrendToJson(u) + "\n";
    }
    runs.push_back(all);
    EXPECT_TRUE(Hashtags(sink).count("#AI推理革命#")) << shards << " shards";
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_FALSE(runs[0].empty());
}

TEST(PipelineTest, ASinkErrorStopsTheRunWithThatError) {
  class FailingSink final : public TrendSink {
   public:
    Status OnHotList(const HotList& l) override {
      if (l.updates.empty()) return Status::Ok();
      return Status(StatusCode::kUnavailable, "store is down");
    }
  };
  auto p = Pipeline::Create(Options(2), testing::LexicalResources());
  PostGeneratorSource src(std::make_unique<VectorPostGenerator>(testing::MakeStream(Spec())), "v");
  FailingSink sink;
  Status st = (*p)->Run(&src, {&sink}, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("store is down"), std::string::npos);
}

TEST(PipelineTest, OptionsAreValidated) {
  PipelineOptions o;
  o.detect_shards = 0;
  EXPECT_FALSE(Pipeline::Create(o, testing::LexicalResources()).ok());
  o = {};
  o.rank.top_k = 0;
  EXPECT_FALSE(Pipeline::Create(o, testing::LexicalResources()).ok());
}

// The scaled-out layout in one process: annotate, detect and rank connected only by encoded
// records, as they would be through Kafka, gives the same hot lists as the embedded pipeline.
TEST(PipelineTest, StagesOverEncodedRecordsMatchTheEmbeddedRun) {
  auto posts = testing::MakeStream(Spec());
  const int32_t shards = 2;
  auto stage = AnnotateStage::Create(testing::LexicalResources(), shards);
  ASSERT_TRUE(stage.ok());
  std::vector<std::unique_ptr<DetectStage>> detect;
  for (int32_t d = 0; d < shards; ++d) {
    auto det = DetectStage::Create({}, d, shards);
    ASSERT_TRUE(det.ok());
    detect.push_back(std::move(det).value());
  }
  auto rank = RankStage::Create({}, shards);
  std::vector<HotList> lists;
  std::vector<CandidateBatch> cands;
  auto through_rank = [&] {
    for (auto& c : cands) {
      std::string bytes;
      EncodeCandidateBatch(c, &bytes);
      auto back = DecodeCandidateBatch(bytes);
      ASSERT_TRUE(back.ok());
      ASSERT_TRUE((*rank)->Process(std::move(*back), &lists).ok());
    }
    cands.clear();
  };
  for (size_t i = 0; i < posts.size(); i += 700) {
    RecordBlock rb;
    rb.sequence = i / 700;
    for (size_t k = i; k < std::min(posts.size(), i + 700); ++k) {
      rb.posts.push_back(posts[k]);
      rb.post_positions.push_back({0, static_cast<int64_t>(k)});
    }
    std::vector<TermBatch> out;
    ASSERT_TRUE((*stage)->Process(rb, "v", nullptr, &out).ok());
    ASSERT_EQ(out.size(), static_cast<size_t>(shards));
    for (auto& tb : out) {
      std::string bytes;
      EncodeTermBatch(tb, &bytes);
      auto back = DecodeTermBatch(bytes);
      ASSERT_TRUE(back.ok());
      ASSERT_TRUE(detect[tb.partition]->Process(*back, &cands).ok());
    }
    through_rank();
  }
  for (auto& d : detect) d->Finish(&cands);
  through_rank();
  (*rank)->Finish(&lists);

  PipelineOptions o = Options(1);
  o.detect_shards = shards;
  auto p = Pipeline::Create(o, testing::LexicalResources());
  PostGeneratorSource src(std::make_unique<VectorPostGenerator>(posts), "v");
  MemoryTrendSink sink;
  ASSERT_TRUE((*p)->Run(&src, {&sink}, nullptr).ok());
  ASSERT_EQ(lists.size(), sink.lists.size());
  for (size_t i = 0; i < lists.size(); ++i) {
    ASSERT_EQ(lists[i].updates.size(), sink.lists[i].updates.size()) << i;
    for (size_t k = 0; k < lists[i].updates.size(); ++k) {
      EXPECT_EQ(TrendToJson(lists[i].updates[k]), TrendToJson(sink.lists[i].updates[k]));
    }
  }
}

}  // namespace
}  // namespace surge::stream
