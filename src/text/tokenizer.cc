#include "text/tokenizer.h"

#include <algorithm>

namespace surge::text {

void Encoding::Clear() {
  ids.clear();
  type_ids.clear();
  attention_mask.clear();
  special_tokens_mask.clear();
  offsets.clear();
  char_offsets.clear();
}

void Encoding::Push(int32_t id, int32_t type_id, bool special, Offset bytes, Offset chars) {
  ids.push_back(id);
  type_ids.push_back(type_id);
  attention_mask.push_back(1);
  special_tokens_mask.push_back(special ? 1 : 0);
  offsets.push_back(bytes);
  char_offsets.push_back(chars);
}

std::pair<size_t, size_t> LongestFirstLengths(size_t n1, size_t n2, size_t max_tokens) {
  if (n1 + n2 <= max_tokens) return {n1, n2};
  bool swap = n1 > n2;
  if (swap) std::swap(n1, n2);
  // n1 is now the shorter one: keep it whole if the longer one can absorb the cut, else halve.
  n2 = n1 > max_tokens ? n1 : std::max(n1, max_tokens - n1);
  if (n1 + n2 > max_tokens) {
    n1 = max_tokens / 2;
    n2 = n1 + max_tokens % 2;
  }
  if (swap) std::swap(n1, n2);
  return {n1, n2};
}

Result<Encoding> Tokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  Encoding out;
  SURGE_RETURN_IF_ERROR(EncodeTo(text, nullptr, options, &out));
  return out;
}

Result<Encoding> Tokenizer::EncodePair(std::string_view a, std::string_view b,
                                       const EncodeOptions& options) const {
  Encoding out;
  SURGE_RETURN_IF_ERROR(EncodeTo(a, &b, options, &out));
  return out;
}

namespace {

Status CheckBatch(std::span<const std::string_view> texts,
                  std::span<const std::string_view> pairs) {
  if (!pairs.empty() && pairs.size() != texts.size()) {
    return InvalidArgumentError("pair batch has {} second sequences for {} first sequences",
                                pairs.size(), texts.size());
  }
  return Status::Ok();
}

void PadTo(Encoding* e, size_t length, int32_t pad_id) {
  if (e->size() >= length) return;
  e->ids.resize(length, pad_id);
  e->type_ids.resize(length, 0);
  e->attention_mask.resize(length, 0);
  e->special_tokens_mask.resize(length, 1);
  e->offsets.resize(length, {0, 0});
  e->char_offsets.resize(length, {0, 0});
}

template <typename T>
void WriteRow(const Encoding& e, const BatchBuffers& out, int64_t row, int32_t pad_id) {
  const size_t seq = static_cast<size_t>(out.seq_len);
  const size_t n = std::min(e.size(), seq);
  const size_t base = static_cast<size_t>(row) * seq;
  if (out.input_ids) {
    T* dst = static_cast<T*>(out.input_ids) + base;
    for (size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(e.ids[i]);
    std::fill(dst + n, dst + seq, static_cast<T>(pad_id));
  }
  if (out.attention_mask) {
    T* dst = static_cast<T*>(out.attention_mask) + base;
    std::fill(dst, dst + n, T{1});
    std::fill(dst + n, dst + seq, T{0});
  }
  if (out.token_type_ids) {
    T* dst = static_cast<T*>(out.token_type_ids) + base;
    for (size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(e.type_ids[i]);
    std::fill(dst + n, dst + seq, T{0});
  }
}

}  // namespace

Result<std::vector<Encoding>> Tokenizer::EncodeBatch(
    std::span<const std::string_view> texts, const BatchOptions& options,
    std::span<const std::string_view> pairs) const {
  SURGE_RETURN_IF_ERROR(CheckBatch(texts, pairs));
  if (options.padding == Padding::kMaxLength && options.max_length <= 0) {
    return InvalidArgumentError("padding to max_length needs max_length > 0, got {}",
                                options.max_length);
  }
  EncodeOptions eo{options.max_length, options.add_special_tokens};
  std::vector<Encoding> out(texts.size());
  size_t longest = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    SURGE_RETURN_IF_ERROR(EncodeTo(texts[i], pairs.empty() ? nullptr : &pairs[i], eo, &out[i]));
    longest = std::max(longest, out[i].size());
  }
  size_t target = options.padding == Padding::kLongest     ? longest
                  : options.padding == Padding::kMaxLength ? static_cast<size_t>(options.max_length)
                                                           : 0;
  for (Encoding& e : out) PadTo(&e, target, pad_id());
  return out;
}

Status Tokenizer::EncodeBatchInto(std::span<const std::string_view> texts,
                                  const BatchOptions& options, const BatchBuffers& out,
                                  std::span<const std::string_view> pairs) const {
  SURGE_RETURN_IF_ERROR(CheckBatch(texts, pairs));
  if (out.dtype != DType::kInt64 && out.dtype != DType::kInt32) {
    return InvalidArgumentError("token buffers must be int64 or int32, got {}",
                                DTypeName(out.dtype));
  }
  if (out.batch != static_cast<int64_t>(texts.size())) {
    return InvalidArgumentError("token buffers have {} rows for a batch of {}", out.batch,
                                texts.size());
  }
  const int need = NumSpecialTokens(!pairs.empty());
  if (out.seq_len < need || out.seq_len > (int64_t{1} << 30)) {
    return InvalidArgumentError("sequence length {} must be in [{}, 2^30]", out.seq_len, need);
  }
  EncodeOptions eo;
  eo.add_special_tokens = options.add_special_tokens;
  eo.max_length = static_cast<int>(out.seq_len);
  if (options.max_length > 0) eo.max_length = std::min(eo.max_length, options.max_length);
  thread_local Encoding scratch;
  for (size_t i = 0; i < texts.size(); ++i) {
    SURGE_RETURN_IF_ERROR(EncodeTo(texts[i], pairs.empty() ? nullptr : &pairs[i], eo, &scratch));
    if (out.dtype == DType::kInt64) {
      WriteRow<int64_t>(scratch, out, static_cast<int64_t>(i), pad_id());
    } else {
      WriteRow<int32_t>(scratch, out, static_cast<int64_t>(i), pad_id());
    }
  }
  return Status::Ok();
}

Status Tokenizer::EncodeBatchInto(std::span<const std::string_view> texts,
                                  const BatchOptions& options, Tensor* input_ids,
                                  Tensor* attention_mask, Tensor* token_type_ids,
                                  std::span<const std::string_view> pairs) const {
  if (input_ids == nullptr) return InvalidArgumentError("input_ids tensor is required");
  const Shape& shape = input_ids->shape();
  if (shape.size() != 2) {
    return InvalidArgumentError("input_ids must have shape [batch, seq], got {}",
                                ShapeToString(shape));
  }
  for (Tensor* t : {attention_mask, token_type_ids}) {
    if (t != nullptr && (t->shape() != shape || t->dtype() != input_ids->dtype())) {
      return InvalidArgumentError(
          "attention_mask/token_type_ids must match input_ids ({} {}), got {} {}",
          DTypeName(input_ids->dtype()), ShapeToString(shape), DTypeName(t->dtype()),
          ShapeToString(t->shape()));
    }
  }
  for (Tensor* t : {input_ids, attention_mask, token_type_ids}) {
    if (t != nullptr && t->data() == nullptr && t->numel() != 0) {
      return InvalidArgumentError("token tensor has no storage");
    }
  }
  BatchBuffers buffers;
  buffers.dtype = input_ids->dtype();
  buffers.input_ids = input_ids->data();
  buffers.attention_mask = attention_mask ? attention_mask->data() : nullptr;
  buffers.token_type_ids = token_type_ids ? token_type_ids->data() : nullptr;
  buffers.batch = shape[0];
  buffers.seq_len = shape[1];
  return EncodeBatchInto(texts, options, buffers, pairs);
}

}  // namespace surge::text
