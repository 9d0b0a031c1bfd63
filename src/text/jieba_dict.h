// Prefix dictionary in jieba's format ("word freq [tag]" per line, UTF-8).
//
// jieba keeps a map FREQ from every dictionary word *and every prefix of a word* to a frequency
// (0 for pure prefixes). PrefixDict stores the same relation as a trie over code points whose
// nodes live in one flat open-addressing hash table keyed by (parent node, code point): a lookup
// step is one multiply-shift hash and, usually, one cache line. A node's existence means "the
// string is in FREQ"; its frequency may be 0. The structure is immutable after Load(); run-time
// additions live in a small overlay owned by the Segmenter (see segmenter.h).
//
// Thread safety: const methods are safe to call concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace surge::text {

class PrefixDict {
 public:
  using NodeId = uint32_t;
  static constexpr NodeId kRoot = 0;
  static constexpr NodeId kNone = 0xFFFFFFFFu;

  // Parses jieba's dictionary text. Blank lines are skipped; any other line must be
  // "word freq" optionally followed by " tag" and is otherwise a DataLoss error naming the line.
  // `source` names the input in error messages.
  static Result<PrefixDict> Parse(std::string_view contents, std::string_view source);
  static Result<PrefixDict> Load(const std::string& path);

  // Child of `node` for code point `cp`, or kNone.
  NodeId Child(NodeId node, char32_t cp) const {
    uint64_t key = MakeKey(node, cp);
    size_t i = Slot(key);
    while (true) {
      const Entry& e = table_[i];
      if (e.key == key) return static_cast<NodeId>(i + 1);
      if (e.key == 0) return kNone;
      i = (i + 1) & mask_;
    }
  }
  // Frequency (0 for pure prefixes) of a node other than the root.
  int64_t Freq(NodeId node) const { return freqs_[node - 1]; }
  // log(freq) of a node other than the root, or -1 when its frequency is 0 (kept next to the
  // key so the hot DAG walk touches one cache line per step).
  double LogFreq(NodeId node) const { return table_[node - 1].log_freq; }

  // Node of a whole UTF-8 string (kNone when absent; invalid bytes never match).
  NodeId Find(std::string_view utf8) const;

  int64_t total() const { return total_; }
  size_t num_words() const { return num_words_; }
  size_t num_nodes() const { return num_nodes_; }
  size_t memory_bytes() const {
    return table_.size() * sizeof(Entry) + freqs_.size() * sizeof(int64_t);
  }

 private:
  struct Entry {
    uint64_t key = 0;  // MakeKey(parent, cp); 0 = empty slot
    double log_freq = -1.0;
  };
  static uint64_t MakeKey(NodeId parent, char32_t cp) {
    return ((static_cast<uint64_t>(parent) << 21) | static_cast<uint64_t>(cp)) + 1;
  }
  size_t Slot(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  NodeId Insert(NodeId parent, char32_t cp);

  std::vector<Entry> table_;
  std::vector<int64_t> freqs_;  // per slot, read off the hot path
  size_t mask_ = 0;
  int shift_ = 64;
  int64_t total_ = 0;
  size_t num_words_ = 0;
  size_t num_nodes_ = 0;
};

}  // namespace surge::text
