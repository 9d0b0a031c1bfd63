// The lexical path's stand-in for the model's category and sentiment heads: a small built-in
// lexicon of category keywords and sentiment words. A post's category is the category with most
// keyword hits among its words (ties: the earlier category below; no hit: unknown, -1); its
// sentiment is pos/neg from the balance of sentiment words, neutral otherwise. This is a coarse
// heuristic, not a classifier: with a model (annotate.h) the model's heads replace it.
//
// Thread safety: immutable; shared by all annotate workers.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace surge::stream {

class Lexicon {
 public:
  // The built-in lexicon (categories: 科技 体育 娱乐 财经 社会 国际 健康 汽车 游戏 美食 教育 旅游).
  static const Lexicon& BuiltIn();

  const std::vector<std::string>& categories() const { return categories_; }
  // By the hash of the ASCII-lower-cased word (HashBytes): category index or -1.
  int Category(uint64_t word_hash) const {
    auto it = category_.find(word_hash);
    return it == category_.end() ? -1 : it->second;
  }
  // +1 positive, -1 negative, 0 neither.
  int Polarity(uint64_t word_hash) const {
    auto it = polarity_.find(word_hash);
    return it == polarity_.end() ? 0 : it->second;
  }

 private:
  Lexicon() = default;
  std::vector<std::string> categories_;
  std::unordered_map<uint64_t, int> category_;
  std::unordered_map<uint64_t, int> polarity_;
};

}  // namespace surge::stream
