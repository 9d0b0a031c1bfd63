#include "core/tensor.h"

#include <charconv>
#include <cstring>

namespace surge {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Result<Shape> ParseShape(std::string_view text) {
  Shape shape;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('x', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view part = text.substr(pos, end - pos);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || p != part.data() + part.size() || v < 0) {
      return InvalidArgumentError("bad shape '{}': expected dimensions like 8x128", text);
    }
    shape.push_back(v);
    pos = end + 1;
  }
  return shape;
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  size_t bytes = nbytes();
  owned_ = std::make_shared<AlignedBuffer>(bytes == 0 ? kAlignment : bytes);
  data_ = owned_->data();
}

Tensor Tensor::View(DType dtype, Shape shape, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  return t;
}

Result<Tensor> Tensor::Reshaped(Shape shape) const {
  if (NumElements(shape) != numel()) {
    return InvalidArgumentError("cannot reshape {} to {}", ShapeToString(shape_),
                                ShapeToString(shape));
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t(dtype_, shape_);
  if (nbytes()) std::memcpy(t.data_, data_, nbytes());
  return t;
}

double Tensor::GetDouble(int64_t i) const {
  switch (dtype_) {
    case DType::kFloat32:
      return data_as<float>()[i];
    case DType::kFloat64:
      return data_as<double>()[i];
    case DType::kFloat16:
      return HalfToFloat(data_as<uint16_t>()[i]);
    case DType::kBFloat16:
      return BFloat16ToFloat(data_as<uint16_t>()[i]);
    case DType::kInt64:
      return static_cast<double>(data_as<int64_t>()[i]);
    case DType::kInt32:
      return data_as<int32_t>()[i];
    case DType::kInt8:
      return data_as<int8_t>()[i];
    case DType::kUInt8:
      return data_as<uint8_t>()[i];
    case DType::kBool:
      return data_as<uint8_t>()[i] ? 1.0 : 0.0;
    default:
      SURGE_CHECK(false, "GetDouble on {}", DTypeName(dtype_));
  }
  return 0;
}

int64_t Tensor::GetInt(int64_t i) const {
  switch (dtype_) {
    case DType::kInt64:
      return data_as<int64_t>()[i];
    case DType::kInt32:
      return data_as<int32_t>()[i];
    case DType::kInt8:
      return data_as<int8_t>()[i];
    case DType::kUInt8:
    case DType::kBool:
      return data_as<uint8_t>()[i];
    default:
      return static_cast<int64_t>(GetDouble(i));
  }
}

Tensor Tensor::ToFloat32() const {
  if (dtype_ == DType::kFloat32) return Clone();
  Tensor t(DType::kFloat32, shape_);
  float* out = t.data_as<float>();
  int64_t n = numel();
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(GetDouble(i));
  return t;
}

Tensor Tensor::CastFromFloat32(DType dtype) const {
  SURGE_CHECK(dtype_ == DType::kFloat32);
  if (dtype == DType::kFloat32) return Clone();
  Tensor t(dtype, shape_);
  const float* in = data_as<float>();
  int64_t n = numel();
  uint16_t* out = t.data_as<uint16_t>();
  SURGE_CHECK(dtype == DType::kFloat16 || dtype == DType::kBFloat16, "cast to {}",
              DTypeName(dtype));
  for (int64_t i = 0; i < n; ++i) {
    out[i] = dtype == DType::kFloat16 ? FloatToHalf(in[i]) : FloatToBFloat16(in[i]);
  }
  return t;
}

}  // namespace surge
