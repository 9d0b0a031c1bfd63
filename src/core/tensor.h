// Tensor: a dtype, a concrete shape and bytes. Either owns an aligned buffer or views memory owned
// elsewhere (a mapped plan file, an arena). Copying a Tensor copies the view, sharing ownership of
// an owned buffer. Not thread-safe for concurrent writes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/dtype.h"
#include "core/status.h"

namespace surge {

using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);  // "[2,128,768]"
// Parses "2x128x768" (the CLI form).
Result<Shape> ParseShape(std::string_view text);

class Tensor {
 public:
  Tensor() = default;
  // Allocates an owned, zero-filled tensor.
  Tensor(DType dtype, Shape shape);
  // Views `data` (not owned; must outlive every copy of this Tensor).
  static Tensor View(DType dtype, Shape shape, void* data);
  static Tensor View(DType dtype, Shape shape, const void* data) {
    return View(dtype, std::move(shape), const_cast<void*>(data));
  }

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return NumElements(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }
  bool empty() const { return data_ == nullptr && numel() != 0; }
  bool defined() const { return dtype_ != DType::kUndefined; }

  void* data() { return data_; }
  const void* data() const { return data_; }
  template <typename T>
  T* data_as() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data_as() const {
    return static_cast<const T*>(data_);
  }
  template <typename T>
  std::span<const T> span() const {
    return {data_as<T>(), static_cast<size_t>(numel())};
  }
  template <typename T>
  std::span<T> span() {
    return {data_as<T>(), static_cast<size_t>(numel())};
  }

  // Same bytes, new shape with the same element count.
  Result<Tensor> Reshaped(Shape shape) const;
  // A deep copy that owns its memory.
  Tensor Clone() const;
  // Converts to float32 (from float16/bfloat16/float64/integers) as a new owned tensor.
  Tensor ToFloat32() const;
  // Converts a float32 tensor to `dtype` as a new owned tensor (float16/bfloat16/float32).
  Tensor CastFromFloat32(DType dtype) const;
  // Reads an element as double / int64 whatever the dtype (slow; for tests and constant folding).
  double GetDouble(int64_t i) const;
  int64_t GetInt(int64_t i) const;

 private:
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  void* data_ = nullptr;
  std::shared_ptr<AlignedBuffer> owned_;
};

}  // namespace surge
