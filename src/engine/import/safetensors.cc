#include "engine/import/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>

namespace surge::engine::import {
namespace {

size_t ElementSize(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" ||
      dtype == "F8_E5M2") {
    return 1;
  }
  return 0;
}

}  // namespace

Result<SafeTensors> SafeTensors::Open(const std::string& path) {
  SafeTensors st;
  st.path_ = path;
  auto file = MappedFile::Open(path);
  if (!file.ok()) return NotFoundError("cannot open '{}': {}", path, file.status().message());
  st.file_ = std::move(file).value();
  st.bytes_ = st.file_.bytes();
  SURGE_RETURN_IF_ERROR(st.Parse());
  return st;
}

Result<SafeTensors> SafeTensors::FromBytes(std::span<const uint8_t> bytes, std::string name) {
  SafeTensors st;
  st.path_ = std::move(name);
  st.bytes_ = bytes;
  SURGE_RETURN_IF_ERROR(st.Parse());
  return st;
}

Status SafeTensors::Parse() {
  const std::string& path = path_;
  const size_t size = bytes_.size();
  if (size < 8) return DataLossError("'{}' is too short for a safetensors header", path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes_[i];
  if (n < 2 || n > size - 8) {
    return DataLossError("'{}': safetensors header length {} does not fit the {}-byte file", path,
                         n, size);
  }
  const char* hdr = reinterpret_cast<const char*>(bytes_.data() + 8);
  auto json = nlohmann::json::parse(hdr, hdr + n, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return DataLossError("'{}': safetensors header is not a JSON object", path);
  }
  data_start_ = 8 + n;
  const size_t data_size = size - data_start_;
  for (const auto& item : json.items()) {
    const std::string& name = item.key();
    const auto& info = item.value();
    if (name == "__metadata__") continue;
    auto bad = [&](std::string_view why) {
      return DataLossError("'{}': tensor '{}': {}", path, name, why);
    };
    if (!info.is_object()) return bad("entry is not an object");
    auto dt = info.find("dtype");
    auto sh = info.find("shape");
    auto off = info.find("data_offsets");
    if (dt == info.end() || !dt->is_string()) return bad("missing dtype");
    if (sh == info.end() || !sh->is_array()) return bad("missing shape");
    if (off == info.end() || !off->is_array() || off->size() != 2) return bad("bad data_offsets");
    Entry e;
    e.dtype = dt->get<std::string>();
    size_t elem = ElementSize(e.dtype);
    if (elem == 0) return bad(fmt::format("unknown dtype '{}'", e.dtype));
    uint64_t numel = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned()) return bad("shape holds a non-integer or negative dim");
      uint64_t v = d.get<uint64_t>();
      if (v != 0 && numel > (uint64_t{1} << 48) / v) return bad("shape is too large");
      numel *= v;
      e.shape.push_back(static_cast<int64_t>(v));
    }
    if (!(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned()) {
      return bad("data_offsets are not non-negative integers");
    }
    uint64_t b = (*off)[0].get<uint64_t>(), en = (*off)[1].get<uint64_t>();
    if (b > en || en > data_size) {
      return bad(fmt::format("data_offsets [{}, {}) lie outside the {}-byte data section", b, en,
                             data_size));
    }
    if (en - b != numel * elem) {
      return bad(fmt::format("holds {} bytes, shape {} of {} needs {}", en - b,
                             ShapeToString(e.shape), e.dtype, numel * elem));
    }
    e.begin = b;
    e.end = en;
    entries_.emplace(name, std::move(e));
  }
  return Status::Ok();
}

Result<Tensor> SafeTensors::ReadFloat32(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return NotFoundError("tensor '{}' is missing from '{}'", name, path_);
  const Entry& e = it->second;
  const uint8_t* src = bytes_.data() + data_start_ + e.begin;
  Tensor out(DType::kFloat32, e.shape);
  float* dst = out.data_as<float>();
  const int64_t n = out.numel();
  if (e.dtype == "F32") {
    std::memcpy(dst, src, n * sizeof(float));
  } else if (e.dtype == "F16" || e.dtype == "BF16") {
    const bool half = e.dtype == "F16";
    for (int64_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      dst[i] = half ? HalfToFloat(v) : BFloat16ToFloat(v);
    }
  } else if (e.dtype == "F64") {
    for (int64_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, src + 8 * i, 8);
      dst[i] = static_cast<float>(v);
    }
  } else {
    return UnimplementedError("tensor '{}' in '{}' has dtype {}; expected F32, F16 or BF16", name,
                              path_, e.dtype);
  }
  return out;
}

}  // namespace surge::engine::import
