// A heap buffer aligned to 64 bytes (cache line, AVX-512 vector). Move-only; zero-initialised.
#pragma once

#include <cstddef>
#include <cstdint>

namespace surge {

inline constexpr size_t kAlignment = 64;

inline constexpr size_t AlignUp(size_t n, size_t a = kAlignment) { return (n + a - 1) / a * a; }

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept : data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  // Grows to at least `bytes` (contents are not kept when it reallocates).
  void Reserve(size_t bytes);

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace surge
