// Tokenizer: the interface between raw post text and the inference engine's integer inputs.
//
// Implementations (BertTokenizer, SentencePieceTokenizer) turn UTF-8 text into an Encoding: token
// ids plus everything a model or a caller needs to map tokens back to the text. Encodings follow
// Hugging Face `tokenizers` conventions so outputs can be compared one to one:
//   * special tokens ([CLS]/[SEP], <s>/</s>) are added unless EncodeOptions::add_special_tokens is
//     false; they have offsets (0, 0), special_tokens_mask 1 and attention_mask 1;
//   * for a pair, type id 0 covers the first sequence and its specials, 1 the second one;
//   * offsets are half-open ranges into the ORIGINAL (un-normalised) text, both in bytes and in
//   code
//     points (HF's Python API reports code points). Every invalid UTF-8 byte counts as one code
//     point (it decodes to U+FFFD, see text/utf8.h).
//   * truncation (max_length > 0) counts the special tokens; a pair is truncated longest-first.
//
// Thread safety: a Tokenizer is immutable after construction; every method is const and may be
// called from any number of threads at once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace surge::text {

// Longest text one call accepts (offsets are 32-bit); longer texts are an InvalidArgument error.
inline constexpr size_t kMaxTextBytes = 0xFFFFFFFFu;

// A half-open [begin, end) range.
using Offset = std::pair<uint32_t, uint32_t>;

struct Encoding {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;
  std::vector<int32_t> attention_mask;       // 1 for real tokens (specials included), 0 for padding
  std::vector<int32_t> special_tokens_mask;  // 1 for specials and padding
  std::vector<Offset> offsets;               // byte offsets into the original text
  std::vector<Offset> char_offsets;          // code point offsets into the original text

  size_t size() const { return ids.size(); }
  void Clear();
  // Appends one token.
  void Push(int32_t id, int32_t type_id, bool special, Offset bytes, Offset chars);
};

struct EncodeOptions {
  // Total length including special tokens; 0 means no truncation. Must leave room for the special
  // tokens (2 for a single sequence, 3 for a pair with BERT) when set.
  int max_length = 0;
  bool add_special_tokens = true;
};

enum class Padding {
  kNone,       // EncodeBatch only: rows keep their own lengths
  kLongest,    // pad every row to the longest row of the batch
  kMaxLength,  // pad every row to BatchOptions::max_length (which must then be > 0)
};

struct BatchOptions {
  int max_length = 0;  // truncation length (0: none); with kMaxLength also the padded length
  Padding padding = Padding::kLongest;
  bool add_special_tokens = true;
};

// Caller-owned row-major [batch, seq_len] outputs for EncodeBatchInto. `dtype` is kInt64 or
// kInt32 for all three; a null pointer skips that output.
struct BatchBuffers {
  DType dtype = DType::kInt64;
  void* input_ids = nullptr;
  void* attention_mask = nullptr;
  void* token_type_ids = nullptr;
  int64_t batch = 0;
  int64_t seq_len = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Encodes one sequence. Fails only on invalid options (max_length too small) or a text over
  // kMaxTextBytes.
  Result<Encoding> Encode(std::string_view text, const EncodeOptions& options = {}) const;
  // Encodes a pair (e.g. query and passage).
  Result<Encoding> EncodePair(std::string_view a, std::string_view b,
                              const EncodeOptions& options = {}) const;

  // Encodes `texts` (and `pairs`, when not empty: pairs.size() must equal texts.size()) with
  // truncation and padding. Padding uses pad_id(), type id 0, attention 0, offsets (0, 0).
  Result<std::vector<Encoding>> EncodeBatch(std::span<const std::string_view> texts,
                                            const BatchOptions& options = {},
                                            std::span<const std::string_view> pairs = {}) const;

  // The engine's entry point: writes input_ids / attention_mask / token_type_ids for every row
  // straight into `out` (row-major [batch, seq_len]). Rows are truncated to seq_len (and to
  // options.max_length when smaller and non-zero) and padded to seq_len; options.padding is
  // ignored. Reuses one scratch Encoding, so the steady state performs no heap allocation per
  // token.
  Status EncodeBatchInto(std::span<const std::string_view> texts, const BatchOptions& options,
                         const BatchBuffers& out,
                         std::span<const std::string_view> pairs = {}) const;
  // The same into Tensors of shape [batch, seq] and dtype kInt64 or kInt32 (all three alike;
  // attention_mask and token_type_ids may be null).
  Status EncodeBatchInto(std::span<const std::string_view> texts, const BatchOptions& options,
                         Tensor* input_ids, Tensor* attention_mask, Tensor* token_type_ids,
                         std::span<const std::string_view> pairs = {}) const;

  // Low-level form of Encode/EncodePair reusing `out`'s storage (cleared first). `b` is null for a
  // single sequence.
  virtual Status EncodeTo(std::string_view a, const std::string_view* b,
                          const EncodeOptions& options, Encoding* out) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t pad_id() const = 0;
  // The token string for an id ("" when out of range).
  virtual std::string_view IdToToken(int32_t id) const = 0;
  // -1 when `token` is not in the vocabulary.
  virtual int32_t TokenToId(std::string_view token) const = 0;
  // Special tokens added to one sequence (single = false: to a pair).
  virtual int NumSpecialTokens(bool pair) const = 0;
};

// HF's longest-first pair truncation: given the lengths of the two sequences (without specials)
// and the budget `max_tokens` left for them, returns how many tokens of each to keep.
std::pair<size_t, size_t> LongestFirstLengths(size_t n1, size_t n2, size_t max_tokens);

}  // namespace surge::text
