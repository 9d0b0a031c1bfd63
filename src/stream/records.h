// The records that flow between the pipeline's stages (DESIGN.md §1):
//
//   source ──RecordBlock──► annotate ──TermBatch──► detect (shard p) ──CandidateBatch──► rank
//                                     (surge.terms,                   (surge.candidates)   │
//                                      partition = term shard)                  HotList ◄──┘
//
// * RecordBlock: raw post records (JSON bytes with their input position) or posts already parsed
//   by an in-process source (the simulator).
// * AnnotatedBlock: what annotate made of a block of posts (columnar: posts, their terms, an arena
//   for strings, optional embeddings). Immutable once built and shared between partitions.
// * TermBatch: the part of an AnnotatedBlock that belongs to one detect partition — a term t
//   belongs to partition PartitionOf(t.hash, partitions), a pair {a, b} to
//   PartitionOf(PairHash(a, b), partitions). In process it is a view (block pointer + partition);
//   its codec (codec.h) writes only that partition's part.
// * CandidateBatch: one detect shard's tracked terms and pairs at the close of one bucket. Every
//   shard sends one per bucket, also when empty, so rank knows when a bucket is complete.
// * HotList (sink.h): one bucket's ranked TrendUpdates.
//
// Timestamps are event time in ms since the epoch; bucket b covers [b * bucket_ms,
// (b + 1) * bucket_ms).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stream/hll.h"
#include "stream/post.h"

namespace surge::stream {

// Where a record came from: a Kafka partition and offset, or for a file partition 0 and the
// record's byte offset (line numbers are kept separately for messages).
struct InputPosition {
  int32_t partition = 0;
  int64_t offset = 0;
};

// The input a stage's state reflects: for each partition, the offset of the next record to read.
// A checkpoint stores it with the state; a restarted stage seeks there.
struct Offsets {
  std::map<int32_t, int64_t> next;

  // Records that `position` has been consumed (keeps the maximum per partition).
  void Advance(const InputPosition& position, int64_t record_size = 1) {
    int64_t& n = next[position.partition];
    n = std::max(n, position.offset + record_size);
  }
  void Merge(const Offsets& other) {
    for (const auto& [p, o] : other.next) next[p] = std::max(next[p], o);
  }
  bool operator==(const Offsets& o) const { return next == o.next; }
};

// ---- source -> annotate ----

struct RawRecord {
  uint32_t offset = 0;  // into RecordBlock::data
  uint32_t size = 0;
  int64_t line = 0;  // 1-based line number for line-oriented inputs, else 0
  InputPosition position;
};

// A record the source itself could not deliver (e.g. a line longer than kMaxPostBytes, of which
// only a prefix is kept).
struct SourceError {
  std::string kind;  // PostErrorKind vocabulary ("too_large", ...)
  std::string message;
  int64_t line = 0;
  InputPosition position;
  std::string raw;  // the record, or its first bytes
};

struct RecordBlock {
  uint64_t sequence = 0;  // assigned by the pipeline, consecutive
  std::string data;       // raw records' bytes
  std::vector<RawRecord> raw;
  std::vector<Post> posts;                    // parsed posts (in-process sources)
  std::vector<InputPosition> post_positions;  // positions of `posts`, same length
  std::vector<SourceError> errors;
  int64_t read_wall_ns = 0;  // when the block entered the pipeline (latency)

  size_t size() const { return raw.size() + posts.size() + errors.size(); }
  std::string_view Bytes(const RawRecord& r) const { return {data.data() + r.offset, r.size}; }
};

// ---- annotate -> detect ----

struct TermOcc {
  static constexpr uint8_t kTop = 1;      // among the post's top terms: forms pairs
  static constexpr uint8_t kNewWord = 2;  // a discovered new word (may span several words)

  uint64_t hash = 0;      // HashBytes of the normalised term (ASCII lower-cased)
  float weight = 0;       // keyword weight of the term in this post (tf-idf, or the model's)
  uint32_t text_off = 0;  // surface text in AnnotatedBlock::arena
  uint16_t text_len = 0;
  uint16_t ordinal = 0;  // index of the term's first word among all words of the post
  uint8_t span = 1;      // words the term covers
  uint8_t flags = 0;
};

struct AnnotatedPost {
  static constexpr uint16_t kVerified = 1;
  static constexpr uint16_t kYoungAccount = 2;  // younger than AnnotateOptions::young_days
  static constexpr uint16_t kModel = 4;         // category/sentiment/embedding from the model

  uint64_t key = 0;        // HashBytes(post id)
  uint64_t author = 0;     // HashBytes(user id)
  uint64_t repost_of = 0;  // HashBytes(reposted id), 0 for an original
  uint64_t simhash = 0;    // near-duplicate fingerprint of the text
  int64_t ts_ms = 0;
  float quality = 1;  // author quality in (0, 1]: account age, followers, verified
  uint32_t followers = 0;
  uint32_t reposts = 0, comments = 0, likes = 0;
  uint32_t id_off = 0;  // post id in the arena
  uint16_t id_len = 0;
  uint32_t text_off = 0;  // post text in the arena (for samples and hashtag phrases)
  uint32_t text_len = 0;
  uint16_t flags = 0;
  uint32_t term_begin = 0;  // into AnnotatedBlock::terms
  uint16_t term_count = 0;
  int16_t category = -1;                       // index into AnnotatedBlock::categories, -1 unknown
  std::array<float, 3> sentiment = {0, 1, 0};  // pos, neu, neg
};

struct AnnotatedBlock {
  uint64_t sequence = 0;
  std::vector<AnnotatedPost> posts;
  std::vector<TermOcc> terms;
  std::string arena;
  int32_t embedding_dim = 0;      // 0: no embeddings
  std::vector<float> embeddings;  // posts.size() x embedding_dim, L2-normalised rows
  std::shared_ptr<const std::vector<std::string>> categories;  // labels for `category`
  int64_t max_ts_ms = INT64_MIN;
  int64_t read_wall_ns = 0;
  Offsets offsets;  // source positions this block covers

  std::string_view Text(const TermOcc& t) const { return {arena.data() + t.text_off, t.text_len}; }
  std::string_view Id(const AnnotatedPost& p) const { return {arena.data() + p.id_off, p.id_len}; }
  std::string_view PostText(const AnnotatedPost& p) const {
    return {arena.data() + p.text_off, p.text_len};
  }
  const float* Embedding(size_t post) const {
    return embedding_dim ? embeddings.data() + post * embedding_dim : nullptr;
  }
};

struct TermBatch {
  std::shared_ptr<const AnnotatedBlock> block;
  int32_t partition = 0;
  int32_t partitions = 1;
  // Watermark of the producer: no later batch from it holds a post older than this (ms).
  int64_t watermark_ms = INT64_MIN;
};

// ---- detect -> rank ----

// A post of a tracked term's bucket, chosen by bottom-k on the post key so that terms sharing
// posts share samples (which lets rank see co-occurrence and rebuild phrases).
struct Sample {
  uint64_t post_key = 0;
  std::string post_id;
  std::string text;
  uint16_t ordinal = 0;  // of the term in the post
  uint8_t span = 1;
};

struct Candidate {
  uint64_t key = 0;             // term hash, or PairHash(term_a, term_b)
  uint64_t term_a = 0;          // the term (or first term of the pair)
  uint64_t term_b = 0;          // second term of a pair, 0 for a term
  std::string text;             // surface text of term_a
  std::string text_b;           // of term_b (pairs)
  bool significant = false;     // score >= threshold this bucket (else followed after a burst)
  double score = 0;             // significance of this bucket's count
  double peak_score = 0;        // highest score since tracking began
  double count = 0;             // weighted count this bucket
  double prev_count = 0;        // weighted count the bucket before (0 when untracked then)
  double ewma = 0, ewmvar = 0;  // expectation before this bucket
  int64_t posts = 0;            // posts seen while tracked this bucket
  int64_t reposts = 0;          // of which reposts (repost_of set)
  int64_t duplicates = 0;       // of which near-duplicates of a recent post
  int64_t young = 0;            // of which from young accounts
  double quality_sum = 0;       // sum of author quality
  double reach = 0;             // sum of log1p(followers)
  double engagement = 0;        // sum of reposts + comments + likes
  std::array<double, 3> sentiment = {0, 0, 0};
  std::vector<float> category;   // per label, summed probabilities (or votes)
  std::vector<float> embedding;  // sum of post embeddings (empty without a model)
  HyperLogLog authors{10};       // this bucket
  std::vector<Sample> samples;   // bottom-k of this bucket, ascending post_key
  int64_t first_seen_ms = 0;     // event time tracking began
  bool is_pair() const { return term_b != 0; }
};

struct CandidateBatch {
  int32_t shard = 0;
  int32_t shards = 1;
  int64_t bucket = 0;
  int64_t bucket_ms = 0;
  std::vector<Candidate> candidates;
  std::shared_ptr<const std::vector<std::string>> categories;
  // Shard counters for this bucket (health).
  int64_t posts = 0;            // posts with at least one term of this shard
  int64_t replays_dropped = 0;  // post ids seen before (dedup window)
  int64_t late_posts = 0;       // older than the closed buckets, counted in the current one
  // (block read wall time ns, posts) of the blocks that fed this bucket, for latency.
  std::vector<std::pair<int64_t, int64_t>> read_wall;
};

}  // namespace surge::stream
