#include "text/new_words.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "text/utf8.h"

namespace surge::text {
namespace {

constexpr uint64_t kSeed = 0x5EEDC0DE12345678ull;

uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

bool IsHanUnit(char32_t c) {
  return (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x20000 && c <= 0x2FFFF);
}
bool IsAsciiAlnum(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// Entropy (nats) of a neighbour distribution where each boundary occurrence is its own symbol.
double Entropy(const std::unordered_map<uint64_t, int64_t>& counts, int64_t edges) {
  double n = static_cast<double>(edges);
  for (const auto& [k, c] : counts) n += static_cast<double>(c);
  if (n <= 0) return 0;
  double h = 0;
  for (const auto& [k, c] : counts) {
    double p = static_cast<double>(c) / n;
    h -= p * std::log(p);
  }
  if (edges > 0) h += static_cast<double>(edges) / n * std::log(n);
  return h;
}

}  // namespace

NewWordDetector::NewWordDetector(NewWordOptions options) : o_(std::move(options)) {
  o_.max_len = std::clamp<size_t>(o_.max_len, 2, 8);
  o_.min_len = std::clamp<size_t>(o_.min_len, 2, o_.max_len);
  o_.sketch_depth = std::clamp<size_t>(o_.sketch_depth, 1, 8);
  o_.window_posts = std::max<size_t>(o_.window_posts, 1);
  o_.max_tracked = std::max<size_t>(o_.max_tracked, 16);
  size_t width = std::bit_ceil(std::max<size_t>(o_.sketch_width, 1024));
  width_mask_ = width - 1;
  sketch_.assign(width * o_.sketch_depth, 0);
}

uint64_t NewWordDetector::Combine(uint64_t h, uint64_t unit) { return Mix(h ^ unit) + unit; }

void NewWordDetector::SplitUnits(std::string_view text,
                                 std::vector<std::vector<Unit>>* segments) const {
  segments->clear();
  std::vector<Unit> cur;
  auto flush = [&] {
    if (!cur.empty()) segments->push_back(std::move(cur));
    cur.clear();
  };
  for (size_t p = 0; p < text.size();) {
    DecodedChar c = DecodeUtf8At(text, p);
    if (IsAsciiAlnum(c.cp)) {
      size_t q = p;
      while (q < text.size() && IsAsciiAlnum(static_cast<unsigned char>(text[q]))) ++q;
      cur.push_back({XXH3_64bits(text.data() + p, q - p), static_cast<uint32_t>(p),
                     static_cast<uint32_t>(q)});
      p = q;
    } else if (c.valid && IsHanUnit(c.cp)) {
      cur.push_back({XXH3_64bits(text.data() + p, c.length), static_cast<uint32_t>(p),
                     static_cast<uint32_t>(p + c.length)});
      p += c.length;
    } else {
      flush();
      p += c.length;
    }
  }
  flush();
}

uint32_t NewWordDetector::Estimate(uint64_t key) const {
  size_t width = width_mask_ + 1;
  uint32_t est = UINT32_MAX;
  for (size_t r = 0; r < o_.sketch_depth; ++r) {
    size_t idx = Mix(key + r * 0x9E3779B97F4A7C15ull) & width_mask_;
    est = std::min(est, sketch_[r * width + idx]);
  }
  return est;
}

void NewWordDetector::CountPost(std::string_view text, int delta, bool admit) {
  std::vector<std::vector<Unit>> segments;
  SplitUnits(text, &segments);
  size_t width = width_mask_ + 1;
  for (const auto& units : segments) {
    size_t n = units.size();
    if (delta > 0) {
      total_units_ += n;
    } else {
      total_units_ -= n;
    }
    for (size_t i = 0; i < n; ++i) {
      uint64_t h = kSeed;
      for (size_t len = 1; len <= o_.max_len && i + len <= n; ++len) {
        h = Combine(h, units[i + len - 1].hash);
        uint32_t est = UINT32_MAX;
        for (size_t r = 0; r < o_.sketch_depth; ++r) {
          uint32_t& cell = sketch_[r * width + (Mix(h + r * 0x9E3779B97F4A7C15ull) & width_mask_)];
          cell += delta;  // decrements only undo earlier increments, so no underflow
          est = std::min(est, cell);
        }
        if (admit && len >= o_.min_len && est >= o_.min_count && !tracked_.count(h)) {
          tracked_.emplace(h, Tracked{std::string(text.substr(
                                          units[i].begin, units[i + len - 1].end - units[i].begin)),
                                      static_cast<uint8_t>(len)});
          if (tracked_.size() > o_.max_tracked) Prune();
        }
      }
    }
  }
}

void NewWordDetector::Prune() {
  std::vector<std::pair<uint32_t, uint64_t>> est;
  est.reserve(tracked_.size());
  for (const auto& [k, t] : tracked_) est.push_back({Estimate(k), k});
  size_t keep = o_.max_tracked / 2;
  std::nth_element(est.begin(), est.begin() + keep, est.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = keep; i < est.size(); ++i) tracked_.erase(est[i].second);
}

void NewWordDetector::AddPost(std::string_view text) {
  if (text.size() > o_.max_post_bytes) {
    size_t cut = o_.max_post_bytes;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text = text.substr(0, cut);
  }
  if (window_.size() >= o_.window_posts) {
    CountPost(window_.front(), -1, false);
    window_.pop_front();
  }
  window_.emplace_back(text);
  CountPost(window_.back(), +1, true);
  // Tracked n-grams that have left the window entirely are forgotten.
  if (window_.size() % 1024 == 0) {
    for (auto it = tracked_.begin(); it != tracked_.end();) {
      it = Estimate(it->first) == 0 ? tracked_.erase(it) : std::next(it);
    }
  }
}

std::vector<WordCandidate> NewWordDetector::Candidates(size_t top_k) const {
  struct Stats {
    int64_t count = 0;
    std::unordered_map<uint64_t, int64_t> left, right;
    int64_t left_edges = 0, right_edges = 0;
  };
  // Exact counts of every tracked n-gram and of every part of its binary splits.
  std::unordered_map<uint64_t, int64_t> needed;
  std::unordered_map<uint64_t, Stats> stats;
  struct Split {
    uint64_t left, right;
  };
  std::unordered_map<uint64_t, std::vector<Split>> splits;
  std::vector<std::vector<Unit>> segs;
  for (const auto& [key, t] : tracked_) {
    SplitUnits(t.text, &segs);
    if (segs.size() != 1 || segs[0].size() != t.units) continue;
    const auto& u = segs[0];
    std::vector<uint64_t> prefix(u.size() + 1, kSeed), suffix(u.size() + 1, kSeed);
    for (size_t i = 0; i < u.size(); ++i) prefix[i + 1] = Combine(prefix[i], u[i].hash);
    std::vector<Split> sp;
    for (size_t cut = 1; cut < u.size(); ++cut) {
      uint64_t right = kSeed;
      for (size_t i = cut; i < u.size(); ++i) right = Combine(right, u[i].hash);
      sp.push_back({prefix[cut], right});
      needed.emplace(prefix[cut], 0);
      needed.emplace(right, 0);
    }
    splits.emplace(key, std::move(sp));
    stats.emplace(key, Stats{});
  }
  for (const std::string& post : window_) {
    SplitUnits(post, &segs);
    for (const auto& units : segs) {
      size_t n = units.size();
      for (size_t i = 0; i < n; ++i) {
        uint64_t h = kSeed;
        for (size_t len = 1; len <= o_.max_len && i + len <= n; ++len) {
          h = Combine(h, units[i + len - 1].hash);
          auto nit = needed.find(h);
          if (nit != needed.end()) ++nit->second;
          if (len < o_.min_len) continue;
          auto sit = stats.find(h);
          if (sit == stats.end()) continue;
          Stats& s = sit->second;
          ++s.count;
          if (i > 0) {
            ++s.left[units[i - 1].hash];
          } else {
            ++s.left_edges;
          }
          if (i + len < n) {
            ++s.right[units[i + len].hash];
          } else {
            ++s.right_edges;
          }
        }
      }
    }
  }
  std::vector<WordCandidate> out;
  const double total = static_cast<double>(std::max<uint64_t>(total_units_, 1));
  for (const auto& [key, s] : stats) {
    if (s.count < o_.min_count) continue;
    const Tracked& t = tracked_.at(key);
    double pw = static_cast<double>(s.count) / total;
    double npmi = 1.0;
    for (const Split& sp : splits.at(key)) {
      double pa = static_cast<double>(std::max<int64_t>(needed.at(sp.left), 1)) / total;
      double pb = static_cast<double>(std::max<int64_t>(needed.at(sp.right), 1)) / total;
      double pmi = std::log(pw / (pa * pb));
      double denom = -std::log(pw);
      npmi = std::min(npmi, denom > 0 ? pmi / denom : 1.0);
    }
    if (npmi < o_.min_npmi) continue;
    double hl = Entropy(s.left, s.left_edges), hr = Entropy(s.right, s.right_edges);
    if (hl < o_.min_entropy || hr < o_.min_entropy) continue;
    if (o_.is_known && o_.is_known(t.text)) continue;
    out.push_back(
        {t.text, s.count, npmi, hl, hr, static_cast<double>(s.count) * npmi * std::min(hl, hr)});
  }
  std::sort(out.begin(), out.end(), [](const WordCandidate& a, const WordCandidate& b) {
    return a.score != b.score ? a.score > b.score : a.word < b.word;
  });
  if (top_k > 0 && out.size() > top_k) out.resize(top_k);
  return out;
}

size_t NewWordDetector::memory_bytes() const {
  size_t bytes = sketch_.size() * sizeof(uint32_t);
  for (const auto& p : window_) bytes += p.capacity() + sizeof(std::string);
  for (const auto& [k, t] : tracked_) bytes += t.text.capacity() + 64;
  return bytes;
}

}  // namespace surge::text
