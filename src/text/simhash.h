// 64-bit SimHash fingerprints and a Hamming-distance index for near-duplicate posts.
//
// SimHash (Charikar): every feature is hashed to 64 bits with xxHash (XXH3, seed 0); each bit
// adds the feature's weight to a counter when set and subtracts it when clear; the fingerprint
// has bit i set when counter i > 0. Near-identical texts get fingerprints a few bits apart.
//
// Features: SimHashWords() takes words (e.g. Segmenter output), SimHashText() takes overlapping
// character shingles of the normalised text (no segmenter needed). Short posts are noisy: one
// changed character alters `shingle` features, which moves a 50-character post by ~5-8 bits,
// so k <= 3 finds reposts with small additions to longer posts, not rewrites of short ones.
//
// SimHashIndex answers "which stored fingerprints are within Hamming distance k" (k <= 3) with
// the pigeonhole method: the 64 bits are cut into k+1 blocks, so any fingerprint within k bits
// agrees exactly on at least one block; one table per block maps block value -> ids, and
// candidates from the tables are verified with popcount.
//
// Thread safety: the free functions are pure. SimHashIndex: const methods may run concurrently;
// Insert()/Remove() need external synchronisation against everything else.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace surge::text {

struct WeightedFeature {
  std::string_view feature;
  double weight = 1.0;
};

uint64_t SimHash(std::span<const WeightedFeature> features);
uint64_t SimHashWords(std::span<const std::string_view> words);
// Shingles of `shingle` code points (>= 1) over the normalised text: only letters, digits and
// ideographs are kept (spaces, punctuation, symbols and emoji are dropped), full-width ASCII is
// folded to ASCII and ASCII is lower-cased, so reposts that differ only in punctuation, emoji,
// spacing or width get the same fingerprint. Texts shorter than one shingle use the whole
// normalised text as the only feature. Invalid UTF-8 bytes count as U+FFFD each.
uint64_t SimHashText(std::string_view text, int shingle = 3);

inline int HammingDistance(uint64_t a, uint64_t b) { return __builtin_popcountll(a ^ b); }

class SimHashIndex {
 public:
  // `max_distance` must be 0..3.
  static Result<SimHashIndex> Create(int max_distance = 3);

  // Adds (id, fingerprint); ids need not be unique, but Remove() removes every match of both.
  void Insert(uint64_t id, uint64_t fingerprint);
  // Removes the pair; returns false when it was not stored.
  bool Remove(uint64_t id, uint64_t fingerprint);

  struct Match {
    uint64_t id;
    int distance;
  };
  // Stored entries within max_distance of `fingerprint`, nearest first (ties by id).
  std::vector<Match> Query(uint64_t fingerprint) const;

  size_t size() const { return size_; }
  int max_distance() const { return blocks_ - 1; }

 private:
  explicit SimHashIndex(int blocks);
  uint64_t Block(uint64_t fp, int b) const { return (fp >> shift_[b]) & mask_[b]; }

  struct Entry {
    uint64_t id;
    uint64_t fp;
  };
  int blocks_;
  int shift_[4];
  uint64_t mask_[4];
  std::vector<std::unordered_map<uint64_t, std::vector<Entry>>> tables_;
  size_t size_ = 0;
};

}  // namespace surge::text
