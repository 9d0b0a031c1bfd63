// The detect stage: one shard of the trend detector. It owns the terms t with
// PartitionOf(t, shards) == shard and the pairs {a, b} with PartitionOf(PairHash(a, b), shards)
// == shard, reads TermBatches of its partition in event-time order and emits one CandidateBatch
// per closed bucket (records.h).
//
// Per post (once per shard, whatever the number of its terms there):
//  1. replay check: a post id already in the dedup window (dedup_window.h) is dropped;
//  2. its weight w = author quality (annotate)
//       x near-duplicate factor 1/sqrt(n) for the n-th post within near_dup_bits (SimHash) of a
//         recent original (only originals with enough words are checked; reposts are not),
//       x repost factor repost_weight/sqrt(n) for the n-th recent repost of the same source,
//       x author-rate factor 1/sqrt(n) for the author's n-th post in the bucket;
//     so a repost storm or a bot posting again and again counts less than organic spread;
//  3. each of its terms here adds w to the term table; each pair of its top terms owned here
//     adds w to the pair table (signi_table.h: EWMA/EWMVar per hashed cell).
// A term or pair whose running count in the open bucket reaches track_count with a significance
// of at least track_threshold starts being tracked: from then on the shard keeps its exact
// per-bucket statistics (posts, reposts, near-duplicates, young accounts, author quality, reach,
// engagement, sentiment, category votes, embedding sum, unique authors in a HyperLogLog, and a
// bottom-k sample of its posts by post key).
//
// Keys of new words (TermOcc::kNewWord, published by annotate while the stream runs) and pairs with
// one are new to the tables but not to the stream: in the bucket a key is first seen and the next
// one (its first full bucket) it is not tracked, and at the close of that full bucket its cells
// start from mean = its count there, var = max(count, beta^2), so learning a phrase does not look
// like a burst of it.
//
// Bucket close (when a post or watermark of a later bucket arrives, or at Finish()):
// every tracked key's bucket count x is scored against the EWMA/EWMVar before the bucket;
// significant = score >= threshold, x >= min_count, x >= min_ratio * ewma (a common word that
// rises by a few percent is significant statistically but not news), posts >= min_posts and at
// least warmup_buckets closed before. The candidate batch holds every tracked key that is
// significant or was significant within the last follow_buckets buckets (so rank sees a topic's
// volume also after its burst). Keys never significant, or not significant for longer, stop being
// tracked. Then the tables fold the bucket into their averages.
//
// Memory is bounded by the options: tables (rows * 2^bits * 12 bytes each), at most
// max_tracked tracked keys, the dedup and near-duplicate windows and two small sketches.
//
// Thread safety: none; one thread per shard. Snapshot()/Restore() capture everything, including
// the input offsets (offsets()) the state reflects.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "stream/dedup_window.h"
#include "stream/records.h"
#include "stream/signi_table.h"
#include "stream/sketch.h"
#include "text/simhash.h"

namespace surge::stream {

struct DetectOptions {
  int64_t bucket_ms = 60000;
  double half_life_buckets = 8;  // of the EWMA/EWMVar
  double beta = 3;               // noise floor (weighted posts)
  double threshold = 4;          // significance to report
  double min_count = 6;          // weighted posts in the bucket to report
  double min_ratio = 1.5;        // ... and at least this many times the expectation (novelty)
  int64_t min_posts = 4;         // posts seen while tracked in the bucket
  double track_threshold = 2.5;  // running significance that starts tracking
  double track_count = 3;        // running weighted count that starts tracking
  int warmup_buckets = 2;        // closed buckets before anything is reported
  int follow_buckets = 6;        // buckets a key stays reported after its last significant one
  SigniTableOptions term_table{20, 2};
  SigniTableOptions pair_table{20, 1};
  bool pairs = true;
  size_t max_tracked = 16384;
  int samples = 32;  // bottom-k sample size per tracked key
  int hll_precision = 10;
  int64_t dedup_window_ms = 30 * 60000;
  size_t dedup_max = 4'000'000;
  int near_dup_bits = 3;  // 0..3; -1 disables near-duplicate detection
  int near_dup_min_features = 4;
  int64_t near_dup_window_ms = 10 * 60000;
  size_t near_dup_max = 200000;
  double repost_weight = 0.5;
  int author_sketch_bits = 18;
  int repost_sketch_bits = 18;

  // InvalidArgument naming the option when out of range.
  Status Validate() const;
};

struct DetectStats {
  int64_t posts = 0;            // posts with something for this shard
  int64_t replays_dropped = 0;  // post ids already seen
  int64_t late_posts = 0;       // older than the open bucket
  int64_t near_duplicates = 0;
  int64_t reposts = 0;
  int64_t buckets_closed = 0;
  int64_t tracked = 0;  // now
  int64_t tracked_evicted = 0;
  size_t memory_bytes = 0;  // tables, sketches, windows (approximate)
};

class DetectStage {
 public:
  // `options` must be valid (Validate()); shard in [0, shards).
  static Result<std::unique_ptr<DetectStage>> Create(const DetectOptions& options, int32_t shard,
                                                     int32_t shards);
  ~DetectStage();

  // Processes one batch of this shard's partition; CandidateBatches of buckets it closes are
  // appended to `out`. The batch's partition count must equal `shards` (FailedPrecondition).
  Status Process(const TermBatch& batch, std::vector<CandidateBatch>* out);
  // Closes the open bucket (end of input).
  void Finish(std::vector<CandidateBatch>* out);

  // Input offsets the state reflects: the caller advances them for every message it processed.
  Offsets& offsets() { return offsets_; }
  const Offsets& offsets() const { return offsets_; }

  // The whole state as one frame (bytes.h), offsets included.
  void Snapshot(std::string* out) const;
  // Restores a snapshot taken with the same options, shard and shard count (InvalidArgument
  // naming the difference otherwise; DataLoss when corrupt).
  Status Restore(std::string_view snapshot);

  DetectStats stats() const;
  const DetectOptions& options() const { return o_; }
  int32_t shard() const { return shard_; }
  int32_t shards() const { return shards_; }
  // The open bucket (INT64_MIN before the first post).
  int64_t open_bucket() const { return bucket_; }

 private:
  struct Tracked;
  struct NearDup {
    uint64_t id;
    uint64_t fp;
    int64_t ts_ms;
  };

  DetectStage(const DetectOptions& options, int32_t shard, int32_t shards);
  void ProcessPost(const AnnotatedBlock& b, size_t index);
  float PostWeight(const AnnotatedBlock& b, const AnnotatedPost& p, bool* near_dup);
  void Observe(uint64_t key, bool pair, const TermOcc& ta, const TermOcc* tb,
               const AnnotatedBlock& b, size_t index, float w, bool near_dup);
  Tracked* StartTracking(uint64_t key, bool pair, const TermOcc& ta, const TermOcc* tb,
                         const AnnotatedBlock& b);
  void CloseBucket(std::vector<CandidateBatch>* out);
  void AdvanceTo(int64_t bucket, std::vector<CandidateBatch>* out);
  void ExpireNearDups(int64_t now_ms);
  bool NewKeyBlocked(uint64_t key, bool pair);

  DetectOptions o_;
  int32_t shard_, shards_;
  double alpha_;
  SigniTable terms_;
  SigniTable pairs_;
  DedupWindow dedup_;
  text::SimHashIndex near_index_;
  std::deque<NearDup> near_fifo_;
  std::unordered_map<uint64_t, uint32_t> near_count_;  // original id -> copies seen
  uint64_t next_near_id_ = 1;
  CountSketch authors_;
  CountSketch repost_sources_;
  std::unordered_map<uint64_t, std::unique_ptr<Tracked>> tracked_;
  // New-word keys: key -> (bucket first seen, pair?), oldest first in new_order_.
  std::unordered_map<uint64_t, std::pair<int64_t, bool>> new_keys_;
  std::deque<uint64_t> new_order_;
  int64_t bucket_ = INT64_MIN;
  int64_t closed_ = 0;
  std::shared_ptr<const std::vector<std::string>> categories_;
  int32_t embedding_dim_ = 0;
  std::vector<std::pair<int64_t, int64_t>> read_wall_;  // of the open bucket
  DetectStats stats_;
  DetectStats bucket_stats_;  // counters of the open bucket
  Offsets offsets_;
};

}  // namespace surge::stream
