#include "serve/infer.h"

#include <cstring>

namespace surge::serve {

Result<DType> DTypeFromDatatype(std::string_view d) {
  if (d == "BOOL") return DType::kBool;
  if (d == "UINT8") return DType::kUInt8;
  if (d == "INT8") return DType::kInt8;
  if (d == "INT32") return DType::kInt32;
  if (d == "INT64") return DType::kInt64;
  if (d == "FP16") return DType::kFloat16;
  if (d == "FP32") return DType::kFloat32;
  if (d == "FP64") return DType::kFloat64;
  if (d == "BF16") return DType::kBFloat16;
  return InvalidArgumentError(
      "datatype '{}' is not supported (valid: BOOL, UINT8, INT8, INT32, INT64, FP16, FP32, FP64, "
      "BF16, BYTES)",
      d);
}

std::string_view DatatypeName(DType t) {
  switch (t) {
    case DType::kBool:
      return "BOOL";
    case DType::kUInt8:
      return "UINT8";
    case DType::kInt8:
      return "INT8";
    case DType::kInt32:
      return "INT32";
    case DType::kInt64:
      return "INT64";
    case DType::kFloat16:
      return "FP16";
    case DType::kFloat32:
      return "FP32";
    case DType::kFloat64:
      return "FP64";
    case DType::kBFloat16:
      return "BF16";
    default:
      return "INVALID";
  }
}

size_t DatatypeSize(std::string_view d) {
  if (d == "BOOL" || d == "UINT8" || d == "INT8") return 1;
  if (d == "UINT16" || d == "INT16" || d == "FP16" || d == "BF16") return 2;
  if (d == "UINT32" || d == "INT32" || d == "FP32") return 4;
  if (d == "UINT64" || d == "INT64" || d == "FP64") return 8;
  return 0;
}

std::string PackBytes(const std::vector<std::string>& strings) {
  size_t total = 0;
  for (const auto& s : strings) total += 4 + s.size();
  std::string out;
  out.reserve(total);
  for (const auto& s : strings) {
    uint32_t n = static_cast<uint32_t>(s.size());
    char len[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                   static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
    out.append(len, 4);
    out.append(s);
  }
  return out;
}

Result<std::vector<std::string>> UnpackBytes(std::string_view data, int64_t expected_count) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < 4) {
      return InvalidArgumentError(
          "BYTES tensor data truncated: {} bytes left at offset {}, need a "
          "4-byte length",
          data.size() - pos, pos);
    }
    const auto* p = reinterpret_cast<const uint8_t*>(data.data() + pos);
    uint32_t n = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
    pos += 4;
    if (n > data.size() - pos) {
      return InvalidArgumentError("BYTES element {} claims {} bytes but only {} remain", out.size(),
                                  n, data.size() - pos);
    }
    out.emplace_back(data.substr(pos, n));
    pos += n;
  }
  if (expected_count >= 0 && static_cast<int64_t>(out.size()) != expected_count) {
    return InvalidArgumentError("BYTES tensor holds {} elements but its shape needs {}", out.size(),
                                expected_count);
  }
  return out;
}

}  // namespace surge::serve
