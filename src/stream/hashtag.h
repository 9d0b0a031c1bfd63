// Hashtags: naming a topic by the best contiguous phrase of its posts.
//
// BestPhrase grows each seed term (a topic term, in its posts' texts) one character at a time to
// the left or right, taking the neighbour most of its occurrences share, for as long as the longer
// phrase keeps at least `keep` of the current support (the number of texts containing it) and no
// separator is crossed (white space, punctuation, '#', '@', symbols, emoji). A phrase that was cut
// into pieces by the segmenter ("AI" "推理" "革命") grows back to its whole ("AI推理革命"); a
// phrase stops where its contexts start to vary. Each grown phrase scores support x the summed
// weights of the seed terms it contains; the best one wins (ties: longer, then smaller text).
//
// NormalizeHashtag: full-width ASCII (U+FF01..U+FF5E) and the ideographic space are folded to
// ASCII, '#' removed, white space collapsed to one ASCII space and trimmed, punctuation trimmed
// from both ends, cut to `max_chars` code points (at a character boundary), wrapped in '#…#'.
// An empty result (nothing left) gives "".
//
// Thread safety: pure functions.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace surge::stream {

struct SeedTerm {
  std::string text;
  double weight = 1;
};

struct PhraseOptions {
  double keep = 0.6;   // support kept per extension step
  int max_chars = 20;  // longest phrase grown, in code points
  int min_support = 2;
};

struct Phrase {
  std::string text;
  int support = 0;
  double score = 0;
};

Phrase BestPhrase(std::span<const std::string_view> texts, std::span<const SeedTerm> seeds,
                  const PhraseOptions& options = {});

std::string NormalizeHashtag(std::string_view phrase, int max_chars = 20);

// A character that can be part of a name: letters, digits, ideographs and other scripts' letters;
// not white space, punctuation, symbols, arrows or emoji.
bool IsNameChar(char32_t c);

}  // namespace surge::stream
