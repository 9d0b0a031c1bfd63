// Little-endian writer/reader for the CPU backend's tactics blob. The reader checks every length
// against what is left and reports a DataLoss error naming the blob, never reading out of bounds.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace surge::engine::cpu {

class BlobWriter {
 public:
  template <typename T>
  void Put(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void Str(std::string_view s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  void Raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  void PadTo(size_t a) { out_.resize((out_.size() + a - 1) / a * a, '\0'); }
  size_t size() const { return out_.size(); }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class BlobReader {
 public:
  explicit BlobReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

  template <typename T>
  Result<T> Get() {
    if (sizeof(T) > remaining()) return Truncated(sizeof(T));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  Result<std::string> Str(size_t max_len = 4096) {
    SURGE_ASSIGN_OR_RETURN(uint32_t n, Get<uint32_t>());
    if (n > max_len || n > remaining()) {
      return DataLossError("CPU tactics blob: string of {} bytes at offset {} is too long", n,
                           pos_ - 4);
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  Result<std::span<const uint8_t>> Bytes(uint64_t n) {
    if (n > remaining()) return Truncated(n);
    auto s = bytes_.subspan(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  // A view of [offset, offset+n) of the whole blob.
  Result<std::span<const uint8_t>> At(uint64_t offset, uint64_t n) const {
    if (offset > bytes_.size() || n > bytes_.size() - offset) {
      return DataLossError("CPU tactics blob: range [{}, +{}) lies outside its {} bytes", offset, n,
                           bytes_.size());
    }
    return bytes_.subspan(static_cast<size_t>(offset), static_cast<size_t>(n));
  }

 private:
  Status Truncated(uint64_t need) const {
    return DataLossError("CPU tactics blob is truncated: needs {} bytes at offset {}, {} left",
                         need, pos_, remaining());
  }
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

}  // namespace surge::engine::cpu
