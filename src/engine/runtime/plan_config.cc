#include "engine/runtime/plan_config.h"

#include <cmath>
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
  j["tactic_search"] = b.full_tactic_search ? "full" : "heuristic";
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
  if (auto it = j.find("tactic_search"); it != j.end()) {
    if (!it->is_string() || (*it != "full" && *it != "heuristic")) {
      return DataLossError("plan config: 'tactic_search' is not \"full\" or \"heuristic\"");
    }
    c.builder.full_tactic_search = *it == "full";
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

std::string QuantSpecToJson(const QuantSpec& quant) {
  Json j;
  j["calibrator"] = quant.calibrator;
  Json layers = Json::object();
  for (const auto& [name, l] : quant.layers) {
    layers[name] = {{"precision", std::string(PrecisionName(l.precision))}, {"reason", l.reason}};
  }
  j["layers"] = std::move(layers);
  Json amax = Json::object();
  for (const auto& [name, a] : quant.amax) amax[name] = a;
  j["amax"] = std::move(amax);
  Json report = Json::parse(quant.report_json, nullptr, /*allow_exceptions=*/false);
  j["report"] = report.is_object() ? report : Json::object();
  return j.dump(1);
}

Result<QuantSpec> QuantSpecFromJson(std::string_view text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return DataLossError("plan quant section is not a JSON object");
  }
  QuantSpec q;
  if (auto it = j.find("calibrator"); it != j.end() && it->is_string()) {
    q.calibrator = it->get<std::string>();
  }
  auto layers = j.find("layers");
  if (layers == j.end() || !layers->is_object()) {
    return DataLossError("plan quant section: 'layers' is missing or not an object");
  }
  for (const auto& [name, l] : layers->items()) {
    if (!l.is_object() || !l.contains("precision") || !l["precision"].is_string()) {
      return DataLossError("plan quant section: layer '{}' has no precision", name);
    }
    auto p = ParsePrecision(l["precision"].get<std::string>());
    if (!p.ok())
      return DataLossError("plan quant section: layer '{}': {}", name, p.status().message());
    LayerPrecision lp{*p, ""};
    if (l.contains("reason") && l["reason"].is_string()) lp.reason = l["reason"].get<std::string>();
    q.layers.emplace(name, std::move(lp));
  }
  auto amax = j.find("amax");
  if (amax == j.end() || !amax->is_object()) {
    return DataLossError("plan quant section: 'amax' is missing or not an object");
  }
  for (const auto& [name, a] : amax->items()) {
    if (!a.is_number() || !std::isfinite(a.get<double>()) || a.get<double>() <= 0) {
      return DataLossError("plan quant section: amax of '{}' is {} (must be a positive number)",
                           name, a.dump());
    }
    q.amax[name] = a.get<float>();
  }
  if (auto it = j.find("report"); it != j.end() && it->is_object()) q.report_json = it->dump();
  return q;
}

}  // namespace surge::engine
