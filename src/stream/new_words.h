// New phrases for the annotate stage: a NewWordDetector (text/new_words.h) fed with a sample of
// the stream finds phrases the dictionary lacks ("AI推理革命", which the segmenter cuts into AI /
// 推理 / 革命); each published phrase is stored as the word sequence the segmenter gives it, and
// annotate marks a post's run of words equal to such a sequence as one extra term (kNewWord) next
// to its pieces. A phrase therefore becomes a term of its own, with a fresh baseline, from the
// moment it is published.
//
// Thread safety: Offer() and Refresh() are called by one thread (the pipeline's in-order stage);
// Current() may be called from any thread and returns an immutable snapshot.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/new_words.h"
#include "text/segmenter.h"

namespace surge::stream {

struct NewWordSet {
  struct Entry {
    std::vector<uint64_t> words;  // hashes of the lower-cased words, in order
    std::string text;
    uint64_t hash = 0;  // HashBytes of the lower-cased phrase (its term hash)
  };
  // First word hash -> phrases starting with it, longest first.
  std::unordered_map<uint64_t, std::vector<Entry>> by_first;
  size_t size = 0;
};

struct NewWordLearnerOptions {
  size_t window_posts = 4000;    // posts in the detector's window
  int sample_every = 4;          // offer one post in this many to the detector
  int64_t refresh_every = 8000;  // offered posts between two publications
  size_t max_words = 200;        // phrases published
  int64_t min_count = 8;
  double min_npmi = 0.35;
  double min_entropy = 1.0;
};

class NewWordLearner {
 public:
  NewWordLearner(const text::Segmenter* segmenter, NewWordLearnerOptions options);

  // Offers one post's text; every sample_every-th is added to the window. Returns true when a
  // refresh is due.
  bool Offer(std::string_view text);
  // Recomputes the candidates and publishes them.
  void Refresh();
  std::shared_ptr<const NewWordSet> Current() const;
  int64_t refreshes() const { return refreshes_; }

 private:
  const text::Segmenter* seg_;
  NewWordLearnerOptions o_;
  text::NewWordDetector detector_;
  int64_t offered_ = 0;
  int64_t since_refresh_ = 0;
  int64_t refreshes_ = 0;
  mutable std::mutex mu_;
  std::shared_ptr<const NewWordSet> current_;
};

// ASCII lower-casing into `scratch` when needed; returns the view to hash.
std::string_view LowerAscii(std::string_view s, std::string* scratch);

}  // namespace surge::stream
