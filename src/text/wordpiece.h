// WordPiece tokenization of single words by LinMaxMatch (Song et al., "Fast WordPiece
// Tokenization", EMNLP 2021): a byte trie over the vocabulary with precomputed failure links and
// failure pops, so each word is tokenized in one left-to-right pass, O(word length).
//
// The output is identical to Hugging Face's greedy longest-match-first WordPiece:
//   * at the start of a word candidates are plain tokens, afterwards `continuing_prefix` + rest;
//   * a word that cannot be covered completely becomes ONE unknown token spanning the whole word;
//   * a word longer than max_input_chars_per_word code points becomes one unknown token.
// Words containing '#' (never produced by the BERT pre-tokenizer, which isolates punctuation) can
// collide with the continuing prefix; they take the reference greedy path so they stay identical.
//
// Immutable after Create(); Tokenize() is const and thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace surge::text {

struct WordPieceOptions {
  std::string unk_token = "[UNK]";
  std::string continuing_prefix = "##";
  int max_input_chars_per_word = 100;
};

// One piece of a word: token id and its byte range within the word.
struct WordPiecePiece {
  int32_t id;
  uint32_t begin;
  uint32_t end;
};

class WordPiece {
 public:
  // `vocab[i]` is the token with id i. When a string occurs twice the later id wins (as in HF).
  // Fails when unk_token is missing, the vocabulary is empty or a token is not valid UTF-8.
  static Result<std::unique_ptr<WordPiece>> Create(std::vector<std::string> vocab,
                                                   WordPieceOptions options = {});

  // Appends the pieces of `word` (non-empty, valid UTF-8, `num_chars` code points) to `out`.
  void Tokenize(std::string_view word, size_t num_chars, std::vector<WordPiecePiece>* out) const;
  // Reference implementation (HF's greedy longest-match-first); for tests and '#' words.
  void TokenizeGreedy(std::string_view word, size_t num_chars,
                      std::vector<WordPiecePiece>* out) const;

  int32_t unk_id() const { return unk_id_; }
  int32_t size() const { return static_cast<int32_t>(vocab_.size()); }
  std::string_view IdToToken(int32_t id) const;
  int32_t TokenToId(std::string_view token) const;  // -1 when absent
  const WordPieceOptions& options() const { return options_; }

 private:
  struct Node {
    int32_t token = -1;  // token id ending here, -1 if none
    int32_t fail = -1;   // failure link, -1 = null
    uint32_t pops_begin = 0;
    uint32_t pops_len = 0;
    uint32_t edge_begin = 0;
    uint32_t edge_count = 0;
    int32_t dense = -1;  // index of a 256-entry child table, for nodes with many children
  };

  WordPiece() = default;
  void Build();
  int32_t Child(int32_t node, uint8_t byte) const {
    const Node& n = nodes_[node];
    if (n.dense >= 0) return dense_[(static_cast<size_t>(n.dense) << 8) | byte];
    const uint8_t* labels = edge_labels_.data() + n.edge_begin;
    for (uint32_t i = 0; i < n.edge_count; ++i) {
      if (labels[i] == byte) return edge_targets_[n.edge_begin + i];
      if (labels[i] > byte) break;
    }
    return -1;
  }

  WordPieceOptions options_;
  std::vector<std::string> vocab_;
  std::unordered_map<std::string_view, int32_t> token_to_id_;
  int32_t unk_id_ = -1;
  std::vector<uint32_t> match_len_;  // bytes of the word a token covers (prefix excluded)
  std::vector<Node> nodes_;          // nodes_[0] word-start root, nodes_[1] continuation root
  std::vector<uint8_t> edge_labels_;
  std::vector<int32_t> edge_targets_;
  std::vector<int32_t> dense_;
  std::vector<int32_t> pops_;
};

}  // namespace surge::text
