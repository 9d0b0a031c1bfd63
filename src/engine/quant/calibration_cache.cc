#include "engine/quant/calibration_cache.h"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/mmap_file.h"
#include "engine/plan/plan_file.h"
#include "engine/runtime/graph_codec.h"

namespace surge::engine::quant {
namespace {

using Json = nlohmann::json;

constexpr size_t kHeaderBytes = 32;
constexpr int64_t kMaxTensorElements = int64_t{1} << 28;

template <typename T>
void Put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <typename T>
T Get(std::span<const uint8_t> b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

Json TensorToJson(const Tensor& t) {
  Json data = Json::array();
  const int64_t n = t.numel();
  if (t.dtype() == DType::kFloat32) {
    for (int64_t i = 0; i < n; ++i) data.push_back(t.data_as<float>()[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) data.push_back(t.GetInt(i));
  }
  return {{"dtype", std::string(DTypeName(t.dtype()))}, {"shape", t.shape()}, {"data", data}};
}

Result<Tensor> TensorFromJson(const Json& j, const std::string& name) {
  if (!j.is_object() || !j.contains("dtype") || !j["dtype"].is_string() || !j.contains("shape") ||
      !j["shape"].is_array() || !j.contains("data") || !j["data"].is_array()) {
    return DataLossError("tensor '{}' needs dtype, shape and data", name);
  }
  SURGE_ASSIGN_OR_RETURN(DType dtype, ParseDType(j["dtype"].get<std::string>()));
  if (dtype != DType::kFloat32 && dtype != DType::kInt64 && dtype != DType::kInt32) {
    return DataLossError("tensor '{}' has dtype {} (valid: float32, int64, int32)", name,
                         DTypeName(dtype));
  }
  Shape shape;
  int64_t numel = 1;
  for (const auto& d : j["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0 || shape.size() >= 8) {
      return DataLossError("tensor '{}' has a malformed shape", name);
    }
    shape.push_back(d.get<int64_t>());
    if (__builtin_mul_overflow(numel, shape.back(), &numel) || numel > kMaxTensorElements) {
      return DataLossError("tensor '{}' is too large", name);
    }
  }
  const Json& data = j["data"];
  if (static_cast<int64_t>(data.size()) != numel) {
    return DataLossError("tensor '{}' has shape {} but {} values", name, ShapeToString(shape),
                         data.size());
  }
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < numel; ++i) {
    const Json& e = data[i];
    if (dtype == DType::kFloat32) {
      if (!e.is_number()) return DataLossError("tensor '{}' element {} is not a number", name, i);
      t.data_as<float>()[i] = e.get<float>();
    } else {
      if (!e.is_number_integer()) {
        return DataLossError("tensor '{}' element {} is not an integer", name, i);
      }
      if (dtype == DType::kInt64) {
        t.data_as<int64_t>()[i] = e.get<int64_t>();
      } else {
        t.data_as<int32_t>()[i] = e.get<int32_t>();
      }
    }
  }
  return t;
}

Result<double> Number(const Json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number() || !std::isfinite(it->get<double>())) {
    return DataLossError("{}: '{}' is missing or not a finite number", what, key);
  }
  return it->get<double>();
}

Result<uint64_t> Count(const Json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) {
    return DataLossError("{}: '{}' is missing or not a count", what, key);
  }
  return it->get<uint64_t>();
}

Result<CalibrationCache> ParsePayload(const Json& j) {
  if (!j.is_object()) return DataLossError("the payload is not a JSON object");
  CalibrationCache c;
  for (auto [key, out] : {std::pair{"model_hash", &c.model_hash},
                          {"model", &c.model},
                          {"surge_version", &c.surge_version}}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) {
      return DataLossError("'{}' is missing or not a string", key);
    }
    *out = it->get<std::string>();
  }
  SURGE_ASSIGN_OR_RETURN(uint64_t batches, Count(j, "batches", "cache"));
  SURGE_ASSIGN_OR_RETURN(uint64_t sequences, Count(j, "sequences", "cache"));
  SURGE_ASSIGN_OR_RETURN(uint64_t tokens, Count(j, "tokens", "cache"));
  c.batches = static_cast<int64_t>(batches);
  c.sequences = static_cast<int64_t>(sequences);
  c.tokens = static_cast<int64_t>(tokens);
  auto tensors = j.find("tensors");
  if (tensors == j.end() || !tensors->is_object()) {
    return DataLossError("'tensors' is missing or not an object");
  }
  for (const auto& [name, t] : tensors->items()) {
    const std::string what = "tensor '" + name + "'";
    if (!t.is_object() || !t.contains("counts") || !t["counts"].is_array()) {
      return DataLossError("{}: no histogram counts", what);
    }
    std::vector<uint64_t> counts;
    counts.reserve(t["counts"].size());
    for (const auto& v : t["counts"]) {
      if (!v.is_number_unsigned()) return DataLossError("{}: a histogram count is malformed", what);
      counts.push_back(v.get<uint64_t>());
    }
    SURGE_ASSIGN_OR_RETURN(double range, Number(t, "range", what));
    SURGE_ASSIGN_OR_RETURN(double max_abs, Number(t, "max_abs", what));
    SURGE_ASSIGN_OR_RETURN(uint64_t non_finite, Count(t, "non_finite", what));
    TensorStats s;
    SURGE_ASSIGN_OR_RETURN(s.min, Number(t, "min", what));
    SURGE_ASSIGN_OR_RETURN(s.max, Number(t, "max", what));
    auto h =
        AbsHistogram::FromParts(range, std::move(counts), static_cast<float>(max_abs), non_finite);
    if (!h.ok()) return DataLossError("{}: {}", what, h.status().message());
    s.hist = std::move(h).value();
    c.tensors.emplace(name, std::move(s));
  }
  auto holdout = j.find("holdout");
  if (holdout == j.end() || !holdout->is_array()) {
    return DataLossError("'holdout' is missing or not a list");
  }
  for (size_t i = 0; i < holdout->size(); ++i) {
    const Json& batch = (*holdout)[i];
    if (!batch.is_object()) return DataLossError("held-out batch {} is not an object", i);
    TensorMap m;
    for (const auto& [name, t] : batch.items()) {
      auto tensor = TensorFromJson(t, name);
      if (!tensor.ok()) return tensor.status().WithContext(fmt::format("held-out batch {}", i));
      m.emplace(name, std::move(tensor).value());
    }
    c.holdout.push_back(std::move(m));
  }
  return c;
}

}  // namespace

Result<std::string> ModelHash(const ir::Graph& graph) {
  SURGE_ASSIGN_OR_RETURN(EncodedGraph e, EncodeGraph(graph));
  auto span = [](const std::string& s) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  return fmt::format("{:016x}{:016x}", plan::Checksum(span(e.graph)),
                     plan::Checksum(span(e.weights)));
}

Result<std::string> TensorMapToJson(const TensorMap& tensors) {
  Json j = Json::object();
  for (const auto& [name, t] : tensors) {
    if (t.dtype() != DType::kFloat32 && t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32) {
      return InvalidArgumentError("tensor '{}' has dtype {} (storable: float32, int64, int32)",
                                  name, DTypeName(t.dtype()));
    }
    j[name] = TensorToJson(t);
  }
  return j.dump();
}

Result<TensorMap> TensorMapFromJson(std::string_view text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return DataLossError("tensors are not a JSON object");
  TensorMap m;
  for (const auto& [name, t] : j.items()) {
    SURGE_ASSIGN_OR_RETURN(Tensor tensor, TensorFromJson(t, name));
    m.emplace(name, std::move(tensor));
  }
  return m;
}

std::string SerializeCache(const CalibrationCache& c) {
  Json j;
  j["model_hash"] = c.model_hash;
  j["model"] = c.model;
  j["surge_version"] = c.surge_version;
  j["batches"] = static_cast<uint64_t>(c.batches);
  j["sequences"] = static_cast<uint64_t>(c.sequences);
  j["tokens"] = static_cast<uint64_t>(c.tokens);
  Json tensors = Json::object();
  for (const auto& [name, s] : c.tensors) {
    tensors[name] = {{"min", s.min},
                     {"max", s.max},
                     {"range", s.hist.range()},
                     {"max_abs", s.hist.max_abs()},
                     {"non_finite", s.hist.non_finite()},
                     {"counts", s.hist.counts()}};
  }
  j["tensors"] = std::move(tensors);
  Json holdout = Json::array();
  for (const auto& batch : c.holdout) {
    Json b = Json::object();
    for (const auto& [name, t] : batch) b[name] = TensorToJson(t);
    holdout.push_back(std::move(b));
  }
  j["holdout"] = std::move(holdout);
  const std::string payload = j.dump();
  std::string out(kCalibrationMagic);
  Put<uint32_t>(out, kCalibrationCacheVersion);
  Put<uint32_t>(out, 0);
  Put<uint64_t>(out, payload.size());
  Put<uint64_t>(out,
                plan::Checksum({reinterpret_cast<const uint8_t*>(payload.data()), payload.size()}));
  out += payload;
  return out;
}

Result<CalibrationCache> ParseCache(std::span<const uint8_t> b, std::string_view source) {
  const std::string where = fmt::format("calibration cache '{}'", source);
  if (b.size() < kCalibrationMagic.size() ||
      std::memcmp(b.data(), kCalibrationMagic.data(), kCalibrationMagic.size()) != 0) {
    return DataLossError(
        "{} is not a calibration cache (no SURGECAL header); make one with "
        "`surge calibrate`",
        where);
  }
  if (b.size() < kHeaderBytes) {
    return DataLossError("{} is truncated: {} bytes, the header alone needs {}", where, b.size(),
                         kHeaderBytes);
  }
  const auto version = Get<uint32_t>(b, 8);
  if (version != kCalibrationCacheVersion) {
    return FailedPreconditionError(
        "{} has format version {}; this build reads version {}: recalibrate with this build", where,
        version, kCalibrationCacheVersion);
  }
  const auto size = Get<uint64_t>(b, 16);
  const auto checksum = Get<uint64_t>(b, 24);
  if (size != b.size() - kHeaderBytes) {
    return DataLossError("{} is {}: the header announces {} payload bytes, the file holds {}",
                         where, size > b.size() - kHeaderBytes ? "truncated" : "malformed", size,
                         b.size() - kHeaderBytes);
  }
  const auto payload = b.subspan(kHeaderBytes);
  if (plan::Checksum(payload) != checksum) {
    return DataLossError("{} is corrupt: checksum {:016x}, expected {:016x}", where,
                         plan::Checksum(payload), checksum);
  }
  Json j = Json::parse(payload.begin(), payload.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return DataLossError("{}: the payload is not JSON", where);
  auto c = ParsePayload(j);
  if (!c.ok()) return c.status().WithContext(where);
  return c;
}

Status WriteCache(const CalibrationCache& cache, const std::string& path) {
  return plan::WriteFileAtomically(path, SerializeCache(cache));
}

Result<CalibrationCache> ReadCache(const std::string& path) {
  SURGE_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  return ParseCache({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, path);
}

}  // namespace surge::engine::quant
