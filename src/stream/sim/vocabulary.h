// The simulator's word pools, built from a scenario and jieba's dictionary ("word freq tag"
// lines, Debian python3-jieba's dict.txt by default):
//  * category words: the category's seed words (most typical first), then dictionary nouns
//    (tags n, nz, vn) of 2-4 Han characters that contain a seed word (frequency >= 50) or one
//    of the category's dict_chars (frequency >= 300), most frequent first, up to dict_words.
//    A word belongs to one category only (seed words first, then categories in order).
//  * general nouns (n, frequency >= 3000, 2-3 characters), verbs (v, >= 3000, 2 characters),
//    adverbs (d, >= 2000, 2 characters), weighted by sqrt(frequency); none of them a category
//    word.
//  * the scenario's lexicon, evergreen and bump words as given.
// No dictionary word that contains a sentiment word, an excluded word, an evergreen or bump word
// or an event/spam phrase is used, so that every sentiment word in a post comes from the
// lexicon and labels stay consistent with the text.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "stream/sim/random.h"
#include "stream/sim/scenario.h"

namespace surge::stream::sim {

struct WordPool {
  std::vector<std::string> words;
  AliasTable table;

  void Set(std::vector<std::string> w, const std::vector<double>& weights);
  const std::string& Draw(Rng& rng) const { return words[table.Draw(rng)]; }
  bool empty() const { return words.empty(); }
};

struct Vocabulary {
  std::vector<WordPool> category;  // one per scenario category, in order
  WordPool general;
  WordPool verbs;
  WordPool adverbs;
  WordPool adjectives;
  WordPool evergreen;
  WordPool pos;
  WordPool neg;
  WordPool neu;
  WordPool emoji;
  std::vector<WordPool> bumps;  // one per scenario bump
};

// Errors name the dictionary file and line, or the pool that came out empty.
Result<Vocabulary> BuildVocabulary(const Scenario& scenario);

}  // namespace surge::stream::sim
