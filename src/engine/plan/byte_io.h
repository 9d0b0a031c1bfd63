// Little-endian binary encoding helpers for plan files. ByteWriter appends; ByteReader reads from a
// span and checks every length against what is left, so a corrupt or hostile input produces a
// DataLoss error, never an out-of-bounds read. Both are single-threaded value types.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace surge::engine::plan {

static_assert(std::endian::native == std::endian::little,
              "plan files are little-endian and read by memcpy");

class ByteWriter {
 public:
  void U8(uint8_t v) { Raw(&v, 1); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void I64(int64_t v) { Raw(&v, 8); }
  void F64(double v) { Raw(&v, 8); }
  // u32 length, then the bytes.
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    Raw(s.data(), s.size());
  }
  void Raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  // Zero bytes up to a multiple of `alignment`.
  void PadTo(size_t alignment) {
    out_.resize((out_.size() + alignment - 1) / alignment * alignment);
  }

  size_t size() const { return out_.size(); }
  void Reserve(size_t bytes) { out_.reserve(bytes); }
  std::string& str() { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class ByteReader {
 public:
  // `what` names the input in error messages ("plan header", "graph section").
  ByteReader(std::span<const uint8_t> bytes, std::string_view what) : bytes_(bytes), what_(what) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

  Result<uint8_t> U8() { return Fixed<uint8_t>(); }
  Result<uint32_t> U32() { return Fixed<uint32_t>(); }
  Result<uint64_t> U64() { return Fixed<uint64_t>(); }
  Result<int64_t> I64() { return Fixed<int64_t>(); }
  Result<double> F64() { return Fixed<double>(); }

  // A u32-length-prefixed string of at most `max_len` bytes.
  Result<std::string> Str(size_t max_len = 1 << 20) {
    SURGE_ASSIGN_OR_RETURN(uint32_t n, U32());
    if (n > max_len) {
      return DataLossError("{}: string of {} bytes at offset {} exceeds the limit of {}", what_, n,
                           pos_ - 4, max_len);
    }
    SURGE_ASSIGN_OR_RETURN(auto b, Bytes(n));
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }

  // A view of the next `n` bytes.
  Result<std::span<const uint8_t>> Bytes(uint64_t n) {
    if (n > remaining()) {
      return DataLossError("{} is truncated: needs {} bytes at offset {}, only {} left", what_, n,
                           pos_, remaining());
    }
    auto s = bytes_.subspan(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

  // A count that must fit in what is left when each element takes at least `min_elem_bytes`:
  // rejects absurd counts before anything is allocated for them.
  Result<uint32_t> Count(std::string_view of, size_t min_elem_bytes) {
    SURGE_ASSIGN_OR_RETURN(uint32_t n, U32());
    if (min_elem_bytes > 0 && n > remaining() / min_elem_bytes) {
      return DataLossError("{}: {} {} cannot fit in the {} bytes left", what_, n, of, remaining());
    }
    return n;
  }

 private:
  template <typename T>
  Result<T> Fixed() {
    if (sizeof(T) > remaining()) {
      return DataLossError("{} is truncated: needs {} bytes at offset {}, only {} left", what_,
                           sizeof(T), pos_, remaining());
    }
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::span<const uint8_t> bytes_;
  std::string what_;
  size_t pos_ = 0;
};

}  // namespace surge::engine::plan
