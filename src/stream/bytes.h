// Little-endian binary writer and bounds-checked reader: the building blocks of the record codecs
// (codec.h) and of stage snapshots. Varints are LEB128; signed varints are zig-zag encoded; floats
// are IEEE-754 bit patterns. The reader never reads past its input: every accessor checks the
// remaining length, and the first failure sticks (later reads return zeros) so a decoder can read
// a whole structure and check status() once.
//
// Thread safety: none (one writer or reader per thread); both are cheap to create.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace surge::stream {

class ByteWriter {
 public:
  explicit ByteWriter(std::string* out) : out_(out) {}

  void U8(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void F32(float v) { Raw(&v, 4); }
  void F64(double v) { Raw(&v, 8); }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      out_->push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    out_->push_back(static_cast<char>(v));
  }
  void Svarint(int64_t v) {
    Varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void Str(std::string_view s) {
    Varint(s.size());
    out_->append(s);
  }
  void Raw(const void* p, size_t n) { out_->append(static_cast<const char*>(p), n); }
  template <typename T>
  void PodVector(const std::vector<T>& v) {
    Varint(v.size());
    if (!v.empty()) Raw(v.data(), v.size() * sizeof(T));
  }
  size_t size() const { return out_->size(); }
  std::string* out() { return out_; }

 private:
  std::string* out_;
};

class ByteReader {
 public:
  // `what` names the structure for error messages ("term batch", "detect snapshot").
  ByteReader(std::string_view in, std::string_view what) : in_(in), what_(what) {}

  uint8_t U8() {
    uint8_t v = 0;
    Raw(&v, 1);
    return v;
  }
  uint32_t U32() {
    uint32_t v = 0;
    Raw(&v, 4);
    return v;
  }
  uint64_t U64() {
    uint64_t v = 0;
    Raw(&v, 8);
    return v;
  }
  float F32() {
    float v = 0;
    Raw(&v, 4);
    return v;
  }
  double F64() {
    double v = 0;
    Raw(&v, 8);
    return v;
  }
  uint64_t Varint();
  int64_t Svarint() {
    uint64_t u = Varint();
    return static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1);
  }
  // A count of items about to be read, each at least `min_item_bytes` long: fails (instead of
  // letting a corrupt count allocate gigabytes) when the rest of the input cannot hold them.
  size_t Count(size_t min_item_bytes, std::string_view field);
  std::string_view Str();
  void Raw(void* p, size_t n);
  template <typename T>
  void PodVector(std::vector<T>* v, std::string_view field) {
    size_t n = Count(sizeof(T), field);
    v->resize(n);
    if (n) Raw(v->data(), n * sizeof(T));
  }

  // Marks the input invalid with a message (first failure wins).
  void Fail(std::string_view message);
  bool ok() const { return ok_; }
  size_t position() const { return pos_; }
  size_t remaining() const { return in_.size() - pos_; }
  bool done() const { return pos_ == in_.size(); }
  // OK, or DataLoss naming the structure, the byte position and what was wrong.
  Status status() const;
  // status(), plus an error when bytes are left over.
  Status Finish() const;

 private:
  std::string_view in_;
  std::string_view what_;
  size_t pos_ = 0;
  bool ok_ = true;
  std::string error_;
};

// Framed, versioned, checksummed blobs (snapshots, checkpoint payloads):
//   magic "SRG1" | kind (u8) | version (u8) | payload length (u64) | payload | xxh3-64 of payload
// AppendFrame writes one; ReadFrame checks magic, kind, version (<= max_version) and checksum and
// returns the payload and its version.
void AppendFrame(uint8_t kind, uint8_t version, std::string_view payload, std::string* out);
struct Frame {
  uint8_t version = 0;
  std::string_view payload;
};
Result<Frame> ReadFrame(std::string_view in, uint8_t kind, uint8_t max_version,
                        std::string_view what, size_t* consumed = nullptr);

}  // namespace surge::stream
