#include "stream/pipeline.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "core/logging.h"
#include "stream/memory_channel.h"

namespace surge::stream {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr auto kPoll = std::chrono::milliseconds(200);

}  // namespace

struct Pipeline::State {
  std::atomic<int64_t> records_read{0};
  std::atomic<int64_t> posts{0};
  std::atomic<bool> failed{false};
  std::atomic<int64_t> newest_ts_ms{INT64_MIN};

  mutable std::mutex mu;  // guards everything below
  int64_t start_ns = 0;
  // The run's dead-letter sink while it runs (its counts are read live); afterwards health holds
  // its final counts, so that health() never reads a sink that Run created or the caller freed.
  DeadLetterSink* dead = nullptr;
  Status error;
  PipelineHealth health;
  std::vector<std::pair<double, int64_t>> latency;  // (ms, posts)

  void Fail(const Status& st) {
    std::lock_guard<std::mutex> lock(mu);
    if (error.ok()) {
      error = st;
      SURGE_LOG_ERROR("pipeline: {}; stopping the input, flushing what was read", st.ToString());
    }
    failed = true;
  }
};

Result<std::unique_ptr<Pipeline>> Pipeline::Create(const PipelineOptions& options,
                                                   std::shared_ptr<AnnotateResources> resources) {
  SURGE_RETURN_IF_ERROR(options.detect.Validate());
  SURGE_RETURN_IF_ERROR(options.rank.Validate());
  if (options.detect_shards < 1 || options.detect_shards > 256) {
    return InvalidArgumentError("detect shards must be 1..256, got {}", options.detect_shards);
  }
  if (options.threads < 0 || options.threads > 256) {
    return InvalidArgumentError("threads must be 0..256, got {}", options.threads);
  }
  if (options.block_records < 1) return InvalidArgumentError("block_records must be >= 1");
  std::unique_ptr<Pipeline> p(new Pipeline());
  p->o_ = options;
  if (p->o_.threads == 0) {
    p->o_.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  if (resources) {
    p->res_ = std::move(resources);
  } else {
    SURGE_ASSIGN_OR_RETURN(p->res_, AnnotateResources::Create(options.annotate));
  }
  p->s_ = std::make_unique<State>();
  return p;
}

Pipeline::~Pipeline() = default;

PipelineHealth Pipeline::health() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  PipelineHealth h = s_->health;
  h.wall_seconds = static_cast<double>(NowNs() - s_->start_ns) / 1e9;
  h.records_read = s_->records_read;
  h.posts = s_->posts;
  if (s_->dead) {
    h.dead_letters = s_->dead->total();
    h.dead_letters_by_kind = s_->dead->counts();
  }
  h.posts_per_second = h.wall_seconds > 0 ? static_cast<double>(h.posts) / h.wall_seconds : 0;
  if (const ModelRunner* m = res_->model()) h.inference_p99_ms = m->latency().Quantile(0.99);
  if (int64_t newest = s_->newest_ts_ms.load(); newest != INT64_MIN) {
    int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    h.lag_ms = static_cast<double>(now_ms - newest);
  }
  if (!s_->latency.empty()) {
    auto lat = s_->latency;
    std::sort(lat.begin(), lat.end());
    int64_t total = 0;
    for (const auto& [ms, n] : lat) total += n;
    auto pct = [&](double q) {
      int64_t want = static_cast<int64_t>(std::ceil(q * static_cast<double>(total)));
      int64_t seen = 0;
      for (const auto& [ms, n] : lat) {
        seen += n;
        if (seen >= want) return ms;
      }
      return lat.back().first;
    };
    h.latency_p50_ms = pct(0.5);
    h.latency_p99_ms = pct(0.99);
  }
  return h;
}

Status Pipeline::Run(PostSource* source, const std::vector<TrendSink*>& sinks,
                     DeadLetterSink* dead) {
  State& s = *s_;
  std::unique_ptr<DeadLetterSink> own_dead;
  if (dead == nullptr) {
    SURGE_ASSIGN_OR_RETURN(own_dead, DeadLetterSink::Open(""));
    dead = own_dead.get();
  }
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.dead = dead;
    s.start_ns = NowNs();
    s.health.model = res_->model() != nullptr;
    if (res_->model()) {
      s.health.model_name = res_->model()->dir();
      s.health.backend = res_->model()->backend();
    }
    s.health.source = source->name();
  }
  const int workers = o_.threads <= 1 ? 0 : o_.threads;
  const int32_t shards = o_.detect_shards;

  auto posts_ch = MemoryChannel<std::shared_ptr<RecordBlock>>::Create(
      1, std::max<size_t>(2, o_.queue_blocks * std::max(1, workers)));
  auto terms_ch = MemoryChannel<TermBatch>::Create(shards, 16);
  auto cand_ch = MemoryChannel<CandidateBatch>::Create(1, 64);
  // Writers before readers (a channel with no writer has ended).
  auto posts_w = posts_ch->NewWriter();
  auto terms_w = terms_ch->NewWriter();
  std::vector<std::unique_ptr<ChannelWriter<CandidateBatch>>> cand_w;
  for (int32_t d = 0; d < shards; ++d) cand_w.push_back(cand_ch->NewWriter());

  std::vector<std::unique_ptr<DetectStage>> detectors;
  for (int32_t d = 0; d < shards; ++d) {
    SURGE_ASSIGN_OR_RETURN(auto det, DetectStage::Create(o_.detect, d, shards));
    detectors.push_back(std::move(det));
  }
  SURGE_ASSIGN_OR_RETURN(auto rank, RankStage::Create(o_.rank, shards));
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (const auto& d : detectors) s.health.detect_memory_bytes += d->stats().memory_bytes;
  }

  // In-order emission of annotated blocks.
  std::mutex seq_mu;
  std::map<uint64_t, std::shared_ptr<AnnotatedBlock>> ready;
  uint64_t next_seq = 0;
  bool emitting = false;
  SURGE_ASSIGN_OR_RETURN(auto router, AnnotateStage::Create(res_, shards));
  std::vector<TermBatch> routed;
  auto emit_one = [&](std::shared_ptr<AnnotatedBlock> b) {
    if (b->max_ts_ms != INT64_MIN && b->max_ts_ms > s.newest_ts_ms.load()) {
      s.newest_ts_ms = b->max_ts_ms;
    }
    routed.clear();
    router->Route(std::move(b), &routed);
    for (TermBatch& tb : routed) {
      Status st = terms_w->SendTo(tb.partition, static_cast<uint64_t>(tb.partition), std::move(tb));
      if (!st.ok()) s.Fail(st);
    }
  };
  auto deliver = [&](uint64_t seq, std::shared_ptr<AnnotatedBlock> b) {
    std::unique_lock<std::mutex> lock(seq_mu);
    ready.emplace(seq, std::move(b));
    if (emitting) return;
    emitting = true;
    while (!ready.empty() && ready.begin()->first == next_seq) {
      auto block = std::move(ready.begin()->second);
      ready.erase(ready.begin());
      lock.unlock();
      emit_one(std::move(block));
      lock.lock();
      ++next_seq;
    }
    emitting = false;
  };
  auto annotate = [&](Annotator& a, const RecordBlock& in) {
    auto out = std::make_shared<AnnotatedBlock>();
    Status st = a.Annotate(in, source->name(), dead, out.get());
    if (!st.ok()) {
      s.Fail(st.WithContext(fmt::format("annotating records from {}", source->name())));
      auto empty = std::make_shared<AnnotatedBlock>();
      empty->sequence = in.sequence;
      out = std::move(empty);
    }
    s.posts += static_cast<int64_t>(out->posts.size());
    deliver(in.sequence, std::move(out));
  };

  // Rank thread.
  std::thread rank_thread([&] {
    auto reader = cand_ch->NewReader();
    std::vector<Message<CandidateBatch>> msgs;
    std::vector<HotList> lists;
    bool sink_failed = false;
    auto publish = [&](std::vector<HotList>& ls) {
      int64_t now = NowNs();
      {
        std::lock_guard<std::mutex> lock(s.mu);
        for (const auto& [t, n] : rank->last_read_wall()) {
          s.latency.emplace_back(static_cast<double>(now - t) / 1e6, n);
        }
        s.health.buckets += static_cast<int64_t>(ls.size());
        if (!ls.empty()) s.health.last_bucket_end_ms = ls.back().bucket_end_ms;
        s.health.live_topics = rank->stats().live_topics;
      }
      for (const HotList& l : ls) {
        for (TrendSink* sink : sinks) {
          if (sink_failed) break;
          Status st = sink->OnHotList(l);
          if (!st.ok()) {
            sink_failed = true;
            s.Fail(st);
          }
        }
      }
      if (!ls.empty()) {
        PipelineHealth h = health();
        for (TrendSink* sink : sinks) sink->OnHealth(h);
      }
      ls.clear();
    };
    for (;;) {
      msgs.clear();
      auto more = reader->Receive(&msgs, 64, kPoll);
      if (!more.ok()) {
        s.Fail(more.status());
        break;
      }
      for (auto& m : msgs) {
        {
          std::lock_guard<std::mutex> lock(s.mu);
          s.health.replays_dropped += m.value.replays_dropped;
          s.health.late_posts += m.value.late_posts;
        }
        Status st = rank->Process(std::move(m.value), &lists);
        if (!st.ok()) s.Fail(st);
        rank->offsets().Advance(m.position);
        publish(lists);
      }
      if (!*more) break;
    }
    rank->Finish(&lists);
    publish(lists);
  });

  // Detect threads.
  std::vector<std::thread> detect_threads;
  for (int32_t d = 0; d < shards; ++d) {
    detect_threads.emplace_back([&, d] {
      auto reader = terms_ch->NewReader({d});
      DetectStage& det = *detectors[d];
      std::vector<Message<TermBatch>> msgs;
      std::vector<CandidateBatch> out;
      auto send = [&] {
        for (auto& cb : out) {
          Status st = cand_w[d]->Send(static_cast<uint64_t>(d), std::move(cb));
          if (!st.ok()) s.Fail(st);
        }
        out.clear();
      };
      for (;;) {
        msgs.clear();
        auto more = reader->Receive(&msgs, 16, kPoll);
        if (!more.ok()) {
          s.Fail(more.status());
          break;
        }
        for (auto& m : msgs) {
          Status st = det.Process(m.value, &out);
          if (!st.ok()) s.Fail(st);
          det.offsets().Advance(m.position);
          send();
        }
        if (!*more) break;
      }
      det.Finish(&out);
      send();
      {
        std::lock_guard<std::mutex> lock(s.mu);
        s.health.tracked_keys += det.stats().tracked;
      }
      cand_w[d]->Close();
    });
  }

  // Annotate workers.
  std::vector<std::thread> worker_threads;
  std::vector<std::unique_ptr<Annotator>> annotators;
  for (int w = 0; w < std::max(1, workers); ++w) {
    auto a = Annotator::Create(res_);
    if (!a.ok()) {
      s.Fail(a.status());
      break;
    }
    annotators.push_back(std::move(*a));
  }
  if (!annotators.empty() && workers > 0) {
    for (int w = 0; w < workers; ++w) {
      worker_threads.emplace_back([&, w] {
        auto reader = posts_ch->NewReader();
        std::vector<Message<std::shared_ptr<RecordBlock>>> msgs;
        for (;;) {
          msgs.clear();
          auto more = reader->Receive(&msgs, 1, kPoll);
          if (!more.ok()) break;
          for (auto& m : msgs) annotate(*annotators[w], *m.value);
          if (!*more) break;
        }
      });
    }
  }

  // The reader: this thread.
  uint64_t seq = 0;
  while (!s.failed && !annotators.empty()) {
    auto block = std::make_shared<RecordBlock>();
    auto more = source->Read(block.get(), o_.block_records);
    if (!more.ok()) {
      s.Fail(more.status());
      break;
    }
    if (block->size() > 0) {
      block->sequence = seq++;
      block->read_wall_ns = NowNs();
      s.records_read += static_cast<int64_t>(block->size());
      if (workers == 0) {
        annotate(*annotators[0], *block);
      } else {
        Status st = posts_w->Send(0, std::move(block));
        if (!st.ok()) s.Fail(st);
      }
    }
    if (!*more) break;
  }
  posts_w->Close();
  for (auto& t : worker_threads) t.join();
  terms_w->Close();
  for (auto& t : detect_threads) t.join();
  rank_thread.join();
  {
    Status st = dead->Flush();
    if (!st.ok()) s.Fail(st);
  }
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.health.dead_letters = dead->total();
    s.health.dead_letters_by_kind = dead->counts();
    s.dead = nullptr;
    s.health.finished = true;
  }
  PipelineHealth h = health();
  for (TrendSink* sink : sinks) {
    sink->OnHealth(h);
    Status st = sink->Close();
    if (!st.ok()) s.Fail(st);
  }
  std::lock_guard<std::mutex> lock(s.mu);
  return s.error;
}

}  // namespace surge::stream
