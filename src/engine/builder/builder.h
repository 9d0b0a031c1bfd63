// The builder: model file → plan file, as `trtexec --onnx ... --saveEngine`:
//   import (ONNX or Hugging Face folder) → passes::Optimize → profile (defaults for every dynamic
//   input the config does not name) → backend Lower() → plan writer.
// Functions here are thread-compatible: concurrent builds of different models are fine.
#pragma once

#include <string>

#include "core/status.h"
#include "engine/ir/graph.h"
#include "engine/passes/passes.h"
#include "engine/runtime/backend.h"
#include "engine/runtime/profile.h"

namespace surge::engine::builder {

struct BuildReport {
  double import_ms = 0;
  double optimize_ms = 0;
  double lower_ms = 0;
  double write_ms = 0;
  double total_ms = 0;
  passes::PassReport passes;
  Profile profile;  // the one the plan was built for
  size_t plan_bytes = 0;
  size_t weights_bytes = 0;
  size_t tactics_bytes = 0;

  // {"import_ms":..,"ops_before":{..},"ops_after":{..},"passes":[..],...}
  std::string ToJson() const;
};

// Defaults for a dynamic input dim without a profile: batch-like dims (symbol named like "batch",
// or the first dim) 1..64 opt 8; every other dynamic dim 1..512 opt 128, capped at the position
// table of an EmbedLayerNorm when the graph has one.
inline constexpr int64_t kDefaultBatch[3] = {1, 8, 64};
inline constexpr int64_t kDefaultSeq[3] = {1, 128, 512};

// The profile a plan gets: `given` (checked: every named input exists, ranks match, static dims lie
// inside the range) plus defaults for every other input with symbolic dims.
Result<Profile> ResolveProfile(const ir::Graph& graph, const Profile& given);

// Lowers an already optimised graph with the configured backend and writes the plan bytes.
// `config.profile` is resolved with ResolveProfile first. `build_report_json` is stored in the
// plan's config section for `surge inspect`.
Result<std::string> BuildPlanFromGraph(const ir::Graph& graph, const BuilderConfig& config,
                                       BuildReport* report = nullptr);

// Imports `model_path` and runs the passes (what `surge inspect MODEL` shows).
Result<ir::Graph> ImportAndOptimize(const std::string& model_path,
                                    const passes::PassOptions& options, BuildReport* report);

// The whole build: model → plan bytes / plan file.
Result<std::string> Build(const std::string& model_path, const BuilderConfig& config,
                          BuildReport* report = nullptr);
Status BuildToFile(const std::string& model_path, const BuilderConfig& config,
                   const std::string& plan_path, BuildReport* report = nullptr);

}  // namespace surge::engine::builder
