// The raw-frequency top-k baseline for `surge eval --baseline frequency`: per bucket, the k words
// and bigrams held by the most posts. What a detector must beat.
//
// Each post is cut with the Segmenter (jieba words, HMM on); words that
// KeywordExtractor::Filtered() rejects (stop words, numbers, single characters, punctuation) are
// dropped; the remaining words and the bigrams of remaining words that stand next to each other
// in the cut are counted once per post. At the end of each bucket the k most frequent (ties: the
// one first seen in the bucket) become TrendUpdates: a word w gives hashtag "#w#", terms [w]; a
// bigram (a, b) gives "#ab#", terms [a, b]; heat = posts = posts holding it; authors = distinct
// authors among them; samples = its first 3 posts. Buckets are [n·b, (n+1)·b) in ms since the
// epoch; `updated` is the bucket's end.
//
// Posts are expected in timestamp order; a post older than the open bucket is counted in the
// open bucket. Thread safety: one instance per thread; the segmenter and extractor may be shared.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "stream/post.h"
#include "stream/trend.h"
#include "text/keywords.h"
#include "text/segmenter.h"

namespace surge::stream::eval {

struct FrequencyBaselineOptions {
  int k = 10;
  int64_t bucket_ms = 60000;
  bool bigrams = true;
};

class FrequencyBaseline {
 public:
  // `segmenter` and `keywords` must outlive the baseline.
  static Result<std::unique_ptr<FrequencyBaseline>> Create(const text::Segmenter* segmenter,
                                                           const text::KeywordExtractor* keywords,
                                                           const FrequencyBaselineOptions& options);

  // Counts one post; appends the hot list of every bucket the post's time closes.
  void Add(const Post& post, std::vector<TrendUpdate>* out);
  // Closes the open bucket and appends its hot list.
  void Finish(std::vector<TrendUpdate>* out);

 private:
  FrequencyBaseline(const text::Segmenter* s, const text::KeywordExtractor* k,
                    const FrequencyBaselineOptions& o)
      : segmenter_(s), keywords_(k), options_(o) {}
  void Emit(std::vector<TrendUpdate>* out);

  struct Count {
    int64_t posts = 0;
    int64_t order = 0;       // first occurrence in the bucket
    int64_t last_post = -1;  // sequence number of the last post counted
    std::vector<std::string> samples;
    std::vector<uint64_t> author_hashes;  // one per post (distinct ones counted at emission)
    bool bigram = false;
    std::string a, b;
  };
  void Bump(const std::string& key, const Post& post, uint64_t author, bool bigram,
            std::string_view a, std::string_view b);

  const text::Segmenter* segmenter_;
  const text::KeywordExtractor* keywords_;
  FrequencyBaselineOptions options_;
  int64_t bucket_start_ = INT64_MIN;
  int64_t next_order_ = 0;
  int64_t post_seq_ = 0;
  std::unordered_map<std::string, Count> counts_;
  std::unordered_map<std::string, int> prev_rank_;
  std::unordered_map<std::string, int64_t> first_listed_;
  std::vector<text::WordSpan> spans_;
};

}  // namespace surge::stream::eval
