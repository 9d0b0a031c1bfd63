// TrendStore: what the dashboard and the HTTP API show. The pipeline pushes each bucket's hot list,
// sample posts and its health into it; the server reads snapshots and subscribes to changes.
//
// What it keeps (all bounded):
//   - the current hot list, as an immutable snapshot with its JSON rendered once per bucket;
//   - per topic: the latest update, the heat and rank of the last `history_buckets` buckets it
//     was listed in, and up to `max_samples` sample posts (newest first);
//   - a topic that left the list is kept for `keep_buckets` buckets, then dropped with its
//     history and samples; at most `max_topics` topics are kept (the longest unlisted go first);
//   - the latest PipelineHealth.
//
// Topic ids are 1..128 characters of [A-Za-z0-9_.:-] (they appear in URLs as /v1/topics/{id}).
//
// Thread safety: every method may be called from any thread. Publish calls are serialised (a
// second one waits for the first); subscribers are called on the publishing thread, in publish
// order, outside the store's lock, so a subscriber may read the store but must not block.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "stream/trend.h"

namespace surge::stream::web {

// A post shown as a sample of a topic.
struct SamplePost {
  std::string id;
  std::string text;
  std::string user;  // user id or screen name
  int64_t ts_ms = 0;
};

struct PipelineHealth {
  double posts_per_s = 0;       // posts accepted per second, recent rate
  double lag_ms = 0;            // how far the pipeline is behind its source (event time or offsets)
  double inference_p99_ms = 0;  // per-batch model latency, p99 over a recent window; 0 = no model
  int64_t dead_letters = 0;     // records rejected so far
  std::map<std::string, int64_t> dead_letter_kinds;  // by PostErrorKind
  int64_t buckets = 0;                               // buckets closed so far
  int64_t posts_total = 0;                           // posts accepted so far
  std::string model = "lexical only";                // model name, or "lexical only"
  std::string backend;                               // "cpu", "cuda", ... (empty: none)
  std::string source;  // "simulator", "kafka:topic", "jsonl:path", ...
  // False when no pipeline runs (a replayed file): posts_per_s, lag_ms, inference_p99_ms and
  // posts_total mean nothing then, and the dashboard shows them as absent instead of 0.
  bool live = true;
  int64_t updated_ms = 0;  // wall clock of the last UpdateHealth (set by the store)
};

struct TrendStoreOptions {
  size_t max_list = 200;           // longest hot list accepted
  size_t history_buckets = 120;    // heat/rank points kept per topic
  size_t spark_points = 30;        // buckets in each hot-list row's sparkline
  size_t keep_buckets = 60;        // buckets a topic is kept after it left the list
  size_t max_topics = 4096;        // topics kept at most (listed ones always are)
  size_t max_samples = 8;          // sample posts kept per topic
  size_t max_sample_bytes = 2048;  // longer sample texts are cut (at a UTF-8 boundary)
};

// One published bucket. Immutable once published; shared by readers.
struct HotList {
  int64_t bucket_ms = 0;            // end of the bucket; 0 before the first Publish
  int64_t published_ms = 0;         // wall clock when it was published
  uint64_t seq = 0;                 // 1 for the first published bucket
  std::vector<TrendUpdate> trends;  // by rank; prev_rank as the store saw it (see Publish)
  // Sparklines: the last spark_points bucket ends (oldest first) and, per trend, the heat in
  // each of them (nullopt where the topic was not listed).
  std::vector<int64_t> spark_buckets;
  std::vector<std::vector<std::optional<double>>> spark;
  // {"bucket":…,"updated":…,"seq":…,"trends":[TrendUpdate…],"spark_buckets":[…],
  //  "spark":{"<topic_id>":[heat|null,…]}}
  std::string json;
};

// Renders `list` with only its first `k` trends (all when k >= size).
std::string HotListJson(const HotList& list, size_t k);

struct TopicPoint {
  int64_t bucket_ms = 0;
  double heat = 0;
  int rank = 0;
};

struct TopicDetail {
  std::optional<TrendUpdate> latest;  // nullopt: samples arrived but the topic was never listed
  bool on_list = false;               // listed in the current bucket
  int64_t last_listed_ms = 0;         // bucket end when it was last listed
  std::vector<TopicPoint> history;    // oldest first, only buckets where it was listed
  std::vector<SamplePost> samples;    // newest first
};

// {"topic_id":…,"on_list":…,"last_listed":…,"latest":TrendUpdate|null,
//  "history":[{"bucket":…,"heat":…,"rank":…}],"samples":[{"id","text","user","ts"}]}
std::string TopicDetailJson(std::string_view topic_id, const TopicDetail& detail);
// {"posts_per_s":…,"lag_ms":…,"inference_p99_ms":…,"dead_letters":…,"dead_letter_kinds":{…},
//  "buckets":…,"posts_total":…,"model":…,"backend":…,"source":…,"live":…,"updated":…}
std::string HealthJson(const PipelineHealth& health);

// True for ids of 1..128 characters of [A-Za-z0-9_.:-].
bool ValidTopicId(std::string_view id);

struct TrendStoreListener {
  std::function<void(const std::shared_ptr<const HotList>&)> on_trends;  // once per bucket
  // On every UpdateHealth, with HealthJson of it.
  std::function<void(const PipelineHealth&, const std::string& json)> on_health;
};

class TrendStore {
 public:
  explicit TrendStore(TrendStoreOptions options = {});
  ~TrendStore();
  TrendStore(const TrendStore&) = delete;
  TrendStore& operator=(const TrendStore&) = delete;

  // Replaces the hot list with the one of the bucket that ended at `bucket_end_ms`. The list is
  // checked whole and refused whole (InvalidArgument naming the entry and the rule; the current
  // list stays) when: bucket_end_ms is not after the last published one; it is longer than
  // max_list; a topic id is invalid or repeated; a rank is < 1 or repeated; heat or sentiment is
  // not finite; an update's `updated` is neither 0 nor bucket_end_ms. Accepted updates are
  // sorted by rank, get updated = bucket_end_ms, and get prev_rank = their rank in the
  // previously published list (nullopt if they were not on it), whatever they carried, so rank
  // moves are always relative to the list readers saw before. An empty list is allowed.
  Status Publish(int64_t bucket_end_ms, std::vector<TrendUpdate> hot_list);

  // Adds sample posts to a topic (listed or not yet listed); the newest `max_samples` are kept,
  // a post id already kept is not added twice, and texts are cut to max_sample_bytes.
  // InvalidArgument for an invalid topic id or a post without an id.
  Status AddSamplePosts(std::string_view topic_id, std::vector<SamplePost> posts);

  // Replaces the pipeline health (updated_ms is set here). InvalidArgument for negative or
  // non-finite figures; the previous health stays.
  Status UpdateHealth(PipelineHealth health);

  // The current list (an empty one with bucket_ms 0 before the first Publish). Never null.
  std::shared_ptr<const HotList> Current() const;
  std::optional<TopicDetail> Topic(std::string_view topic_id) const;
  PipelineHealth Health() const;
  std::string HealthJsonNow() const;
  size_t topic_count() const;

  // Listeners are called after each Publish / UpdateHealth. Returns a token for Unsubscribe.
  // After Unsubscribe returns, the listener is not called any more (so it waits for a call in
  // progress: never call it from inside a listener).
  uint64_t Subscribe(TrendStoreListener listener);
  void Unsubscribe(uint64_t token);

 private:
  struct TopicState;
  void EvictLocked();

  const TrendStoreOptions options_;
  std::mutex publish_mu_;  // serialises Publish/UpdateHealth and listener calls
  mutable std::shared_mutex mu_;
  std::shared_ptr<const HotList> current_;
  std::vector<int64_t> buckets_;  // last history_buckets bucket ends, oldest first
  uint64_t seq_ = 0;
  std::unordered_map<std::string, std::unique_ptr<TopicState>> topics_;
  PipelineHealth health_;
  std::string health_json_;

  std::mutex listeners_mu_;
  std::map<uint64_t, std::shared_ptr<TrendStoreListener>> listeners_;
  uint64_t next_token_ = 1;
};

}  // namespace surge::stream::web
