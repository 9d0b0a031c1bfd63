#include "cli/engine_io.h"

#include <cmath>
#include <fstream>
#include <iostream>
#include <iterator>

#include "core/mmap_file.h"

namespace surge::cli {

using nlohmann::json;

namespace {

bool Has(std::string_view name, std::string_view part) { return name.find(part) != name.npos; }

constexpr int64_t kMaxJsonElements = int64_t{1} << 28;

template <typename T>
Status FillInts(const json& data, const std::string& name, Tensor* t) {
  T* out = t->data_as<T>();
  for (size_t i = 0; i < data.size(); ++i) {
    const json& e = data[i];
    if (e.is_number_integer()) {
      out[i] = static_cast<T>(e.get<int64_t>());
    } else if (e.is_number_float() && std::floor(e.get<double>()) == e.get<double>() &&
               std::abs(e.get<double>()) < 9.0e15) {
      out[i] = static_cast<T>(e.get<double>());
    } else if (e.is_boolean()) {
      out[i] = static_cast<T>(e.get<bool>());
    } else {
      return InvalidArgumentError("input '{}' is {}, but element {} is {} (not an integer)", name,
                                  DTypeName(t->dtype()), i, e.dump());
    }
  }
  return Status::Ok();
}

template <typename T>
Status FillFloats(const json& data, const std::string& name, Tensor* t) {
  T* out = t->data_as<T>();
  for (size_t i = 0; i < data.size(); ++i) {
    const json& e = data[i];
    if (!e.is_number()) {
      return InvalidArgumentError("input '{}' element {} is {} (not a number)", name, i, e.dump());
    }
    out[i] = static_cast<T>(e.get<double>());
  }
  return Status::Ok();
}

}  // namespace

Result<double> ParseFraction(const std::string& text, const std::string& flag) {
  std::string t = text;
  double scale = 1;
  if (!t.empty() && t.back() == '%') {
    t.pop_back();
    scale = 0.01;
  }
  try {
    size_t used = 0;
    const double v = std::stod(t, &used) * scale;
    if (used == t.size() && v >= 0 && v <= 1) return v;
  } catch (const std::exception&) {
  }
  return InvalidArgumentError("{} '{}' must be a fraction in [0, 1] or a percentage like 0.5%",
                              flag, text);
}

int Fail(const Status& status) {
  std::cerr << "error: " << status.ToString() << '\n';
  return 1;
}

Result<json> ReadJson(const std::string& path) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    SURGE_ASSIGN_OR_RETURN(text, ReadFileToString(path));
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return InvalidArgumentError("'{}' is not valid JSON", path == "-" ? "<stdin>" : path);
  }
  return j;
}

Status WriteText(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    return std::cout ? Status::Ok() : UnavailableError("writing to stdout failed");
  }
  return WriteStringToFile(path, text);
}

Result<engine::TensorMap> TensorsFromJson(const json& j, const engine::Engine* engine) {
  if (!j.is_object()) {
    return InvalidArgumentError(
        "inputs must be a JSON object like {{\"input_ids\": {{\"shape\": [1,5], \"data\": "
        "[...]}}}}");
  }
  engine::TensorMap out;
  for (const auto& [name, v] : j.items()) {
    if (!v.is_object() || !v.contains("shape") || !v.contains("data") || !v["shape"].is_array() ||
        !v["data"].is_array()) {
      return InvalidArgumentError(
          "input '{}': expected {{\"shape\": [..], \"data\": [..]}} with a flat data list", name);
    }
    Shape shape;
    int64_t numel = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || shape.size() >= 8) {
        return InvalidArgumentError("input '{}': shape must be at most 8 non-negative integers",
                                    name);
      }
      shape.push_back(d.get<int64_t>());
      if (__builtin_mul_overflow(numel, shape.back(), &numel) || numel > kMaxJsonElements) {
        return InvalidArgumentError("input '{}': shape {} is too large", name, v["shape"].dump());
      }
    }
    const json& data = v["data"];
    if (static_cast<int64_t>(data.size()) != numel) {
      return InvalidArgumentError("input '{}' has shape {} ({} elements) but {} data values", name,
                                  ShapeToString(shape), numel, data.size());
    }
    DType dtype = DType::kUndefined;
    if (engine != nullptr) {
      for (const auto& info : engine->inputs()) {
        if (info.name == name) dtype = info.dtype;
      }
    }
    if (dtype == DType::kUndefined && v.contains("dtype")) {
      if (!v["dtype"].is_string())
        return InvalidArgumentError("input '{}': dtype must be a string", name);
      auto dt = ParseDType(v["dtype"].get<std::string>());
      if (!dt.ok()) return dt.status().WithContext("input '" + name + "'");
      dtype = *dt;
    }
    if (dtype == DType::kUndefined) {
      bool all_int = std::all_of(data.begin(), data.end(),
                                 [](const json& e) { return e.is_number_integer(); });
      dtype = all_int ? DType::kInt64 : DType::kFloat32;
    }
    Tensor t(dtype, shape);
    switch (dtype) {
      case DType::kFloat32:
        SURGE_RETURN_IF_ERROR(FillFloats<float>(data, name, &t));
        break;
      case DType::kFloat64:
        SURGE_RETURN_IF_ERROR(FillFloats<double>(data, name, &t));
        break;
      case DType::kInt64:
        SURGE_RETURN_IF_ERROR(FillInts<int64_t>(data, name, &t));
        break;
      case DType::kInt32:
        SURGE_RETURN_IF_ERROR(FillInts<int32_t>(data, name, &t));
        break;
      case DType::kInt8:
        SURGE_RETURN_IF_ERROR(FillInts<int8_t>(data, name, &t));
        break;
      case DType::kUInt8:
      case DType::kBool:
        SURGE_RETURN_IF_ERROR(FillInts<uint8_t>(data, name, &t));
        break;
      default:
        return InvalidArgumentError("input '{}': dtype {} cannot be read from JSON", name,
                                    DTypeName(dtype));
    }
    out.emplace(name, std::move(t));
  }
  return out;
}

json TensorToJson(const Tensor& t) {
  json j;
  j["shape"] = t.shape();
  j["dtype"] = std::string(DTypeName(t.dtype()));
  json data = json::array();
  const int64_t n = t.numel();
  if (IsFloating(t.dtype())) {
    Tensor f = t.dtype() == DType::kFloat32 ? t : t.ToFloat32();
    for (int64_t i = 0; i < n; ++i) data.push_back(f.data_as<float>()[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) data.push_back(t.GetInt(i));
  }
  j["data"] = std::move(data);
  return j;
}

json TensorsToJson(const engine::TensorMap& tensors) {
  json j = json::object();
  for (const auto& [name, t] : tensors) j[name] = TensorToJson(t);
  return j;
}

int64_t VocabSize(const ir::Graph& g) {
  auto rows = [&](int id) -> int64_t {
    if (id < 0 || !g.values[id].is_constant() || g.values[id].constant.rank() != 2) return 0;
    return g.values[id].constant.dim(0);
  };
  for (const auto& n : g.nodes) {
    if (n.domain == ir::kSurgeDomain && n.op_type == "EmbedLayerNorm") return rows(n.input(3));
  }
  for (const auto& n : g.nodes) {
    if (n.op_type != "Gather" || n.input(1) < 0) continue;
    const std::string& idx = g.values[n.input(1)].name;
    if (Has(idx, "input_ids") && rows(n.input(0)) > 0) return rows(n.input(0));
  }
  return 0;
}

Result<std::map<std::string, Shape>> ParseShapeList(const std::string& text) {
  std::map<std::string, Shape> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return InvalidArgumentError("bad shape '{}': expected NAME:DIMS like input_ids:8x128", item);
    }
    auto shape = ParseShape(item.substr(colon + 1));
    if (!shape.ok()) return shape.status().WithContext("shape for '" + item.substr(0, colon) + "'");
    out[item.substr(0, colon)] = *shape;
  }
  if (out.empty()) return InvalidArgumentError("no shapes given in '{}'", text);
  return out;
}

Result<std::map<std::string, Shape>> ResolveShapes(const engine::Engine& engine,
                                                   const SyntheticOptions& options,
                                                   const std::map<std::string, Shape>& shapes) {
  ir::SymbolBindings bindings;
  for (const auto& [name, shape] : shapes) {
    auto it = std::find_if(engine.inputs().begin(), engine.inputs().end(),
                           [&](const engine::TensorInfo& i) { return i.name == name; });
    if (it == engine.inputs().end()) {
      return InvalidArgumentError("--shapes names '{}', which is not an input of the engine", name);
    }
    if (it->shape.size() != shape.size()) {
      return InvalidArgumentError("--shapes gives '{}' rank {}, the input is {}", name,
                                  shape.size(), ir::SymShapeToString(it->shape));
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      if (it->shape[d].IsSymbol()) bindings.emplace(it->shape[d].Symbols()[0], shape[d]);
    }
  }
  std::map<std::string, Shape> out;
  for (const auto& info : engine.inputs()) {
    if (auto it = shapes.find(info.name); it != shapes.end()) {
      out[info.name] = it->second;
      continue;
    }
    for (size_t d = 0; d < info.shape.size(); ++d) {
      for (const auto& sym : info.shape[d].Symbols()) {
        if (bindings.count(sym)) continue;
        bool batch = Has(sym, "batch") || (d == 0 && !Has(sym, "seq") && !Has(sym, "len"));
        bindings[sym] = batch ? options.batch : options.seq;
      }
    }
    auto shape = ir::EvalShape(info.shape, bindings);
    if (!shape.ok()) return shape.status().WithContext("input '" + info.name + "'");
    out[info.name] = *shape;
  }
  return out;
}

Result<engine::TensorMap> SyntheticInputs(const engine::Engine& engine,
                                          const std::map<std::string, Shape>& shapes,
                                          const SyntheticOptions& options) {
  std::mt19937_64 rng(options.seed);
  int64_t vocab = VocabSize(engine.graph());
  if (vocab <= 0) vocab = 100;
  engine::TensorMap out;
  for (const auto& info : engine.inputs()) {
    auto it = shapes.find(info.name);
    if (it == shapes.end()) return InvalidArgumentError("no shape for input '{}'", info.name);
    const Shape& shape = it->second;
    const int64_t numel = NumElements(shape);
    const int64_t cols = shape.empty() ? 1 : std::max<int64_t>(shape.back(), 1);
    const int64_t rows = numel / cols;
    std::vector<int64_t> lengths(rows, cols);
    if (options.random_padding) {
      for (auto& l : lengths) l = std::uniform_int_distribution<int64_t>(1, cols)(rng);
    }
    // Value of element i (row r, column c) as double, then stored in the input's dtype.
    std::function<double(int64_t, int64_t)> gen;
    const bool is_mask = Has(info.name, "mask");
    std::uniform_int_distribution<int64_t> id_dist(0, vocab - 1);
    std::normal_distribution<double> normal(0.0, 1.0);
    if (is_mask) {
      gen = [&](int64_t r, int64_t c) { return c < lengths[r] ? 1.0 : 0.0; };
    } else if (Has(info.name, "token_type") || Has(info.name, "segment")) {
      gen = [](int64_t, int64_t) { return 0.0; };
    } else if (Has(info.name, "position")) {
      gen = [](int64_t, int64_t c) { return static_cast<double>(c); };
    } else if (!IsFloating(info.dtype)) {
      gen = [&](int64_t, int64_t) { return static_cast<double>(id_dist(rng)); };
    } else {
      gen = [&](int64_t, int64_t) { return normal(rng); };
    }
    Tensor t(info.dtype, shape);
    for (int64_t i = 0; i < numel; ++i) {
      const double v = gen(i / cols, i % cols);
      switch (info.dtype) {
        case DType::kFloat32:
          t.data_as<float>()[i] = static_cast<float>(v);
          break;
        case DType::kFloat64:
          t.data_as<double>()[i] = v;
          break;
        case DType::kInt64:
          t.data_as<int64_t>()[i] = static_cast<int64_t>(v);
          break;
        case DType::kInt32:
          t.data_as<int32_t>()[i] = static_cast<int32_t>(v);
          break;
        case DType::kInt8:
          t.data_as<int8_t>()[i] = static_cast<int8_t>(v);
          break;
        case DType::kUInt8:
        case DType::kBool:
          t.data_as<uint8_t>()[i] = static_cast<uint8_t>(v);
          break;
        default:
          return InvalidArgumentError("input '{}': cannot make synthetic {} data", info.name,
                                      DTypeName(info.dtype));
      }
    }
    out.emplace(info.name, std::move(t));
  }
  return out;
}

}  // namespace surge::cli
