#include "engine/runtime/plan_config.h"

#include <nlohmann/json.hpp>

#ifndef SURGE_VERSION_STRING
#define SURGE_VERSION_STRING "unknown"
#endif

namespace surge::engine {

namespace {

using Json = nlohmann::json;

Result<Shape> ShapeFromJson(const Json& j, std::string_view what) {
  if (!j.is_array() || j.size() > 16) return DataLossError("plan config: {} is not a shape", what);
  Shape s;
  for (const auto& d : j) {
    if (!d.is_number_integer()) return DataLossError("plan config: {} is not a shape", what);
    s.push_back(d.get<int64_t>());
  }
  return s;
}

}  // namespace

std::string_view SurgeVersion() { return SURGE_VERSION_STRING; }

std::string PlanConfigToJson(const PlanConfig& config) {
  const BuilderConfig& b = config.builder;
  Json j;
  j["surge_version"] = config.surge_version;
  j["backend"] = b.backend;
  j["precision"] = std::string(PrecisionName(b.precision));
  j["threads"] = b.num_threads;
  j["padding_free"] = b.padding_free;
  j["memory_budget_bytes"] = b.memory_budget_bytes;
  Json profile = Json::array();
  for (const auto& p : b.profile.inputs) {
    profile.push_back({{"name", p.name}, {"min", p.min}, {"opt", p.opt}, {"max", p.max}});
  }
  j["profile"] = std::move(profile);
  Json report = Json::parse(config.build_report_json, nullptr, /*allow_exceptions=*/false);
  j["build_report"] = report.is_discarded() ? Json::object() : report;
  return j.dump(1);
}

Result<PlanConfig> PlanConfigFromJson(std::string_view text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return DataLossError("plan config section is not a JSON object");
  }
  PlanConfig c;
  auto str = [&](const char* key, std::string* out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) {
      return DataLossError("plan config: '{}' is missing or not a string", key);
    }
    *out = it->get<std::string>();
    return Status::Ok();
  };
  SURGE_RETURN_IF_ERROR(str("surge_version", &c.surge_version));
  SURGE_RETURN_IF_ERROR(str("backend", &c.builder.backend));
  std::string precision;
  SURGE_RETURN_IF_ERROR(str("precision", &precision));
  auto p = ParsePrecision(precision);
  if (!p.ok()) return DataLossError("plan config: {}", p.status().message());
  c.builder.precision = *p;
  if (auto it = j.find("threads"); it != j.end() && it->is_number_integer()) {
    c.builder.num_threads = it->get<int>();
  }
  if (auto it = j.find("padding_free"); it != j.end() && it->is_boolean()) {
    c.builder.padding_free = it->get<bool>();
  }
  if (auto it = j.find("memory_budget_bytes"); it != j.end() && it->is_number_unsigned()) {
    c.builder.memory_budget_bytes = it->get<size_t>();
  }
  auto prof = j.find("profile");
  if (prof == j.end() || !prof->is_array()) {
    return DataLossError("plan config: 'profile' is missing or not a list");
  }
  for (const auto& e : *prof) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) {
      return DataLossError("plan config: a profile entry has no name");
    }
    InputProfile ip;
    ip.name = e["name"].get<std::string>();
    for (auto [key, shape] : {std::pair{"min", &ip.min}, {"opt", &ip.opt}, {"max", &ip.max}}) {
      if (!e.contains(key))
        return DataLossError("plan config: profile '{}' has no {}", ip.name, key);
      SURGE_ASSIGN_OR_RETURN(*shape, ShapeFromJson(e[key], ip.name + " " + key));
    }
    if (ip.min.size() != ip.opt.size() || ip.opt.size() != ip.max.size()) {
      return DataLossError("plan config: profile '{}' has shapes of different ranks", ip.name);
    }
    c.builder.profile.inputs.push_back(std::move(ip));
  }
  if (auto it = j.find("build_report"); it != j.end() && it->is_object()) {
    c.build_report_json = it->dump();
  }
  return c;
}

}  // namespace surge::engine
