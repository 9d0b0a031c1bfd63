// New-word discovery over a sliding window of posts: character n-grams that occur often, whose
// parts stick together (cohesion, normalised PMI) and that appear in varied contexts (left and
// right boundary entropy). Fragments of a longer new word fail the entropy test (the fragment
// "推理革" of "AI推理革命" is always followed by "命"), so the whole word is what comes out.
//
// Units: a Han character is one unit and a run of ASCII letters/digits is one unit (so "AI" is
// one unit of "AI推理革命"); anything else separates segments and n-grams never span it.
//
// Memory is bounded: n-gram counts (1..max_len units) live in a count-min sketch (depth x width
// 32-bit counters) that is incremented when a post enters the window and decremented when it
// leaves; the window keeps at most `window_posts` posts of at most `max_post_bytes` bytes each;
// n-grams whose sketch estimate reaches `min_count` enter a candidate table of at most
// `max_tracked` entries (when full, the half with the lowest estimates is dropped). Candidates()
// then recounts the tracked n-grams, their parts and their neighbours exactly over the window.
//
// Thread safety: none; one detector per stream stage (or guard it externally).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace surge::text {

struct NewWordOptions {
  size_t min_len = 2;              // in units
  size_t max_len = 6;              // in units, at most 8
  size_t window_posts = 20000;     // posts in the sliding window
  size_t max_post_bytes = 2000;    // longer posts are truncated (at a character boundary)
  size_t sketch_width = 1u << 19;  // count-min columns (rounded up to a power of two)
  size_t sketch_depth = 4;         // count-min rows
  size_t max_tracked = 20000;      // candidate table capacity
  int64_t min_count = 10;          // occurrences in the window
  double min_npmi = 0.35;          // normalised PMI of the weakest split, in [-1, 1]
  double min_entropy = 1.0;        // nats, for both left and right neighbours
  // Optional: words for which this returns true are not reported (e.g. dictionary words).
  std::function<bool(std::string_view)> is_known;
};

struct WordCandidate {
  std::string word;
  int64_t count = 0;        // occurrences in the window
  double npmi = 0;          // cohesion: min over binary splits of normalised PMI
  double left_entropy = 0;  // nats
  double right_entropy = 0;
  double score = 0;  // count * npmi * min(left_entropy, right_entropy)
};

class NewWordDetector {
 public:
  explicit NewWordDetector(NewWordOptions options = {});

  // Adds one post to the window (expiring the oldest when the window is full).
  void AddPost(std::string_view text);
  // Candidates passing every threshold, best score first, at most `top_k` (0 = all).
  std::vector<WordCandidate> Candidates(size_t top_k = 50) const;

  size_t window_size() const { return window_.size(); }
  size_t tracked() const { return tracked_.size(); }
  size_t memory_bytes() const;

 private:
  struct Unit {
    uint64_t hash;
    uint32_t begin, end;  // byte range in the post
  };
  struct Tracked {
    std::string text;
    uint8_t units;
  };
  void SplitUnits(std::string_view text, std::vector<std::vector<Unit>>* segments) const;
  void CountPost(std::string_view text, int delta, bool admit);
  uint32_t Estimate(uint64_t key) const;
  void Prune();
  static uint64_t Combine(uint64_t h, uint64_t unit);

  NewWordOptions o_;
  size_t width_mask_;
  std::vector<uint32_t> sketch_;
  std::deque<std::string> window_;
  std::unordered_map<uint64_t, Tracked> tracked_;  // n-gram key -> text
  uint64_t total_units_ = 0;                       // units in the window
};

}  // namespace surge::text
