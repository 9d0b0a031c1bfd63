// The plan's "config" section: the BuilderConfig a plan was built with, the surge version that
// built it, and a free-form build report (op counts before/after fusion, pass log, timings) for
// `surge inspect`. JSON, so people can read it with any tool.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "engine/runtime/backend.h"

namespace surge::engine {

// The version of this build ("0.1.0").
std::string_view SurgeVersion();

struct PlanConfig {
  BuilderConfig builder;
  std::string surge_version;
  std::string build_report_json = "{}";  // a JSON object; "{}" when none
};

std::string PlanConfigToJson(const PlanConfig& config);
// DataLoss naming the field on malformed JSON or fields of the wrong type.
Result<PlanConfig> PlanConfigFromJson(std::string_view json);

// The plan's "quant" section: {"calibrator": .., "layers": {node: {"precision", "reason"}},
// "amax": {value: float}, "report": {..}}.
std::string QuantSpecToJson(const QuantSpec& quant);
// DataLoss naming the field on malformed JSON, unknown precisions or non-finite thresholds.
Result<QuantSpec> QuantSpecFromJson(std::string_view json);

}  // namespace surge::engine
