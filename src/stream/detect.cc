#include "stream/detect.h"

#include <algorithm>
#include <cmath>

#include "core/logging.h"
#include "stream/codec.h"
#include "stream/hash.h"

namespace surge::stream {
namespace {

constexpr uint8_t kDetectSnapshotVersion = 2;  // 2: samples with user and time
constexpr std::string_view kDetectTag = "detect";

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Buckets of silence folded in one by one at most; a longer gap resets the averages' memory
// beyond this (after so many half-lives nothing of them is left anyway).
constexpr int64_t kMaxGapBuckets = 256;

}  // namespace

Status DetectOptions::Validate() const {
  if (bucket_ms <= 0) return InvalidArgumentError("bucket width must be > 0 ms, got {}", bucket_ms);
  if (!(half_life_buckets > 0)) {
    return InvalidArgumentError("half-life must be > 0 buckets, got {}", half_life_buckets);
  }
  if (!(beta > 0)) return InvalidArgumentError("beta (noise floor) must be > 0, got {}", beta);
  if (term_table.bits < 4 || term_table.bits > 30 || pair_table.bits < 4 || pair_table.bits > 30) {
    return InvalidArgumentError("table bits must be 4..30, got {} and {}", term_table.bits,
                                pair_table.bits);
  }
  if (term_table.rows < 1 || term_table.rows > 4 || pair_table.rows < 1 || pair_table.rows > 4) {
    return InvalidArgumentError("table rows must be 1..4, got {} and {}", term_table.rows,
                                pair_table.rows);
  }
  if (max_tracked < 1) return InvalidArgumentError("max_tracked must be >= 1");
  if (samples < 1 || samples > 256) {
    return InvalidArgumentError("samples per key must be 1..256, got {}", samples);
  }
  if (hll_precision < HyperLogLog::kMinPrecision || hll_precision > HyperLogLog::kMaxPrecision) {
    return InvalidArgumentError("HyperLogLog precision must be {}..{}, got {}",
                                HyperLogLog::kMinPrecision, HyperLogLog::kMaxPrecision,
                                hll_precision);
  }
  if (near_dup_bits < -1 || near_dup_bits > 3) {
    return InvalidArgumentError("near-duplicate distance must be 0..3 bits (-1: off), got {}",
                                near_dup_bits);
  }
  if (dedup_window_ms <= 0 || dedup_max < 1 || near_dup_window_ms <= 0 || near_dup_max < 1) {
    return InvalidArgumentError("dedup and near-duplicate windows must be positive");
  }
  if (warmup_buckets < 0 || follow_buckets < 0) {
    return InvalidArgumentError("warm-up and follow buckets must be >= 0");
  }
  if (author_sketch_bits < 4 || author_sketch_bits > 28 || repost_sketch_bits < 4 ||
      repost_sketch_bits > 28) {
    return InvalidArgumentError("sketch bits must be 4..28");
  }
  return Status::Ok();
}

struct DetectStage::Tracked {
  uint64_t key = 0, a = 0, b = 0;
  bool pair = false;
  std::string text, text_b;
  int64_t first_seen_ms = 0;
  int64_t last_significant = INT64_MIN;  // bucket
  double peak_score = 0;
  double prev_count = -1;  // < 0: not tracked in the previous bucket
  // The open bucket.
  int64_t posts = 0, reposts = 0, duplicates = 0, young = 0;
  double quality_sum = 0, reach = 0, engagement = 0;
  std::array<double, 3> sentiment = {0, 0, 0};
  std::vector<float> category;
  std::vector<float> embedding;
  HyperLogLog authors;
  std::vector<Sample> samples;

  explicit Tracked(int precision) : authors(precision) {}
  void ResetBucket() {
    posts = reposts = duplicates = young = 0;
    quality_sum = reach = engagement = 0;
    sentiment = {0, 0, 0};
    std::fill(category.begin(), category.end(), 0.f);
    std::fill(embedding.begin(), embedding.end(), 0.f);
    authors.Clear();
    samples.clear();
  }
};

Result<std::unique_ptr<DetectStage>> DetectStage::Create(const DetectOptions& options,
                                                         int32_t shard, int32_t shards) {
  SURGE_RETURN_IF_ERROR(options.Validate());
  if (shards < 1 || shard < 0 || shard >= shards) {
    return InvalidArgumentError("detect shard {} of {}: need 0 <= shard < shards", shard, shards);
  }
  return std::unique_ptr<DetectStage>(new DetectStage(options, shard, shards));
}

DetectStage::DetectStage(const DetectOptions& o, int32_t shard, int32_t shards)
    : o_(o),
      shard_(shard),
      shards_(shards),
      alpha_(AlphaForHalfLife(o.half_life_buckets)),
      terms_(o.term_table),
      pairs_(o.pairs ? o.pair_table : SigniTableOptions{4, 1}),
      dedup_(o.dedup_window_ms, o.dedup_max),
      near_(std::max(0, o.near_dup_bits), o.near_dup_max, o.near_dup_window_ms),
      authors_(o.author_sketch_bits, 2),
      repost_sources_(o.repost_sketch_bits, 2) {}

DetectStage::~DetectStage() = default;

Status DetectStage::Process(const TermBatch& batch, std::vector<CandidateBatch>* out) {
  if (batch.partitions != shards_ || batch.partition != shard_) {
    return FailedPreconditionError(
        "detect shard {} of {} got a batch of partition {} of {}; the terms channel must have "
        "one partition per detect shard",
        shard_, shards_, batch.partition, batch.partitions);
  }
  const AnnotatedBlock& b = *batch.block;
  if (b.categories) categories_ = b.categories;
  if (b.embedding_dim) embedding_dim_ = b.embedding_dim;
  int64_t before = bucket_stats_.posts;
  for (size_t i = 0; i < b.posts.size(); ++i) {
    int64_t bucket = FloorDiv(b.posts[i].ts_ms, o_.bucket_ms);
    if (bucket_ == INT64_MIN) bucket_ = bucket;
    if (bucket > bucket_) AdvanceTo(bucket, out);
    ProcessPost(b, i);
  }
  if (bucket_stats_.posts > before)
    read_wall_.emplace_back(b.read_wall_ns, bucket_stats_.posts - before);
  if (batch.watermark_ms != INT64_MIN && bucket_ != INT64_MIN) {
    int64_t complete = FloorDiv(batch.watermark_ms, o_.bucket_ms);
    if (complete > bucket_) AdvanceTo(complete, out);
  }
  return Status::Ok();
}

void DetectStage::Finish(std::vector<CandidateBatch>* out) {
  if (bucket_ == INT64_MIN) return;
  CloseBucket(out);
  ++bucket_;
}

void DetectStage::AdvanceTo(int64_t bucket, std::vector<CandidateBatch>* out) {
  if (bucket - bucket_ > kMaxGapBuckets) {
    CloseBucket(out);
    SURGE_LOG_WARN("detect shard {}: {} buckets without posts; averages restart", shard_,
                   bucket - bucket_ - 1);
    terms_ = SigniTable(terms_.options());
    pairs_ = SigniTable(pairs_.options());
    tracked_.clear();
    bucket_ = bucket;
    return;
  }
  while (bucket_ < bucket) {
    CloseBucket(out);
    ++bucket_;
  }
}

float DetectStage::PostWeight(const AnnotatedBlock& b, const AnnotatedPost& p, bool* near_dup) {
  (void)b;
  *near_dup = false;
  double w = p.quality;
  if (p.repost_of) {
    ++stats_.reposts;
    uint32_t n = repost_sources_.Increment(p.repost_of);
    w *= o_.repost_weight / std::sqrt(static_cast<double>(std::max<uint32_t>(n, 1)));
  } else if (o_.near_dup_bits >= 0 && p.term_count >= o_.near_dup_min_features) {
    uint32_t copies = near_.Observe(p.simhash, p.ts_ms);
    if (copies > 0) {
      *near_dup = true;
      ++stats_.near_duplicates;
      w /= std::sqrt(1.0 + copies);
    }
  }
  uint32_t n = authors_.Increment(p.author);
  w /= std::sqrt(static_cast<double>(std::max<uint32_t>(n, 1)));
  return static_cast<float>(w);
}

void DetectStage::ProcessPost(const AnnotatedBlock& b, size_t index) {
  const AnnotatedPost& p = b.posts[index];
  const TermOcc* t = b.terms.data() + p.term_begin;
  // Which of its terms and pairs live here.
  uint64_t own_mask = 0;  // bit k: term k is owned (first 64 terms)
  bool any = false;
  const size_t n = std::min<size_t>(p.term_count, 64);
  for (size_t k = 0; k < n; ++k) {
    if (PartitionOf(t[k].hash, shards_) == shard_) {
      own_mask |= uint64_t{1} << k;
      any = true;
    }
  }
  size_t top[16];
  size_t ntop = 0;
  if (o_.pairs) {
    for (size_t k = 0; k < n && ntop < 16; ++k) {
      if (t[k].flags & TermOcc::kTop) top[ntop++] = k;
    }
    if (!any && shards_ > 1) {
      for (size_t i = 0; i < ntop && !any; ++i) {
        for (size_t j = i + 1; j < ntop && !any; ++j) {
          any = PartitionOf(PairHash(t[top[i]].hash, t[top[j]].hash), shards_) == shard_;
        }
      }
    } else if (shards_ == 1 && ntop >= 2) {
      any = true;
    }
  }
  if (!any) return;
  if (!dedup_.Insert(p.key, p.ts_ms)) {
    ++stats_.replays_dropped;
    ++bucket_stats_.replays_dropped;
    return;
  }
  ++stats_.posts;
  ++bucket_stats_.posts;
  if (FloorDiv(p.ts_ms, o_.bucket_ms) < bucket_) {
    ++stats_.late_posts;
    ++bucket_stats_.late_posts;
  }
  bool near_dup = false;
  float w = PostWeight(b, p, &near_dup);
  for (size_t k = 0; k < n; ++k) {
    if (own_mask & (uint64_t{1} << k))
      Observe(t[k].hash, false, t[k], nullptr, b, index, w, near_dup);
  }
  for (size_t i = 0; i < ntop; ++i) {
    for (size_t j = i + 1; j < ntop; ++j) {
      const TermOcc& x = t[top[i]];
      const TermOcc& y = t[top[j]];
      if (x.hash == y.hash) continue;
      uint64_t ph = PairHash(x.hash, y.hash);
      if (PartitionOf(ph, shards_) != shard_) continue;
      // Keep the pair's members in a canonical order (smaller hash first).
      if (x.hash < y.hash) {
        Observe(ph, true, x, &y, b, index, w, near_dup);
      } else {
        Observe(ph, true, y, &x, b, index, w, near_dup);
      }
    }
  }
}

DetectStage::Tracked* DetectStage::StartTracking(uint64_t key, bool pair, const TermOcc& ta,
                                                 const TermOcc* tb, const AnnotatedBlock& b) {
  if (tracked_.size() >= o_.max_tracked) {
    // Full: drop the weakest key that is not significant in the open bucket's run so far.
    auto victim = tracked_.end();
    double weakest = 1e300;
    for (auto it = tracked_.begin(); it != tracked_.end(); ++it) {
      double s = it->second->last_significant == INT64_MIN ? -1 : it->second->peak_score;
      if (s < weakest) {
        weakest = s;
        victim = it;
      }
    }
    if (victim == tracked_.end()) return nullptr;
    tracked_.erase(victim);
    ++stats_.tracked_evicted;
  }
  auto t = std::make_unique<Tracked>(o_.hll_precision);
  t->key = key;
  t->pair = pair;
  t->a = ta.hash;
  t->text.assign(b.Text(ta));
  if (tb) {
    t->b = tb->hash;
    t->text_b.assign(b.Text(*tb));
  }
  t->category.assign(categories_ ? categories_->size() : 0, 0.f);
  t->embedding.assign(embedding_dim_, 0.f);
  Tracked* raw = t.get();
  tracked_.emplace(key, std::move(t));
  return raw;
}

void DetectStage::Observe(uint64_t key, bool pair, const TermOcc& ta, const TermOcc* tb,
                          const AnnotatedBlock& b, size_t index, float w, bool near_dup) {
  SigniTable& table = pair ? pairs_ : terms_;
  table.Add(key, w);
  auto it = tracked_.find(key);
  Tracked* t;
  if (it != tracked_.end()) {
    t = it->second.get();
  } else {
    if (((ta.flags | (tb ? tb->flags : 0)) & TermOcc::kNewWord) && NewKeyBlocked(key, pair)) {
      return;
    }
    if (closed_ < o_.warmup_buckets) return;
    SigniTable::Estimate e = table.Get(key, o_.beta);
    if (e.count < o_.track_count || e.score < o_.track_threshold) return;
    t = StartTracking(key, pair, ta, tb, b);
    if (t == nullptr) return;
    t->first_seen_ms = b.posts[index].ts_ms;
    SURGE_LOG_TRACE(
        "detect shard {}: tracking {}{}{} from count {:.1f} (ewma {:.1f}, score {:.1f})", shard_,
        t->text, pair ? "+" : "", t->text_b, e.count, e.mean, e.score);
  }
  const AnnotatedPost& p = b.posts[index];
  ++t->posts;
  if (p.repost_of) ++t->reposts;
  if (near_dup) ++t->duplicates;
  if (p.flags & AnnotatedPost::kYoungAccount) ++t->young;
  t->quality_sum += p.quality;
  t->reach += std::log1p(static_cast<double>(p.followers));
  t->engagement += static_cast<double>(p.reposts) + p.comments + p.likes;
  // With a model in the block, only the posts it ran on carry sentiment (see model_every).
  if (b.embedding_dim == 0 || (p.flags & AnnotatedPost::kModel)) {
    for (int k = 0; k < 3; ++k) t->sentiment[k] += p.sentiment[k];
  }
  if (p.category >= 0 && static_cast<size_t>(p.category) < t->category.size()) {
    t->category[p.category] += 1.f;
  }
  if (const float* e = b.Embedding(index);
      e && t->embedding.size() == static_cast<size_t>(b.embedding_dim)) {
    for (int32_t h = 0; h < b.embedding_dim; ++h) t->embedding[h] += e[h];
  }
  t->authors.Add(p.author);
  // Bottom-k by post key.
  auto& s = t->samples;
  if (s.size() < static_cast<size_t>(o_.samples) || p.key < s.back().post_key) {
    auto pos = std::lower_bound(s.begin(), s.end(), p.key,
                                [](const Sample& x, uint64_t k) { return x.post_key < k; });
    if (pos == s.end() || pos->post_key != p.key) {
      Sample smp;
      smp.post_key = p.key;
      smp.post_id.assign(b.Id(p));
      smp.text.assign(b.PostText(p));
      smp.user.assign(b.User(p));
      smp.ts_ms = p.ts_ms;
      smp.ordinal = ta.ordinal;
      smp.span = ta.span;
      s.insert(pos, std::move(smp));
      if (s.size() > static_cast<size_t>(o_.samples)) s.pop_back();
    }
  }
}

bool DetectStage::NewKeyBlocked(uint64_t key, bool pair) {
  auto [k, inserted] = new_keys_.Insert(key, NewKey{bucket_, pair});
  if (inserted) {
    born_open_.push_back(key);
    return true;
  }
  return bucket_ - k->born <= 1;
}

void DetectStage::CloseBucket(std::vector<CandidateBatch>* out) {
  CandidateBatch cb;
  cb.shard = shard_;
  cb.shards = shards_;
  cb.bucket = bucket_;
  cb.bucket_ms = o_.bucket_ms;
  cb.categories = categories_;
  cb.posts = bucket_stats_.posts;
  cb.replays_dropped = bucket_stats_.replays_dropped;
  cb.late_posts = bucket_stats_.late_posts;
  cb.read_wall = std::move(read_wall_);
  read_wall_.clear();
  const bool warm = closed_ >= o_.warmup_buckets;
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    Tracked& t = *it->second;
    SigniTable& table = t.pair ? pairs_ : terms_;
    SigniTable::Estimate e = table.Get(t.key, o_.beta);
    bool significant = warm && e.score >= o_.threshold && e.count >= o_.min_count &&
                       e.count >= o_.min_ratio * e.mean && t.posts >= o_.min_posts;
    if (significant) {
      t.last_significant = bucket_;
      t.peak_score = std::max(t.peak_score, e.score);
    }
    bool followed =
        t.last_significant != INT64_MIN && bucket_ - t.last_significant <= o_.follow_buckets;
    if (significant || (followed && t.posts > 0)) {
      Candidate c;
      c.key = t.key;
      c.term_a = t.a;
      c.term_b = t.b;
      c.text = t.text;
      c.text_b = t.text_b;
      c.significant = significant;
      c.score = e.score;
      c.peak_score = t.peak_score;
      c.count = e.count;
      c.prev_count = t.prev_count >= 0 ? t.prev_count : e.mean;
      c.ewma = e.mean;
      c.ewmvar = e.var;
      c.posts = t.posts;
      c.reposts = t.reposts;
      c.duplicates = t.duplicates;
      c.young = t.young;
      c.quality_sum = t.quality_sum;
      c.reach = t.reach;
      c.engagement = t.engagement;
      c.sentiment = t.sentiment;
      c.category = t.category;
      c.embedding = t.embedding;
      c.authors = t.authors;
      c.samples = std::move(t.samples);
      c.first_seen_ms = t.first_seen_ms;
      cb.candidates.push_back(std::move(c));
    }
    if (!followed) {
      it = tracked_.erase(it);
      continue;
    }
    t.prev_count = e.count;
    t.ResetBucket();
    ++it;
  }
  std::sort(cb.candidates.begin(), cb.candidates.end(), [](const Candidate& x, const Candidate& y) {
    if (x.significant != y.significant) return x.significant;
    if (x.score != y.score) return x.score > y.score;
    return x.key < y.key;
  });
  // New-word keys start their history with their first full bucket (the one after the bucket in
  // which the phrase was published, which saw it only from then on).
  for (uint64_t key : born_prev_) {
    SigniTable& table = new_keys_.Find(key)->pair ? pairs_ : terms_;
    SigniTable::Estimate e = table.Get(key, o_.beta);
    table.Seed(key, e.count, std::max(e.count, o_.beta * o_.beta));
  }
  born_prev_ = std::move(born_open_);
  born_open_.clear();
  // Bounded: past kMaxNewKeys remembered keys start over (a forgotten key is new once more).
  constexpr size_t kMaxNewKeys = 1 << 20;
  if (new_keys_.size() > kMaxNewKeys) {
    FlatMap64<NewKey> keep;
    for (uint64_t k : born_prev_) keep.Insert(k, *new_keys_.Find(k));
    new_keys_ = std::move(keep);
  }
  SURGE_LOG_DEBUG(
      "detect shard {}: bucket {} closed, {} posts, {} tracked, {} candidates, {} "
      "evicted so far",
      shard_, bucket_, bucket_stats_.posts, tracked_.size(), cb.candidates.size(),
      stats_.tracked_evicted);
  terms_.EndBucket(alpha_);
  if (o_.pairs) pairs_.EndBucket(alpha_);
  authors_.Clear();
  repost_sources_.Halve();
  ++closed_;
  ++stats_.buckets_closed;
  bucket_stats_ = DetectStats{};
  out->push_back(std::move(cb));
}

DetectStats DetectStage::stats() const {
  DetectStats s = stats_;
  s.tracked = static_cast<int64_t>(tracked_.size());
  s.memory_bytes = terms_.memory_bytes() + pairs_.memory_bytes() + authors_.memory_bytes() +
                   repost_sources_.memory_bytes() + dedup_.size() * 40 + near_.memory_bytes();
  return s;
}

// ---- snapshot ----

namespace {

void WriteStats(const DetectStats& s, ByteWriter* w) {
  for (int64_t v : {s.posts, s.replays_dropped, s.late_posts, s.near_duplicates, s.reposts,
                    s.buckets_closed, s.tracked_evicted}) {
    w->Svarint(v);
  }
}

void ReadStats(ByteReader* r, DetectStats* s) {
  for (int64_t* v : {&s->posts, &s->replays_dropped, &s->late_posts, &s->near_duplicates,
                     &s->reposts, &s->buckets_closed, &s->tracked_evicted}) {
    *v = r->Svarint();
  }
}

}  // namespace

void DetectStage::Snapshot(std::string* out) const {
  std::string payload;
  ByteWriter w(&payload);
  w.Svarint(shard_);
  w.Svarint(shards_);
  w.Svarint(o_.bucket_ms);
  w.F64(o_.half_life_buckets);
  w.U8(o_.pairs ? 1 : 0);
  w.Svarint(o_.hll_precision);
  w.Svarint(bucket_);
  w.Svarint(closed_);
  w.Svarint(embedding_dim_);
  WriteLabels(categories_.get(), &w);
  terms_.Serialize(&w);
  pairs_.Serialize(&w);
  dedup_.Serialize(&w);
  near_.Serialize(&w);
  authors_.Serialize(&w);
  repost_sources_.Serialize(&w);
  // Tracked keys in key order, so equal states give equal bytes.
  std::vector<const Tracked*> keys;
  for (const auto& [k, t] : tracked_) keys.push_back(t.get());
  std::sort(keys.begin(), keys.end(),
            [](const Tracked* a, const Tracked* b) { return a->key < b->key; });
  w.Varint(keys.size());
  for (const Tracked* t : keys) {
    w.U64(t->key);
    w.U64(t->a);
    w.U64(t->b);
    w.U8(t->pair ? 1 : 0);
    w.Str(t->text);
    w.Str(t->text_b);
    w.Svarint(t->first_seen_ms);
    w.Svarint(t->last_significant);
    w.F64(t->peak_score);
    w.F64(t->prev_count);
    for (int64_t v : {t->posts, t->reposts, t->duplicates, t->young}) w.Svarint(v);
    for (double v : {t->quality_sum, t->reach, t->engagement}) w.F64(v);
    for (double v : t->sentiment) w.F64(v);
    w.PodVector(t->category);
    w.PodVector(t->embedding);
    t->authors.Serialize(&w);
    WriteSamples(t->samples, &w);
  }
  w.Varint(read_wall_.size());
  for (const auto& [t, n] : read_wall_) {
    w.Svarint(t);
    w.Svarint(n);
  }
  {
    std::vector<std::pair<uint64_t, NewKey>> keys;
    new_keys_.ForEach([&](uint64_t k, const NewKey& v) { keys.emplace_back(k, v); });
    std::sort(keys.begin(), keys.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    w.Varint(keys.size());
    for (const auto& [k, v] : keys) {
      w.U64(k);
      w.Svarint(v.born);
      w.U8(v.pair ? 1 : 0);
    }
  }
  WriteStats(stats_, &w);
  WriteStats(bucket_stats_, &w);
  WriteOffsets(offsets_, &w);
  SealSnapshot(kDetectTag, kDetectSnapshotVersion, payload, out);
}

Status DetectStage::Restore(std::string_view snapshot) {
  SURGE_ASSIGN_OR_RETURN(Frame frame, OpenSnapshot(snapshot, kDetectTag, kDetectSnapshotVersion));
  ByteReader r(frame.payload, "detect snapshot");
  int32_t shard = static_cast<int32_t>(r.Svarint());
  int32_t shards = static_cast<int32_t>(r.Svarint());
  int64_t bucket_ms = r.Svarint();
  double half_life = r.F64();
  bool pairs = r.U8() != 0;
  int precision = static_cast<int>(r.Svarint());
  SURGE_RETURN_IF_ERROR(r.status());
  if (shard != shard_ || shards != shards_) {
    return InvalidArgumentError("snapshot of detect shard {} of {} restored into shard {} of {}",
                                shard, shards, shard_, shards_);
  }
  if (bucket_ms != o_.bucket_ms || half_life != o_.half_life_buckets || pairs != o_.pairs ||
      precision != o_.hll_precision) {
    return InvalidArgumentError(
        "snapshot taken with bucket {} ms, half-life {} buckets, pairs {}, HLL precision {}; this "
        "detector has {} ms, {}, {}, {}",
        bucket_ms, half_life, pairs, precision, o_.bucket_ms, o_.half_life_buckets, o_.pairs,
        o_.hll_precision);
  }
  // Build into a fresh stage so that a failure leaves this one untouched.
  std::unique_ptr<DetectStage> s(new DetectStage(o_, shard_, shards_));
  s->bucket_ = r.Svarint();
  s->closed_ = r.Svarint();
  s->embedding_dim_ = static_cast<int32_t>(r.Svarint());
  s->categories_ = ReadLabels(&r);
  SURGE_RETURN_IF_ERROR(s->terms_.Deserialize(&r));
  SURGE_RETURN_IF_ERROR(s->pairs_.Deserialize(&r));
  SURGE_RETURN_IF_ERROR(s->dedup_.Deserialize(&r));
  SURGE_RETURN_IF_ERROR(s->near_.Deserialize(&r));
  SURGE_RETURN_IF_ERROR(r.status());
  SURGE_RETURN_IF_ERROR(s->authors_.Deserialize(&r));
  SURGE_RETURN_IF_ERROR(s->repost_sources_.Deserialize(&r));
  size_t nt = r.Count(60, "tracked keys");
  for (size_t i = 0; i < nt && r.ok(); ++i) {
    auto t = std::make_unique<Tracked>(o_.hll_precision);
    t->key = r.U64();
    t->a = r.U64();
    t->b = r.U64();
    t->pair = r.U8() != 0;
    t->text = r.Str();
    t->text_b = r.Str();
    t->first_seen_ms = r.Svarint();
    t->last_significant = r.Svarint();
    t->peak_score = r.F64();
    t->prev_count = r.F64();
    for (int64_t* v : {&t->posts, &t->reposts, &t->duplicates, &t->young}) *v = r.Svarint();
    for (double* v : {&t->quality_sum, &t->reach, &t->engagement}) *v = r.F64();
    for (double& v : t->sentiment) v = r.F64();
    r.PodVector(&t->category, "category");
    r.PodVector(&t->embedding, "embedding");
    SURGE_RETURN_IF_ERROR(r.status());
    SURGE_ASSIGN_OR_RETURN(t->authors, HyperLogLog::Deserialize(&r));
    ReadSamples(&r, &t->samples, frame.version);
    uint64_t key = t->key;
    if (!s->tracked_.emplace(key, std::move(t)).second) r.Fail("a tracked key appears twice");
  }
  size_t nw = r.Count(2, "read times");
  for (size_t i = 0; i < nw && r.ok(); ++i) {
    int64_t t = r.Svarint();
    s->read_wall_.emplace_back(t, r.Svarint());
  }
  size_t nk = r.Count(10, "new-word keys");
  for (size_t i = 0; i < nk && r.ok(); ++i) {
    uint64_t k = r.U64();
    NewKey v;
    v.born = r.Svarint();
    v.pair = r.U8() != 0;
    if (!s->new_keys_.Insert(k, v).second) r.Fail("a new-word key appears twice");
    if (v.born == s->bucket_) s->born_open_.push_back(k);
    if (v.born == s->bucket_ - 1) s->born_prev_.push_back(k);
  }
  std::sort(s->born_open_.begin(), s->born_open_.end());
  std::sort(s->born_prev_.begin(), s->born_prev_.end());
  ReadStats(&r, &s->stats_);
  ReadStats(&r, &s->bucket_stats_);
  s->offsets_ = ReadOffsets(&r);
  SURGE_RETURN_IF_ERROR(r.Finish());
  // Everything parsed: take it over.
  terms_ = std::move(s->terms_);
  pairs_ = std::move(s->pairs_);
  dedup_ = std::move(s->dedup_);
  near_ = std::move(s->near_);
  authors_ = std::move(s->authors_);
  repost_sources_ = std::move(s->repost_sources_);
  tracked_ = std::move(s->tracked_);
  new_keys_ = std::move(s->new_keys_);
  born_open_ = std::move(s->born_open_);
  born_prev_ = std::move(s->born_prev_);
  bucket_ = s->bucket_;
  closed_ = s->closed_;
  categories_ = std::move(s->categories_);
  embedding_dim_ = s->embedding_dim_;
  read_wall_ = std::move(s->read_wall_);
  stats_ = s->stats_;
  bucket_stats_ = s->bucket_stats_;
  offsets_ = std::move(s->offsets_);
  return Status::Ok();
}

}  // namespace surge::stream
