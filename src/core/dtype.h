// Element types shared by the IR, plans and runtimes. Values match ONNX TensorProto.DataType so
// importers can map them directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace surge {

enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kBFloat16 = 16,
  kFloat8E4M3 = 17,
};

// Bytes per element; 0 for kUndefined.
size_t DTypeSize(DType t);
std::string_view DTypeName(DType t);
// Parses names as printed by DTypeName ("float32", "int64", ...).
Result<DType> ParseDType(std::string_view name);
// Maps an ONNX TensorProto.DataType number; unknown or unsupported numbers are an error.
Result<DType> DTypeFromOnnx(int onnx_type);
bool IsFloating(DType t);

// IEEE half / bfloat16 conversions (round to nearest even).
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
uint16_t FloatToBFloat16(float f);
float BFloat16ToFloat(uint16_t b);

}  // namespace surge
