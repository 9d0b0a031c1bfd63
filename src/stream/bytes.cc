#include "stream/bytes.h"

#include "stream/hash.h"

namespace surge::stream {

uint64_t ByteReader::Varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (!ok_ || pos_ >= in_.size()) {
      Fail("truncated varint");
      return 0;
    }
    uint8_t b = static_cast<uint8_t>(in_[pos_++]);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  Fail("varint longer than 10 bytes");
  return 0;
}

size_t ByteReader::Count(size_t min_item_bytes, std::string_view field) {
  uint64_t n = Varint();
  if (!ok_) return 0;
  if (min_item_bytes > 0 && n > remaining() / min_item_bytes) {
    Fail(fmt::format("{} count {} does not fit in the {} bytes left", field, n, remaining()));
    return 0;
  }
  return static_cast<size_t>(n);
}

std::string_view ByteReader::Str() {
  size_t n = Count(1, "string length");
  if (!ok_) return {};
  std::string_view s = in_.substr(pos_, n);
  pos_ += n;
  return s;
}

void ByteReader::Raw(void* p, size_t n) {
  if (!ok_ || n > remaining()) {
    Fail(fmt::format("truncated: needed {} bytes, {} left", n, ok_ ? remaining() : 0));
    std::memset(p, 0, n);
    return;
  }
  std::memcpy(p, in_.data() + pos_, n);
  pos_ += n;
}

void ByteReader::Fail(std::string_view message) {
  if (!ok_) return;
  ok_ = false;
  error_ = fmt::format("{} (at byte {} of {})", message, pos_, in_.size());
}

Status ByteReader::status() const {
  if (ok_) return Status::Ok();
  return DataLossError("corrupt {}: {}", what_, error_);
}

Status ByteReader::Finish() const {
  SURGE_RETURN_IF_ERROR(status());
  if (!done()) {
    return DataLossError("corrupt {}: {} unexpected bytes after the end", what_, remaining());
  }
  return Status::Ok();
}

void AppendFrame(uint8_t kind, uint8_t version, std::string_view payload, std::string* out) {
  ByteWriter w(out);
  w.Raw("SRG1", 4);
  w.U8(kind);
  w.U8(version);
  w.U64(payload.size());
  w.Raw(payload.data(), payload.size());
  w.U64(HashBytes(payload));
}

Result<Frame> ReadFrame(std::string_view in, uint8_t kind, uint8_t max_version,
                        std::string_view what, size_t* consumed) {
  constexpr size_t kHeader = 4 + 1 + 1 + 8;
  if (in.size() < kHeader + 8) {
    return DataLossError("{}: {} bytes is too short for a frame (at least {})", what, in.size(),
                         kHeader + 8);
  }
  if (in.substr(0, 4) != "SRG1") return DataLossError("{}: bad magic (expected SRG1)", what);
  ByteReader r(in.substr(4), what);
  uint8_t k = r.U8();
  uint8_t version = r.U8();
  uint64_t n = r.U64();
  if (k != kind) return DataLossError("{}: frame kind {} where {} was expected", what, k, kind);
  if (version == 0 || version > max_version) {
    return DataLossError("{}: format version {} is not supported (1..{})", what, version,
                         max_version);
  }
  if (n > in.size() - kHeader - 8) {
    return DataLossError("{}: truncated: payload of {} bytes, {} present", what, n,
                         in.size() - kHeader - 8);
  }
  std::string_view payload = in.substr(kHeader, n);
  uint64_t sum;
  std::memcpy(&sum, in.data() + kHeader + n, 8);
  if (sum != HashBytes(payload)) return DataLossError("{}: checksum mismatch", what);
  if (consumed) *consumed = kHeader + n + 8;
  return Frame{version, payload};
}

}  // namespace surge::stream
