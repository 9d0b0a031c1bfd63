// config.pbtxt: parsing (protobuf text format into our subset of Triton's ModelConfig),
// auto-completion from a loaded engine, validation, and the JSON form served by
// GET v2/models/<m>/config. The protobuf types stay behind this header's functions for callers
// that only need the plain-C++ view (ModelSettings).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/runtime/engine.h"
#include "serve/proto/model_config.pb.h"
#include "serve/scheduler.h"

namespace surge::serve {

// Parses config.pbtxt text. Unknown fields are skipped (each named in `warnings`); syntax errors
// fail with the line and column.
Result<inference::ModelConfig> ParseModelConfig(std::string_view text, std::string_view origin,
                                                std::vector<std::string>* warnings = nullptr);

// Fills what the config leaves out from the engine: inputs/outputs (names, types, dims), and
// max_batch_size (the engine profile's batch max, capped at `default_max_batch_size`) when every
// input has a dynamic leading dim. Enables dynamic batching when max_batch_size > 1 and no
// scheduler is given (Triton's default). Checks what the config does give against the engine.
Status AutoCompleteConfig(const engine::Engine& engine, int default_max_batch_size,
                          inference::ModelConfig* config);

// Checks values that do not depend on the model (ranges, priority levels, preferred sizes).
Status ValidateConfig(const inference::ModelConfig& config);

// The batcher settings a config asks for.
BatcherOptions BatcherOptionsFromConfig(const inference::ModelConfig& config);

// Proto3 JSON with Triton's field names (what tritonclient's get_model_config returns).
std::string ConfigToJson(const inference::ModelConfig& config);
// The inverse (the "config" parameter of a repository load request).
Result<inference::ModelConfig> ConfigFromJson(std::string_view json);

// "TYPE_INT64" enum ↔ KServe names / engine dtypes.
std::string_view ConfigTypeToDatatype(inference::DataType t);
inference::DataType DatatypeToConfigType(std::string_view datatype);
Result<DType> ConfigTypeToDType(inference::DataType t);
inference::DataType DTypeToConfigType(DType t);

// A string parameter of the config ("" when absent).
std::string ConfigParameter(const inference::ModelConfig& config, std::string_view key);

}  // namespace surge::serve
