// BertTokenizer: BERT WordPiece tokenization identical to Hugging Face `tokenizers`
// (BertWordPieceTokenizer = BertNormalizer + BertPreTokenizer + WordPiece + BertProcessing).
//
// Pipeline, per code point of the original text, in HF's order:
//   0. added tokens: the special tokens of the vocabulary ([PAD] [UNK] [CLS] [SEP] [MASK], or the
//      "added_tokens" of tokenizer.json) are matched literally, case-sensitively, in the raw text
//      and become single tokens (special_tokens_mask 0, as in HF);
//   1. clean_text: drop U+0000, U+FFFD and control/format/private-use characters (Cc except
//      TAB/LF/CR, Cf, Co); map whitespace to a word break;
//   2. handle_chinese_chars: every CJK ideograph becomes a word of its own. The ranges are those of
//      the Rust crate, which differ from Python `transformers` in one block: U+2B820..U+2B91F is
//      NOT treated as Chinese here (see unicode::IsBertChineseChar);
//   3. strip_accents (default: = lowercase): canonical decomposition (NFD), then drop Mn marks;
//   4. lowercase: full Unicode lowercase mapping (Rust char::to_lowercase; may lengthen text);
//   5. pre-tokenize: split on whitespace (removed) and isolate every punctuation character (ASCII
//      punctuation or Unicode P*);
//   6. WordPiece (LinMaxMatch, see wordpiece.h) with "##" continuation, [UNK] for a word that
//      cannot be covered or has more than max_input_chars_per_word (100) code points;
//   7. post-process: [CLS] A [SEP] (B [SEP]), type ids 0 for A, 1 for B.
// Offsets map every token back to the original text: a token covers the original characters its
// normalised characters came from (a lowercase expansion such as 'İ' -> "i\u0307" keeps the whole
// 'İ'). Invalid UTF-8 bytes decode to U+FFFD one byte at a time (text/utf8.h), which clean_text
// removes; without clean_text they go through WordPiece like any other character.
//
// Known difference: HF applies NFD to the whole string, which also reorders combining marks of
// different classes; Surge decomposes per code point. The two differ only for sequences of several
// combining marks out of canonical order of which some are NOT nonspacing (Mn) and therefore kept
// by strip_accents, or when strip_accents is on with lowercase off and such marks survive.
//
// Immutable after creation; all methods are thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"
#include "text/wordpiece.h"

namespace surge::text {

struct BertOptions {
  bool lowercase = true;
  std::optional<bool> strip_accents;  // unset: same as lowercase
  bool clean_text = true;
  bool handle_chinese_chars = true;
  std::string unk_token = "[UNK]";
  std::string cls_token = "[CLS]";
  std::string sep_token = "[SEP]";
  std::string pad_token = "[PAD]";
  std::string mask_token = "[MASK]";
  std::string continuing_prefix = "##";
  int max_input_chars_per_word = 100;
  // Strings matched literally in the raw text before normalisation. Unset: the special tokens
  // above that are in the vocabulary (as BertWordPieceTokenizer does).
  std::optional<std::vector<std::string>> added_tokens;
};

class BertTokenizer final : public Tokenizer {
 public:
  // `vocab[i]` is the token with id i. Fails when [UNK], [CLS] or [SEP] is missing.
  static Result<std::unique_ptr<BertTokenizer>> FromVocab(std::vector<std::string> vocab,
                                                          BertOptions options = {});
  // A vocab.txt file: one token per line, id = line number - 1 (trailing whitespace trimmed).
  static Result<std::unique_ptr<BertTokenizer>> FromVocabFile(const std::string& path,
                                                              BertOptions options = {});
  // A HF tokenizer.json with a WordPiece model. Reads the BertNormalizer flags (lowercase,
  // strip_accents, handle_chinese_chars, clean_text), the model's unk token, prefix and word limit,
  // the added tokens, and the [CLS]/[SEP] of a BertProcessing or TemplateProcessing post-processor.
  static Result<std::unique_ptr<BertTokenizer>> FromTokenizerJson(const std::string& path);
  static Result<std::unique_ptr<BertTokenizer>> FromTokenizerJsonString(std::string_view json,
                                                                        std::string_view origin);

  Status EncodeTo(std::string_view a, const std::string_view* b, const EncodeOptions& options,
                  Encoding* out) const override;
  int32_t vocab_size() const override { return wordpiece_->size(); }
  int32_t pad_id() const override { return pad_id_; }
  std::string_view IdToToken(int32_t id) const override { return wordpiece_->IdToToken(id); }
  int32_t TokenToId(std::string_view token) const override { return wordpiece_->TokenToId(token); }
  int NumSpecialTokens(bool pair) const override { return add_specials_ ? (pair ? 3 : 2) : 0; }

  const BertOptions& options() const { return options_; }
  const WordPiece& wordpiece() const { return *wordpiece_; }
  // Appends the tokens of `text` (no special tokens) with type id `type_id` to `out`.
  void AppendTokens(std::string_view text, int32_t type_id, Encoding* out) const;

 private:
  struct Scratch;
  class Run;
  BertTokenizer() = default;

  BertOptions options_;
  bool strip_accents_ = true;
  bool add_specials_ = true;  // false for a tokenizer.json without post-processor
  std::unique_ptr<WordPiece> wordpiece_;
  int32_t cls_id_ = -1;
  int32_t sep_id_ = -1;
  int32_t pad_id_ = 0;
  // ASCII fast path: what each byte < 0x80 does, and what it becomes.
  uint8_t ascii_action_[128] = {};
  char ascii_map_[128] = {};
  // Added tokens, longest first, with the set of their first bytes.
  std::vector<std::pair<std::string, int32_t>> added_;
  bool added_first_[256] = {};
};

}  // namespace surge::text
