#include "core/aligned_buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace surge {

AlignedBuffer::AlignedBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  data_ = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, AlignUp(bytes)));
  if (data_ == nullptr) throw std::bad_alloc();
  std::memset(data_, 0, AlignUp(bytes));
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void AlignedBuffer::Reserve(size_t bytes) {
  if (bytes <= size_) return;
  *this = AlignedBuffer(bytes);
}

}  // namespace surge
