// Profile resolution and plan assembly: everything after the passes. Kept apart from builder.cc so
// that code holding an optimised graph (tests, tools) links without the importers.
#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "core/logging.h"
#include "engine/builder/builder.h"
#include "engine/plan/plan_file.h"
#include "engine/runtime/graph_codec.h"
#include "engine/runtime/plan_config.h"

namespace surge::engine::builder {

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string InputNames(const ir::Graph& g) {
  std::string s;
  for (int id : g.inputs) s += (s.empty() ? "" : ", ") + g.values[id].name;
  return s;
}

bool Contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

// The largest sequence length the model's position table allows, or 0 when unknown.
int64_t PositionLimit(const ir::Graph& g) {
  for (const auto& n : g.nodes) {
    if (n.domain != ir::kSurgeDomain || n.op_type != "EmbedLayerNorm") continue;
    int pos = n.input(4);
    if (pos < 0 || !g.values[pos].is_constant() || g.values[pos].constant.rank() != 2) continue;
    int64_t rows = g.values[pos].constant.dim(0);
    if (n.GetString("position_mode", "arange") == "roberta") {
      rows -= n.GetInt("padding_idx", 1) + 1;
    }
    return rows > 0 ? rows : 0;
  }
  return 0;
}

struct Range {
  int64_t min, opt, max;
};

}  // namespace

std::string BuildReport::ToJson() const {
  nlohmann::json j;
  j["import_ms"] = import_ms;
  j["optimize_ms"] = optimize_ms;
  j["lower_ms"] = lower_ms;
  j["write_ms"] = write_ms;
  j["total_ms"] = total_ms;
  j["ops_before"] = passes.ops_before;
  j["ops_after"] = passes.ops_after;
  j["passes"] = passes.log;
  j["weights_bytes"] = weights_bytes;
  j["tactics_bytes"] = tactics_bytes;
  j["profile"] = profile.ToString();
  return j.dump();
}

Result<Profile> ResolveProfile(const ir::Graph& graph, const Profile& given) {
  std::map<std::string, Range> symbol_ranges;  // from the given entries
  for (const auto& p : given.inputs) {
    int id = -1;
    for (int in : graph.inputs) {
      if (graph.values[in].name == p.name) id = in;
    }
    if (id < 0) {
      return InvalidArgumentError(
          "the profile names input '{}', which the model does not have "
          "(inputs: {})",
          p.name, InputNames(graph));
    }
    const ir::SymShape& shape = *graph.values[id].shape;
    if (p.min.size() != shape.size() || p.opt.size() != shape.size() ||
        p.max.size() != shape.size()) {
      return InvalidArgumentError("the profile for '{}' has rank {}, the input is {} (rank {})",
                                  p.name, p.min.size(), ir::SymShapeToString(shape), shape.size());
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      if (p.min[d] < 1 || p.min[d] > p.opt[d] || p.opt[d] > p.max[d]) {
        return InvalidArgumentError("the profile for '{}' needs 1 <= MIN <= OPT <= MAX in dim {}",
                                    p.name, d);
      }
      if (shape[d].IsStatic() &&
          (shape[d].StaticValue() < p.min[d] || shape[d].StaticValue() > p.max[d])) {
        return InvalidArgumentError(
            "the profile for '{}' allows {}..{} in dim {}, but the model "
            "fixes it at {}",
            p.name, p.min[d], p.max[d], d, shape[d].StaticValue());
      }
      if (shape[d].IsSymbol()) {
        const std::string sym = shape[d].Symbols()[0];
        if (!symbol_ranges.count(sym)) symbol_ranges[sym] = {p.min[d], p.opt[d], p.max[d]};
      }
    }
  }
  const int64_t pos_limit = PositionLimit(graph);
  Profile out = given;
  for (int id : graph.inputs) {
    const ir::Value& v = graph.values[id];
    if (given.Find(v.name) != nullptr || !v.shape) continue;
    const ir::SymShape& shape = *v.shape;
    if (std::all_of(shape.begin(), shape.end(), [](const ir::Dim& d) { return d.IsStatic(); })) {
      continue;
    }
    InputProfile ip{v.name, {}, {}, {}};
    for (size_t d = 0; d < shape.size(); ++d) {
      Range r;
      if (shape[d].IsStatic()) {
        int64_t s = shape[d].StaticValue();
        r = {s, s, s};
      } else {
        std::string sym = shape[d].IsSymbol() ? shape[d].Symbols()[0] : shape[d].ToString();
        if (auto it = symbol_ranges.find(sym); it != symbol_ranges.end()) {
          r = it->second;
        } else {
          bool batch =
              Contains(sym, "batch") || (d == 0 && !Contains(sym, "seq") && !Contains(sym, "len"));
          r = batch ? Range{kDefaultBatch[0], kDefaultBatch[1], kDefaultBatch[2]}
                    : Range{kDefaultSeq[0], kDefaultSeq[1], kDefaultSeq[2]};
          if (!batch && pos_limit > 0 && r.max > pos_limit) {
            SURGE_LOG_INFO("profile: '{}' limited to {} by the model's position embeddings", sym,
                           pos_limit);
            r.max = pos_limit;
            r.opt = std::min(r.opt, r.max);
          }
          symbol_ranges[sym] = r;
        }
      }
      ip.min.push_back(r.min);
      ip.opt.push_back(r.opt);
      ip.max.push_back(r.max);
    }
    out.inputs.push_back(std::move(ip));
  }
  return out;
}

Result<std::string> BuildPlanFromGraph(const ir::Graph& graph, const BuilderConfig& config,
                                       BuildReport* report) {
  BuildReport local;
  if (report == nullptr) report = &local;
  Backend* backend = FindBackend(config.backend);
  if (backend == nullptr) {
    std::string names;
    for (const auto& n : BackendNames()) names += (names.empty() ? "" : ", ") + n;
    return InvalidArgumentError("unknown backend '{}' (this build has: {})", config.backend, names);
  }
  SURGE_RETURN_IF_ERROR(graph.Validate());
  for (int id : graph.inputs) {
    const ir::Value& v = graph.values[id];
    if (!v.shape || v.dtype == DType::kUndefined) {
      return InvalidArgumentError("graph input '{}' has no dtype or shape", v.name);
    }
  }
  for (int id : graph.outputs) {
    const ir::Value& v = graph.values[id];
    if (!v.shape || v.dtype == DType::kUndefined) {
      return InvalidArgumentError("graph output '{}' has no inferred dtype or shape", v.name);
    }
  }
  BuilderConfig resolved = config;
  resolved.backend = std::string(backend->name());
  SURGE_ASSIGN_OR_RETURN(resolved.profile, ResolveProfile(graph, config.profile));
  report->profile = resolved.profile;

  auto t0 = Clock::now();
  auto tactics = backend->Lower(graph, resolved);
  if (!tactics.ok()) {
    return tactics.status().WithContext(fmt::format("backend '{}' lowering", backend->name()));
  }
  report->lower_ms = MsSince(t0);

  t0 = Clock::now();
  const auto tactic_bytes =
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(tactics->data()), tactics->size());
  auto kept = backend->ConstantsKeptByTactics(graph, resolved, tactic_bytes);
  if (!kept.ok()) {
    return kept.status().WithContext(fmt::format("backend '{}' lowering", backend->name()));
  }
  SURGE_ASSIGN_OR_RETURN(EncodedGraph encoded, EncodeGraph(graph, *kept));
  report->weights_bytes = encoded.weights.size();
  report->tactics_bytes = tactics->size();
  // The stored report's total covers everything up to lowering (the plan does not exist yet).
  if (report->total_ms == 0) {
    report->total_ms = report->import_ms + report->optimize_ms + report->lower_ms;
  }
  PlanConfig pc{resolved, std::string(SurgeVersion()), report->ToJson()};
  plan::PlanWriter writer(std::string(backend->name()), backend->DeviceArch());
  SURGE_RETURN_IF_ERROR(writer.AddSection(plan::kConfigSection, PlanConfigToJson(pc)));
  SURGE_RETURN_IF_ERROR(writer.AddSection(plan::kGraphSection, std::move(encoded.graph)));
  SURGE_RETURN_IF_ERROR(writer.AddSection(plan::kWeightsSection, std::move(encoded.weights)));
  SURGE_RETURN_IF_ERROR(writer.AddSection(plan::kTacticsSection, std::move(*tactics)));
  if (!resolved.quant.empty()) {
    SURGE_RETURN_IF_ERROR(writer.AddSection(plan::kQuantSection, QuantSpecToJson(resolved.quant)));
  }
  SURGE_ASSIGN_OR_RETURN(std::string bytes, writer.Finish());
  report->write_ms = MsSince(t0);
  report->plan_bytes = bytes.size();
  return bytes;
}

}  // namespace surge::engine::builder
