// Where the pipeline's results go: a TrendSink receives every bucket's hot list (the ranked
// TrendUpdates of trend.h) and the pipeline's health. The JSONL file sink lives here; the Kafka
// sink (surge.trends) and the web engineer's TrendStore (HTTP API, SSE, dashboard) implement the
// same interface.
//
// Call order: OnHotList() once per closed bucket, in bucket order (also for a bucket whose list is
// empty, so a reader sees time advance); OnHealth() after every hot list and once more at the end;
// Close() last. All calls come from one thread (the rank stage's).
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "stream/trend.h"

namespace surge::stream {

struct HotList {
  int64_t bucket = 0;  // bucket index (bucket_end_ms / bucket_ms - 1)
  int64_t bucket_start_ms = 0;
  int64_t bucket_end_ms = 0;           // = `updated` of every update
  std::vector<TrendUpdate> updates;    // ranks 1..n, best first
  std::vector<std::string> left_list;  // topic ids on the previous list but not on this one
};

// A snapshot of how the pipeline is doing (all counters since the start).
struct PipelineHealth {
  double wall_seconds = 0;   // since the pipeline started
  int64_t records_read = 0;  // records the source delivered (good and bad)
  int64_t posts = 0;         // posts annotated
  int64_t dead_letters = 0;
  std::map<std::string, int64_t> dead_letters_by_kind;
  int64_t replays_dropped = 0;  // duplicate post ids (dedup window)
  int64_t late_posts = 0;
  int64_t buckets = 0;  // hot lists emitted
  int64_t last_bucket_end_ms = 0;
  double posts_per_second = 0;  // posts / wall_seconds
  bool model = false;           // model path on
  std::string model_name;
  int64_t live_topics = 0;
  int64_t tracked_keys = 0;  // over all detect shards
  size_t detect_memory_bytes = 0;
  // Post-to-hot-list latency: from a post entering the pipeline to the hot list of its bucket.
  double latency_p50_ms = 0;
  double latency_p99_ms = 0;
  bool finished = false;  // the input has ended and everything is flushed
};

class TrendSink {
 public:
  virtual ~TrendSink() = default;
  virtual Status OnHotList(const HotList& list) = 0;
  virtual void OnHealth(const PipelineHealth& health) { (void)health; }
  virtual Status Close() { return Status::Ok(); }
};

// One TrendUpdate JSON object per line (trend.h), hot lists in bucket order; "-" = stdout.
class JsonlTrendSink final : public TrendSink {
 public:
  static Result<std::unique_ptr<JsonlTrendSink>> Open(const std::string& path);
  ~JsonlTrendSink() override;
  Status OnHotList(const HotList& list) override;
  Status Close() override;
  int64_t updates_written() const { return written_; }

 private:
  JsonlTrendSink() = default;
  std::string path_;
  FILE* file_ = nullptr;
  bool owns_ = false;
  std::string line_;
  int64_t written_ = 0;
};

// Keeps every hot list in memory (tests, embedding the pipeline in a program).
class MemoryTrendSink final : public TrendSink {
 public:
  Status OnHotList(const HotList& list) override {
    lists.push_back(list);
    return Status::Ok();
  }
  void OnHealth(const PipelineHealth& h) override { health = h; }
  std::vector<HotList> lists;
  PipelineHealth health;
};

}  // namespace surge::stream
