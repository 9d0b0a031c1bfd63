// Helpers shared by the engine subcommands (build, inspect, infer, bench, compare): tensors to and
// from JSON ({"name": {"shape": [..], "data": [..], "dtype": ".."}}), JSON files ("-" = stdin),
// and synthetic inputs that a model accepts (ids within its vocabulary, masks with padding).
#pragma once

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/runtime/engine.h"

namespace surge::cli {

namespace ir = engine::ir;

// Parses a JSON file, or stdin for "-".
Result<nlohmann::json> ReadJson(const std::string& path);
// Writes `text` to `path` ("-" or empty: stdout).
Status WriteText(const std::string& path, const std::string& text);

// Named tensors from {"name": {"shape": [..], "data": [..]}, ...}. Each tensor takes the dtype of
// the engine input of that name (or its "dtype" field, else float32 for fractional data and int64
// otherwise); integer inputs reject fractional data. Errors name the input.
Result<engine::TensorMap> TensorsFromJson(const nlohmann::json& j, const engine::Engine* engine);
nlohmann::json TensorToJson(const Tensor& t);
nlohmann::json TensorsToJson(const engine::TensorMap& tensors);

// Rows of the word-embedding table (what input ids must stay below), or 0 when not found.
int64_t VocabSize(const ir::Graph& graph);

struct SyntheticOptions {
  int64_t batch = 1;
  int64_t seq = 128;
  bool random_padding = false;  // masks zero a random tail of each row
  uint64_t seed = 1;
};
// The concrete shape of every input for `batch` × `seq` (symbols like "batch" or a first dim take
// `batch`, other symbols `seq`), or the explicit per-input shapes in `shapes`.
Result<std::map<std::string, Shape>> ResolveShapes(const engine::Engine& engine,
                                                   const SyntheticOptions& options,
                                                   const std::map<std::string, Shape>& shapes);
// Valid random inputs: ids in [0, vocab), token types 0, masks 1 (with optional padding),
// position ids 0..S-1, floats ~ N(0, 1).
Result<engine::TensorMap> SyntheticInputs(const engine::Engine& engine,
                                          const std::map<std::string, Shape>& shapes,
                                          const SyntheticOptions& options);

// Parses "input_ids:8x128,attention_mask:8x128".
Result<std::map<std::string, Shape>> ParseShapeList(const std::string& text);

// A fraction from "0.5%" (0.005) or "0.005"; InvalidArgument naming `flag` outside [0, 1].
Result<double> ParseFraction(const std::string& text, const std::string& flag);

// Prints "error: <status>" to stderr and returns 1.
int Fail(const Status& status);

}  // namespace surge::cli
