#include "stream/web/trend_store.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <iterator>
#include <unordered_set>

#include "stream/post.h"

namespace surge::stream::web {
namespace {

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Cuts `s` to at most `max` bytes without splitting a UTF-8 sequence.
void CutUtf8(std::string* s, size_t max) {
  if (s->size() <= max) return;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>((*s)[n]) & 0xC0) == 0x80) --n;
  s->resize(n);
  s->append("…");
}

bool Finite(double v) { return std::isfinite(v); }

// Appends `prefix` (punctuation and key, e.g. ",\"text\":") and `value` as a JSON string.
void AppendStringField(std::string_view prefix, std::string_view value, std::string* out) {
  out->append(prefix);
  AppendJsonString(value, out);
}

void AppendHeat(double heat, std::string* out) {
  fmt::format_to(std::back_inserter(*out), "{:.2f}", heat);
}

}  // namespace

struct TrendStore::TopicState {
  std::optional<TrendUpdate> latest;
  std::deque<TopicPoint> history;  // oldest first
  std::deque<SamplePost> samples;  // newest first
  uint64_t touched_seq = 0;        // seq of the bucket it was last listed in (or created at)
  int64_t last_listed_ms = 0;
  bool on_list = false;
};

bool ValidTopicId(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string HotListJson(const HotList& list, size_t k) {
  size_t n = std::min(k, list.trends.size());
  std::string out;
  out.reserve(256 + n * 512);
  auto it = std::back_inserter(out);
  fmt::format_to(it, "{{\"bucket\":{},\"updated\":{},\"seq\":{},\"trends\":[", list.bucket_ms,
                 list.published_ms, list.seq);
  for (size_t i = 0; i < n; ++i) {
    if (i) out.push_back(',');
    AppendTrendJson(list.trends[i], &out);
  }
  out.append("],\"spark_buckets\":[");
  for (size_t i = 0; i < list.spark_buckets.size(); ++i) {
    if (i) out.push_back(',');
    fmt::format_to(it, "{}", list.spark_buckets[i]);
  }
  out.append("],\"spark\":{");
  for (size_t i = 0; i < n && i < list.spark.size(); ++i) {
    if (i) out.push_back(',');
    AppendJsonString(list.trends[i].topic_id, &out);
    out.append(":[");
    for (size_t j = 0; j < list.spark[i].size(); ++j) {
      if (j) out.push_back(',');
      if (list.spark[i][j]) {
        AppendHeat(*list.spark[i][j], &out);
      } else {
        out.append("null");
      }
    }
    out.push_back(']');
  }
  out.append("}}");
  return out;
}

std::string TopicDetailJson(std::string_view topic_id, const TopicDetail& d) {
  std::string out;
  auto it = std::back_inserter(out);
  out.append("{\"topic_id\":");
  AppendJsonString(topic_id, &out);
  fmt::format_to(it, ",\"on_list\":{},\"last_listed\":{},\"latest\":", d.on_list, d.last_listed_ms);
  if (d.latest) {
    AppendTrendJson(*d.latest, &out);
  } else {
    out.append("null");
  }
  out.append(",\"history\":[");
  for (size_t i = 0; i < d.history.size(); ++i) {
    if (i) out.push_back(',');
    fmt::format_to(it, "{{\"bucket\":{},\"heat\":", d.history[i].bucket_ms);
    AppendHeat(d.history[i].heat, &out);
    fmt::format_to(it, ",\"rank\":{}}}", d.history[i].rank);
  }
  out.append("],\"samples\":[");
  for (size_t i = 0; i < d.samples.size(); ++i) {
    const auto& p = d.samples[i];
    if (i) out.push_back(',');
    AppendStringField("{\"id\":", p.id, &out);
    AppendStringField(",\"text\":", p.text, &out);
    AppendStringField(",\"user\":", p.user, &out);
    fmt::format_to(it, ",\"ts\":{}}}", p.ts_ms);
  }
  out.append("]}");
  return out;
}

std::string HealthJson(const PipelineHealth& h) {
  std::string out;
  auto it = std::back_inserter(out);
  fmt::format_to(it,
                 "{{\"posts_per_s\":{:.1f},\"lag_ms\":{:.1f},\"inference_p99_ms\":{:.3f},"
                 "\"dead_letters\":{},\"dead_letter_kinds\":{{",
                 h.posts_per_s, h.lag_ms, h.inference_p99_ms, h.dead_letters);
  bool first = true;
  for (const auto& [kind, n] : h.dead_letter_kinds) {
    if (!first) out.push_back(',');
    first = false;
    AppendJsonString(kind, &out);
    fmt::format_to(it, ":{}", n);
  }
  fmt::format_to(it, "}},\"buckets\":{},\"posts_total\":{}", h.buckets, h.posts_total);
  AppendStringField(",\"model\":", h.model, &out);
  AppendStringField(",\"backend\":", h.backend, &out);
  AppendStringField(",\"source\":", h.source, &out);
  fmt::format_to(it, ",\"live\":{},\"updated\":{}}}", h.live, h.updated_ms);
  return out;
}

TrendStore::TrendStore(TrendStoreOptions options) : options_(options) {
  auto empty = std::make_shared<HotList>();
  empty->json = HotListJson(*empty, 0);
  current_ = std::move(empty);
  health_json_ = HealthJson(health_);
}

TrendStore::~TrendStore() = default;

Status TrendStore::Publish(int64_t bucket_end_ms, std::vector<TrendUpdate> list) {
  std::lock_guard publish_lock(publish_mu_);
  std::shared_ptr<const HotList> prev;
  {
    std::shared_lock lock(mu_);
    prev = current_;
  }
  if (prev->seq > 0 && bucket_end_ms <= prev->bucket_ms) {
    return InvalidArgumentError(
        "hot list for bucket {}: buckets must be published in order; the last one ended at {}",
        bucket_end_ms, prev->bucket_ms);
  }
  if (list.size() > options_.max_list) {
    return InvalidArgumentError("hot list for bucket {}: {} entries, at most {} are accepted",
                                bucket_end_ms, list.size(), options_.max_list);
  }
  std::unordered_set<std::string_view> ids;
  std::unordered_set<int> ranks;
  for (size_t i = 0; i < list.size(); ++i) {
    const TrendUpdate& t = list[i];
    auto where = [&] { return fmt::format("hot list for bucket {}, entry {}", bucket_end_ms, i); };
    if (!ValidTopicId(t.topic_id)) {
      return InvalidArgumentError("{}: topic_id '{}' is not 1..128 characters of [A-Za-z0-9_.:-]",
                                  where(), t.topic_id);
    }
    if (!ids.insert(t.topic_id).second) {
      return InvalidArgumentError("{}: topic_id '{}' appears twice", where(), t.topic_id);
    }
    if (t.rank < 1) return InvalidArgumentError("{}: rank {} is not >= 1", where(), t.rank);
    if (!ranks.insert(t.rank).second) {
      return InvalidArgumentError("{}: rank {} appears twice", where(), t.rank);
    }
    if (!Finite(t.heat)) {
      return InvalidArgumentError("{} ({}): heat is not a finite number", where(), t.topic_id);
    }
    const Sentiment& s = t.sentiment;
    for (double v : {s.pos, s.neu, s.neg}) {
      if (!Finite(v) || v < 0 || v > 1) {
        return InvalidArgumentError(
            "{} ({}): sentiment pos/neu/neg must be in [0, 1], got {}/{}/{}", where(), t.topic_id,
            s.pos, s.neu, s.neg);
      }
    }
    if (t.posts < 0 || t.authors < 0) {
      return InvalidArgumentError("{} ({}): posts {} and authors {} must be >= 0", where(),
                                  t.topic_id, t.posts, t.authors);
    }
    if (t.updated_ms != 0 && t.updated_ms != bucket_end_ms) {
      return InvalidArgumentError("{} ({}): updated {} differs from the bucket end {}", where(),
                                  t.topic_id, t.updated_ms, bucket_end_ms);
    }
  }
  std::sort(list.begin(), list.end(),
            [](const TrendUpdate& a, const TrendUpdate& b) { return a.rank < b.rank; });

  std::unordered_map<std::string_view, int> prev_ranks;
  for (const auto& t : prev->trends) prev_ranks.emplace(t.topic_id, t.rank);

  auto next = std::make_shared<HotList>();
  next->bucket_ms = bucket_end_ms;
  next->published_ms = WallMs();
  {
    std::unique_lock lock(mu_);
    next->seq = ++seq_;
    buckets_.push_back(bucket_end_ms);
    while (buckets_.size() > std::max<size_t>(1, options_.history_buckets)) {
      buckets_.erase(buckets_.begin());
    }
    for (auto& [id, topic] : topics_) topic->on_list = false;
    for (auto& t : list) {
      t.updated_ms = bucket_end_ms;
      auto pr = prev_ranks.find(t.topic_id);
      t.prev_rank = pr == prev_ranks.end() ? std::nullopt : std::optional<int>(pr->second);
      auto& slot = topics_[t.topic_id];
      if (!slot) slot = std::make_unique<TopicState>();
      TopicState& topic = *slot;
      topic.latest = t;
      topic.on_list = true;
      topic.touched_seq = next->seq;
      topic.last_listed_ms = bucket_end_ms;
      topic.history.push_back({bucket_end_ms, t.heat, t.rank});
      while (topic.history.size() > std::max<size_t>(1, options_.history_buckets)) {
        topic.history.pop_front();
      }
    }
    size_t points = std::min(options_.spark_points, buckets_.size());
    next->spark_buckets.assign(buckets_.end() - static_cast<ptrdiff_t>(points), buckets_.end());
    next->spark.reserve(list.size());
    for (const auto& t : list) {
      const TopicState& topic = *topics_.at(t.topic_id);
      std::vector<std::optional<double>> row(points);
      // Both sequences are ascending in time: walk them together from the end.
      auto h = topic.history.rbegin();
      for (size_t j = points; j-- > 0;) {
        int64_t b = next->spark_buckets[j];
        while (h != topic.history.rend() && h->bucket_ms > b) ++h;
        if (h != topic.history.rend() && h->bucket_ms == b) row[j] = h->heat;
      }
      next->spark.push_back(std::move(row));
    }
    EvictLocked();
  }
  next->trends = std::move(list);
  next->json = HotListJson(*next, next->trends.size());
  {
    std::unique_lock lock(mu_);
    current_ = next;
  }
  std::vector<std::shared_ptr<TrendStoreListener>> listeners;
  {
    std::lock_guard lock(listeners_mu_);
    for (auto& [token, l] : listeners_) listeners.push_back(l);
  }
  std::shared_ptr<const HotList> published = next;
  for (auto& l : listeners) {
    if (l->on_trends) l->on_trends(published);
  }
  return Status::Ok();
}

void TrendStore::EvictLocked() {
  uint64_t now = seq_;
  std::erase_if(topics_, [&](const auto& kv) {
    const TopicState& t = *kv.second;
    return !t.on_list && now - t.touched_seq > options_.keep_buckets;
  });
  if (topics_.size() <= options_.max_topics) return;
  std::vector<std::pair<uint64_t, std::string_view>> unlisted;
  for (const auto& [id, t] : topics_) {
    if (!t->on_list) unlisted.emplace_back(t->touched_seq, id);
  }
  std::sort(unlisted.begin(), unlisted.end());
  size_t excess = topics_.size() - options_.max_topics;
  std::vector<std::string> drop;
  for (size_t i = 0; i < excess && i < unlisted.size(); ++i) drop.emplace_back(unlisted[i].second);
  for (const auto& id : drop) topics_.erase(id);
}

Status TrendStore::AddSamplePosts(std::string_view topic_id, std::vector<SamplePost> posts) {
  if (!ValidTopicId(topic_id)) {
    return InvalidArgumentError(
        "sample posts: topic_id '{}' is not 1..128 characters of [A-Za-z0-9_.:-]", topic_id);
  }
  for (size_t i = 0; i < posts.size(); ++i) {
    if (posts[i].id.empty()) {
      return InvalidArgumentError("sample posts for topic '{}': post {} has no id", topic_id, i);
    }
  }
  std::unique_lock lock(mu_);
  auto& slot = topics_[std::string(topic_id)];
  if (!slot) {
    slot = std::make_unique<TopicState>();
    slot->touched_seq = seq_;
  }
  auto& samples = slot->samples;
  for (auto& p : posts) {
    if (std::any_of(samples.begin(), samples.end(), [&](const auto& s) { return s.id == p.id; })) {
      continue;
    }
    CutUtf8(&p.text, options_.max_sample_bytes);
    samples.push_front(std::move(p));
  }
  while (samples.size() > options_.max_samples) samples.pop_back();
  EvictLocked();
  return Status::Ok();
}

Status TrendStore::UpdateHealth(PipelineHealth h) {
  for (double v : {h.posts_per_s, h.lag_ms, h.inference_p99_ms}) {
    if (!Finite(v) || v < 0) {
      return InvalidArgumentError(
          "pipeline health: posts_per_s {}, lag_ms {}, inference_p99_ms {} must be finite and "
          ">= 0",
          h.posts_per_s, h.lag_ms, h.inference_p99_ms);
    }
  }
  if (h.dead_letters < 0 || h.buckets < 0 || h.posts_total < 0) {
    return InvalidArgumentError(
        "pipeline health: dead_letters {}, buckets {}, posts_total {} must be >= 0", h.dead_letters,
        h.buckets, h.posts_total);
  }
  std::lock_guard publish_lock(publish_mu_);
  h.updated_ms = WallMs();
  std::string json = HealthJson(h);
  {
    std::unique_lock lock(mu_);
    health_ = h;
    health_json_ = json;
  }
  std::vector<std::shared_ptr<TrendStoreListener>> listeners;
  {
    std::lock_guard lock(listeners_mu_);
    for (auto& [token, l] : listeners_) listeners.push_back(l);
  }
  for (auto& l : listeners) {
    if (l->on_health) l->on_health(h, json);
  }
  return Status::Ok();
}

std::shared_ptr<const HotList> TrendStore::Current() const {
  std::shared_lock lock(mu_);
  return current_;
}

std::optional<TopicDetail> TrendStore::Topic(std::string_view topic_id) const {
  std::shared_lock lock(mu_);
  auto it = topics_.find(std::string(topic_id));
  if (it == topics_.end()) return std::nullopt;
  const auto& t = *it->second;
  TopicDetail d;
  d.latest = t.latest;
  d.on_list = t.on_list;
  d.last_listed_ms = t.last_listed_ms;
  d.history.assign(t.history.begin(), t.history.end());
  d.samples.assign(t.samples.begin(), t.samples.end());
  return d;
}

PipelineHealth TrendStore::Health() const {
  std::shared_lock lock(mu_);
  return health_;
}

std::string TrendStore::HealthJsonNow() const {
  std::shared_lock lock(mu_);
  return health_json_;
}

size_t TrendStore::topic_count() const {
  std::shared_lock lock(mu_);
  return topics_.size();
}

uint64_t TrendStore::Subscribe(TrendStoreListener listener) {
  std::lock_guard lock(listeners_mu_);
  uint64_t token = next_token_++;
  listeners_.emplace(token, std::make_shared<TrendStoreListener>(std::move(listener)));
  return token;
}

void TrendStore::Unsubscribe(uint64_t token) {
  {
    std::lock_guard lock(listeners_mu_);
    listeners_.erase(token);
  }
  // Wait for a Publish/UpdateHealth that may still be calling it.
  std::lock_guard publish_lock(publish_mu_);
}

}  // namespace surge::stream::web
