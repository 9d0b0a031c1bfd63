#include "stream/eval/frequency_baseline.h"

#include <algorithm>
#include <functional>

namespace surge::stream::eval {

Result<std::unique_ptr<FrequencyBaseline>> FrequencyBaseline::Create(
    const text::Segmenter* segmenter, const text::KeywordExtractor* keywords,
    const FrequencyBaselineOptions& options) {
  if (segmenter == nullptr || keywords == nullptr) {
    return InvalidArgumentError("frequency baseline: segmenter and keyword extractor are needed");
  }
  if (options.k <= 0) return InvalidArgumentError("frequency baseline: k must be positive");
  if (options.bucket_ms <= 0) {
    return InvalidArgumentError("frequency baseline: bucket width must be positive");
  }
  return std::unique_ptr<FrequencyBaseline>(new FrequencyBaseline(segmenter, keywords, options));
}

void FrequencyBaseline::Bump(const std::string& key, const Post& post, uint64_t author, bool bigram,
                             std::string_view a, std::string_view b) {
  auto [it, inserted] = counts_.try_emplace(key);
  Count& c = it->second;
  if (inserted) {
    c.order = next_order_++;
    c.bigram = bigram;
    c.a = a;
    c.b = b;
  }
  if (c.last_post == post_seq_) return;
  c.last_post = post_seq_;
  ++c.posts;
  if (c.samples.size() < 3) c.samples.push_back(post.id);
  c.author_hashes.push_back(author);
}

void FrequencyBaseline::Add(const Post& post, std::vector<TrendUpdate>* out) {
  const int64_t b = options_.bucket_ms;
  const int64_t bucket = (post.ts_ms >= 0 ? post.ts_ms / b : (post.ts_ms - b + 1) / b) * b;
  if (bucket_start_ == INT64_MIN) bucket_start_ = bucket;
  if (bucket > bucket_start_) {
    Emit(out);
    bucket_start_ = bucket;
  }
  ++post_seq_;
  const uint64_t author = std::hash<std::string>{}(post.user.id);
  spans_.clear();
  segmenter_->Cut(post.text, &spans_);
  std::string_view prev;
  std::string key;
  for (const auto& s : spans_) {
    const std::string_view w = std::string_view(post.text).substr(s.offset, s.size);
    if (keywords_->Filtered(w)) {
      prev = {};
      continue;
    }
    key.assign(w);
    Bump(key, post, author, false, w, {});
    if (options_.bigrams && !prev.empty()) {
      key.assign(prev);
      key.push_back('\t');
      key.append(w);
      Bump(key, post, author, true, prev, w);
    }
    prev = w;
  }
}

void FrequencyBaseline::Emit(std::vector<TrendUpdate>* out) {
  if (counts_.empty()) return;
  std::vector<std::pair<const std::string*, Count*>> all;
  all.reserve(counts_.size());
  for (auto& [k, c] : counts_) all.emplace_back(&k, &c);
  const size_t k = std::min(all.size(), static_cast<size_t>(options_.k));
  std::partial_sort(all.begin(), all.begin() + k, all.end(), [](const auto& x, const auto& y) {
    if (x.second->posts != y.second->posts) return x.second->posts > y.second->posts;
    return x.second->order < y.second->order;
  });
  const int64_t updated = bucket_start_ + options_.bucket_ms;
  std::unordered_map<std::string, int> ranks;
  for (size_t i = 0; i < k; ++i) {
    const std::string& key = *all[i].first;
    Count& c = *all[i].second;
    TrendUpdate t;
    t.topic_id = (c.bigram ? "freq:" + c.a + "+" + c.b : "freq:" + c.a);
    t.hashtag = "#" + c.a + c.b + "#";
    t.terms = c.bigram ? std::vector<std::string>{c.a, c.b} : std::vector<std::string>{c.a};
    t.rank = static_cast<int>(i) + 1;
    if (auto it = prev_rank_.find(key); it != prev_rank_.end()) t.prev_rank = it->second;
    t.heat = static_cast<double>(c.posts);
    t.posts = c.posts;
    std::sort(c.author_hashes.begin(), c.author_hashes.end());
    t.authors =
        std::unique(c.author_hashes.begin(), c.author_hashes.end()) - c.author_hashes.begin();
    t.first_seen_ms = first_listed_.try_emplace(key, updated).first->second;
    t.updated_ms = updated;
    t.samples = c.samples;
    ranks.emplace(key, t.rank);
    out->push_back(std::move(t));
  }
  prev_rank_ = std::move(ranks);
  counts_.clear();
}

void FrequencyBaseline::Finish(std::vector<TrendUpdate>* out) { Emit(out); }

}  // namespace surge::stream::eval
