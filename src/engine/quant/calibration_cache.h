// The calibration cache file (`surge calibrate -o model.calib`, `surge build --calibration`): what
// a calibration run measured, reusable by any number of builds of the same model with any
// calibrator (the histograms are kept, not just one threshold), and the held-out inputs the
// accuracy guard measures quantised plans on.
//
// Layout (little-endian):
//   0   char[8]  magic "SURGECAL"
//   8   u32      format version (kCalibrationCacheVersion)
//   12  u32      0
//   16  u64      payload size in bytes
//   24  u64      xxHash64 (seed 0) of the payload
//   32  payload  JSON: {"model_hash", "model", "surge_version", "batches", "sequences",
//                "tokens", "tensors": {name: {"min", "max", "range", "max_abs", "non_finite",
//                "counts": [..]}}, "holdout": [{input: {"dtype", "shape", "data"}}, ..]}
// Reading checks all of it and says what is wrong (not a cache, truncated, corrupt, other
// version, malformed field). The model hash (ModelHash) ties a cache to the optimised graph it
// was measured on; builds refuse a cache made for another model.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "engine/ir/graph.h"
#include "engine/quant/histogram.h"
#include "engine/runtime/engine.h"

namespace surge::engine::quant {

inline constexpr std::string_view kCalibrationMagic = "SURGECAL";
inline constexpr uint32_t kCalibrationCacheVersion = 1;

struct TensorStats {
  AbsHistogram hist;
  double min = 0, max = 0;  // signed extremes (0, 0 until values arrive)
};

struct CalibrationCache {
  std::string model_hash;  // ModelHash() of the optimised graph
  std::string model;       // where it was made from (for messages only)
  std::string surge_version;
  int64_t batches = 0, sequences = 0, tokens = 0;  // the calibration part (not the held-out one)
  std::map<std::string, TensorStats> tensors;      // by value name
  std::vector<TensorMap> holdout;                  // inputs for the accuracy guard
};

// Identifies an optimised graph: xxHash64 of its encoded structure and of its weights, as 32 hex
// digits. Stable across runs and machines for the same model file and surge version.
Result<std::string> ModelHash(const ir::Graph& graph);

std::string SerializeCache(const CalibrationCache& cache);
// `source` names the bytes in errors (a path).
Result<CalibrationCache> ParseCache(std::span<const uint8_t> bytes, std::string_view source);

// Written atomically (temporary file + rename).
Status WriteCache(const CalibrationCache& cache, const std::string& path);
// NotFound when missing; DataLoss when not a cache, truncated or corrupt; FailedPrecondition for
// another format version.
Result<CalibrationCache> ReadCache(const std::string& path);

// Tensors as JSON ({"dtype", "shape", "data"}), as the cache stores held-out inputs. Supports
// float32, int64, int32 (other dtypes: InvalidArgument).
Result<std::string> TensorMapToJson(const TensorMap& tensors);
Result<TensorMap> TensorMapFromJson(std::string_view json);

}  // namespace surge::engine::quant
