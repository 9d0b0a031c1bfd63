#include "text/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <tuple>

#include "text/utf8.h"

namespace surge::text {
namespace {

constexpr std::string_view kFairseqTokens[] = {"<s>", "<pad>", "</s>", "<unk>"};
constexpr std::string_view kMaskToken = "<mask>";

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer()
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

Result<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Load(
    const std::string& path) {
  std::unique_ptr<SentencePieceTokenizer> tok(new SentencePieceTokenizer());
  auto status = tok->sp_->Load(path);
  if (!status.ok()) {
    return InvalidArgumentError("cannot load SentencePiece model '{}': {}", path,
                                status.ToString());
  }
  tok->num_pieces_ = tok->sp_->GetPieceSize();
  if (tok->num_pieces_ <= 0) return InvalidArgumentError("SentencePiece model '{}' is empty", path);
  return tok;
}

int32_t SentencePieceTokenizer::vocab_size() const { return num_pieces_ + kFairseqOffset + 1; }

std::string_view SentencePieceTokenizer::IdToToken(int32_t id) const {
  if (id >= 0 && id < 4) return kFairseqTokens[id];
  if (id == num_pieces_ + kFairseqOffset) return kMaskToken;
  if (id < 0 || id > num_pieces_) return {};
  return sp_->IdToPiece(id - kFairseqOffset);
}

int32_t SentencePieceTokenizer::TokenToId(std::string_view token) const {
  for (int32_t i = 0; i < 4; ++i) {
    if (token == kFairseqTokens[i]) return i;
  }
  if (token == kMaskToken) return num_pieces_ + kFairseqOffset;
  int32_t id = sp_->PieceToId(std::string(token));
  if (id == sp_->unk_id() && token != sp_->IdToPiece(id)) return -1;
  return id == sp_->unk_id() ? kUnkId : id + kFairseqOffset;
}

Status SentencePieceTokenizer::AppendPieces(std::string_view text, Encoding* out) const {
  sentencepiece::ImmutableSentencePieceText spt =
      sp_->EncodeAsImmutableProto(absl::string_view(text.data(), text.size()));
  // Code point index of a byte boundary, found by walking forward from the last one asked for.
  uint32_t pos = 0, chars = 0;
  auto char_at = [&](uint32_t byte) {
    if (byte < pos) pos = chars = 0;
    while (pos < byte && pos < text.size()) {
      pos += DecodeUtf8At(text, pos).length;
      ++chars;
    }
    return chars;
  };
  for (size_t i = 0; i < spt.pieces_size(); ++i) {
    auto piece = spt.pieces(static_cast<int>(i));
    uint32_t begin = std::min<uint32_t>(piece.begin(), static_cast<uint32_t>(text.size()));
    uint32_t end = std::clamp<uint32_t>(piece.end(), begin, static_cast<uint32_t>(text.size()));
    uint32_t cb = char_at(begin);
    uint32_t ce = char_at(end);
    int32_t sid = static_cast<int32_t>(piece.id());
    int32_t id = sid == sp_->unk_id() ? kUnkId : sid + kFairseqOffset;
    out->Push(id, 0, false, {begin, end}, {cb, ce});
  }
  return Status::Ok();
}

Status SentencePieceTokenizer::EncodeTo(std::string_view a, const std::string_view* b,
                                        const EncodeOptions& options, Encoding* out) const {
  if (a.size() > kMaxTextBytes || (b && b->size() > kMaxTextBytes)) {
    return InvalidArgumentError("text of {} bytes is over the {}-byte limit of 32-bit offsets",
                                std::max(a.size(), b ? b->size() : 0), kMaxTextBytes);
  }
  const bool specials = options.add_special_tokens;
  const int num_special = specials ? NumSpecialTokens(b != nullptr) : 0;
  if (options.max_length < 0 || (options.max_length > 0 && options.max_length < num_special)) {
    return InvalidArgumentError(
        "max_length {} is too small: it must be 0 (no truncation) or at least {} to hold the "
        "special tokens",
        options.max_length, num_special);
  }
  const size_t budget =
      options.max_length > 0 ? static_cast<size_t>(options.max_length - num_special) : SIZE_MAX;
  out->Clear();
  Encoding first, second;
  SURGE_RETURN_IF_ERROR(AppendPieces(a, &first));
  if (b) SURGE_RETURN_IF_ERROR(AppendPieces(*b, &second));
  size_t n1 = first.size(), n2 = second.size();
  if (n1 + n2 > budget) {
    if (b) {
      std::tie(n1, n2) = LongestFirstLengths(n1, n2, budget);
    } else {
      n1 = budget;
    }
  }
  if (specials) out->Push(kBosId, 0, true, {0, 0}, {0, 0});
  for (size_t i = 0; i < n1; ++i) {
    out->Push(first.ids[i], 0, false, first.offsets[i], first.char_offsets[i]);
  }
  if (specials) out->Push(kEosId, 0, true, {0, 0}, {0, 0});
  if (b) {
    if (specials) out->Push(kEosId, 0, true, {0, 0}, {0, 0});
    for (size_t i = 0; i < n2; ++i) {
      out->Push(second.ids[i], 0, false, second.offsets[i], second.char_offsets[i]);
    }
    if (specials) out->Push(kEosId, 0, true, {0, 0}, {0, 0});
  }
  return Status::Ok();
}

}  // namespace surge::text
