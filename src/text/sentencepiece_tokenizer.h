// SentencePieceTokenizer: XLM-R / RoBERTa-style SentencePiece models behind the Tokenizer
// interface, through libsentencepiece.
//
// Ids follow fairseq's layout as XLM-R's tokenizer does: <s>=0, <pad>=1, </s>=2, <unk>=3, and every
// other SentencePiece id p becomes p + 1 (the model's own unknown id 0 becomes 3). A single
// sequence is "<s> A </s>", a pair "<s> A </s></s> B </s>"; type ids are all 0 (RoBERTa has no
// segment embeddings). Offsets are the byte ranges sentencepiece reports for each piece in the
// original text (a lone "▁" piece may be empty), plus the matching code point ranges; special
// tokens have (0, 0). Longest-first truncation as in HF.
//
// Thread safety: immutable after Load; libsentencepiece's encoder is const and thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "text/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace surge::text {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads a .model file (a serialized ModelProto).
  static Result<std::unique_ptr<SentencePieceTokenizer>> Load(const std::string& path);
  ~SentencePieceTokenizer() override;

  Status EncodeTo(std::string_view a, const std::string_view* b, const EncodeOptions& options,
                  Encoding* out) const override;
  int32_t vocab_size() const override;  // SentencePiece pieces + fairseq offset + <mask>
  int32_t pad_id() const override { return kPadId; }
  std::string_view IdToToken(int32_t id) const override;
  int32_t TokenToId(std::string_view token) const override;
  int NumSpecialTokens(bool pair) const override { return pair ? 4 : 2; }

  static constexpr int32_t kBosId = 0;
  static constexpr int32_t kPadId = 1;
  static constexpr int32_t kEosId = 2;
  static constexpr int32_t kUnkId = 3;
  static constexpr int32_t kFairseqOffset = 1;

 private:
  SentencePieceTokenizer();
  // Appends the pieces of `text` to `out` with type id 0.
  Status AppendPieces(std::string_view text, Encoding* out) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  int32_t num_pieces_ = 0;
};

}  // namespace surge::text
