// Keyword extraction over Segmenter words: TF-IDF with jieba's idf table and TextRank with
// jieba's co-occurrence window (5), both with the fixes Surge needs for trend detection.
//
// Differences from jieba 0.42.1's extract_tags / textrank, on purpose:
//  * Numbers are never keywords: words made only of digits (ASCII or full-width) and the number
//    punctuation . , % + - : / (e.g. "2024", "3.5%", "１２") are dropped.
//  * Single characters are never keywords (jieba drops len(w.strip()) < 2 too) and neither are
//    words with no letter, digit or Han character (punctuation and emoji runs).
//  * Stop words: jieba's default English list plus kExtraStopWords below (Chinese function words
//    and Weibo boilerplate, more English function words and URL parts), compared after ASCII
//    lower-casing (jieba lower-cases with str.lower(); non-ASCII case is left as is here).
//  * New words: jieba gives every word missing from idf.txt the median idf, which buries fresh
//    terms under common ones. Words registered with AddNewWords() (e.g. from NewWordDetector)
//    get `new_word_idf` instead, by default the largest idf in the table (as rare as the rarest
//    known word). Other unknown words keep jieba's median.
//  * TextRank has no part-of-speech filter (jieba keeps ns/n/vn/v via its POS tagger, which Surge
//    does not implement); the filters above stand in for it. Edges, weights, the 10 in-place
//    iterations over sorted nodes, d = 0.85 and the final scaling are jieba's.
//
// Thread safety: TfIdf() and TextRank() may run concurrently with each other and with
// AddNewWords(). The Segmenter passed to Create() must outlive the extractor.
#pragma once

#include <cstddef>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "text/segmenter.h"

namespace surge::text {

struct KeywordOptions {
  // jieba's idf table ("word idf" per line). Empty = <kDefaultJiebaDir>/analyse/idf.txt.
  std::string idf_path;
  // Extra stop words (one per line, UTF-8), added to the built-in lists. Optional.
  std::string stop_words_path;
  // idf for words registered with AddNewWords(); <= 0 means "the largest idf in the table".
  double new_word_idf = 0;
};

struct Keyword {
  std::string word;
  double weight;
};

class KeywordExtractor {
 public:
  static Result<std::unique_ptr<KeywordExtractor>> Create(const Segmenter* segmenter,
                                                          const KeywordOptions& options = {});

  // Top `top_k` words by tf * idf / (number of kept words), heaviest first; ties keep the order
  // of first occurrence (as jieba's stable sort does).
  std::vector<Keyword> TfIdf(std::string_view text, size_t top_k = 20) const;
  // Top `top_k` words by TextRank weight (scaled as jieba does), heaviest first.
  std::vector<Keyword> TextRank(std::string_view text, size_t top_k = 20) const;

  // Marks words as new (high idf, see above).
  void AddNewWords(const std::vector<std::string>& words);

  // True when `word` can never be a keyword (stop word, number, single character, punctuation).
  bool Filtered(std::string_view word) const;
  // The idf used for `word`.
  double Idf(std::string_view word) const;
  double median_idf() const { return median_idf_; }
  double new_word_idf() const { return new_word_idf_; }

 private:
  KeywordExtractor() = default;
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  const Segmenter* segmenter_ = nullptr;
  std::unordered_map<std::string, double, StringHash, std::equal_to<>> idf_;
  std::unordered_set<std::string, StringHash, std::equal_to<>> stop_words_;
  double median_idf_ = 0;
  double new_word_idf_ = 0;
  mutable std::shared_mutex new_words_mu_;
  std::unordered_set<std::string, StringHash, std::equal_to<>> new_words_;
};

// Surge's stop words beyond jieba's English default list.
extern const char* const kExtraStopWords[];

}  // namespace surge::text
