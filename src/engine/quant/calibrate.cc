#include "engine/quant/calibrate.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/logging.h"
#include "engine/builder/builder.h"
#include "engine/runtime/plan_config.h"

namespace surge::engine::quant {
namespace {

bool IsFloat(const ir::Value& v) {
  return v.dtype == DType::kFloat32 || v.dtype == DType::kUndefined;
}

// Adds the values of `t` to `s`, skipping token rows whose mask is 0 when t is [B, S, ...] and
// the mask [B, S].
void Observe(const Tensor& t, const Tensor* mask, TensorStats* s) {
  Tensor f = t.dtype() == DType::kFloat32 ? t : t.ToFloat32();
  auto all = f.span<float>();
  auto add = [&](std::span<const float> part) {
    if (part.empty()) return;
    s->hist.Add(part);
    for (float v : part) {
      if (!std::isfinite(v)) continue;
      s->min = std::min<double>(s->min, v);
      s->max = std::max<double>(s->max, v);
    }
  };
  const bool token_rows =
      mask != nullptr && f.rank() >= 3 && f.dim(0) == mask->dim(0) && f.dim(1) == mask->dim(1);
  if (!token_rows) {
    add(all);
    return;
  }
  const int64_t rows = mask->numel();
  const int64_t width = rows ? f.numel() / rows : 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (mask->GetInt(r) != 0) add(all.subspan(r * width, width));
  }
}

}  // namespace

Result<std::vector<QuantLayer>> QuantizableLayers(const ir::Graph& g) {
  std::vector<QuantLayer> out;
  std::set<std::string> names;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const bool linear = n.domain == ir::kSurgeDomain && n.op_type == "Linear";
    const bool matmul = n.domain.empty() && n.op_type == "MatMul";
    if (!linear && !matmul) continue;
    const int w = n.input(1), x = n.input(0);
    if (w < 0 || x < 0 || !g.values[w].is_constant() ||
        g.values[w].constant.dtype() != DType::kFloat32 || g.values[w].constant.rank() != 2 ||
        !IsFloat(g.values[x])) {
      continue;
    }
    if (!names.insert(n.name).second) {
      return InvalidArgumentError(
          "two quantisable layers are both named '{}' and layers are addressed by node name: "
          "optimise the graph first (passes::Optimize, as `surge build` and `surge calibrate` "
          "do), which names every node uniquely, or name the nodes uniquely",
          n.name.empty() ? std::string("(no name)") : n.name);
    }
    out.push_back({static_cast<int>(i), n.name, g.values[x].name, g.values[w].constant.dim(0),
                   g.values[w].constant.dim(1)});
  }
  return out;
}

const Tensor* FindMask(const TensorMap& inputs) {
  for (const auto& [name, t] : inputs) {
    if (name.find("mask") != std::string::npos && t.rank() == 2 && !IsFloating(t.dtype())) {
      return &t;
    }
  }
  return nullptr;
}

Result<Profile> ProfileCovering(const ir::Graph& graph, std::span<const TensorMap> batches) {
  Profile p;
  for (int id : graph.inputs) {
    const ir::Value& v = graph.values[id];
    InputProfile ip{v.name, {}, {}, {}};
    for (const TensorMap& b : batches) {
      auto it = b.find(v.name);
      if (it == b.end()) continue;
      const Shape& s = it->second.shape();
      if (ip.max.empty()) ip.max.assign(s.size(), 1);
      if (s.size() != ip.max.size()) {
        return InvalidArgumentError("input '{}' has rank {} in one batch and {} in another", v.name,
                                    s.size(), ip.max.size());
      }
      for (size_t d = 0; d < s.size(); ++d) ip.max[d] = std::max(ip.max[d], s[d]);
    }
    if (ip.max.empty()) continue;
    ip.min.assign(ip.max.size(), 1);
    for (size_t d = 0; d < ip.max.size(); ++d) {
      if (v.shape && d < v.shape->size() && (*v.shape)[d].IsStatic()) {
        ip.min[d] = (*v.shape)[d].StaticValue();
      }
    }
    ip.opt = ip.max;
    p.inputs.push_back(std::move(ip));
  }
  return p;
}

Result<CalibrationCache> Calibrate(const ir::Graph& graph, std::span<const TensorMap> calibration,
                                   std::vector<TensorMap> holdout, const std::string& model_label,
                                   const CalibrateOptions& options) {
  if (calibration.empty()) {
    return InvalidArgumentError(
        "calibration needs at least one batch of inputs; the calibration set is empty");
  }
  SURGE_ASSIGN_OR_RETURN(std::vector<QuantLayer> layers, QuantizableLayers(graph));
  if (layers.empty()) {
    return InvalidArgumentError(
        "model '{}' has no layer to quantise (no Linear/MatMul with a "
        "constant weight)",
        model_label);
  }
  CalibrationCache cache;
  SURGE_ASSIGN_OR_RETURN(cache.model_hash, ModelHash(graph));
  cache.model = model_label;
  cache.surge_version = std::string(SurgeVersion());

  // The observer graph: every observed tensor that is not already an input becomes an output.
  ir::Graph observer = graph;
  std::vector<std::string> observed;
  std::set<std::string> seen;
  for (const QuantLayer& l : layers) {
    if (seen.insert(l.input).second) observed.push_back(l.input);
  }
  std::set<int> outputs(observer.outputs.begin(), observer.outputs.end());
  std::set<std::string> input_names;
  for (int id : observer.inputs) input_names.insert(observer.values[id].name);
  for (const std::string& name : observed) {
    const int id = observer.FindValue(name);
    SURGE_CHECK(id >= 0, "observed value '{}' not in the graph", name);
    if (!input_names.count(name) && outputs.insert(id).second) observer.outputs.push_back(id);
  }
  BuilderConfig config;
  config.backend = "cpu";
  config.precision = Precision::kFp32;
  config.num_threads = options.num_threads;
  SURGE_ASSIGN_OR_RETURN(config.profile, ProfileCovering(graph, calibration));
  auto bytes = builder::BuildPlanFromGraph(observer, config);
  if (!bytes.ok()) return bytes.status().WithContext("building the calibration engine");
  SURGE_ASSIGN_OR_RETURN(
      auto engine,
      Engine::LoadFromMemory({reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()}));
  SURGE_ASSIGN_OR_RETURN(auto ctx, engine->CreateContext());
  for (const std::string& name : observed) {
    cache.tensors.emplace(name, TensorStats{AbsHistogram(options.bins), INFINITY, -INFINITY});
  }
  for (size_t b = 0; b < calibration.size(); ++b) {
    const TensorMap& batch = calibration[b];
    auto out = ctx->Run(batch);
    if (!out.ok()) {
      return out.status().WithContext(
          fmt::format("calibration batch {} of {}", b + 1, calibration.size()));
    }
    const Tensor* mask = FindMask(batch);
    for (const std::string& name : observed) {
      auto it = out->find(name);
      const Tensor* t = it != out->end() ? &it->second : nullptr;
      if (t == nullptr) {
        auto in = batch.find(name);
        if (in == batch.end()) return InternalError("observed tensor '{}' was not produced", name);
        t = &in->second;
      }
      Observe(*t, mask, &cache.tensors.at(name));
    }
    ++cache.batches;
    const Tensor* first = batch.empty() ? nullptr : &batch.begin()->second;
    if (mask != nullptr) {
      cache.sequences += mask->dim(0);
      for (int64_t i = 0; i < mask->numel(); ++i) cache.tokens += mask->GetInt(i) != 0;
    } else if (first != nullptr && first->rank() >= 1) {
      cache.sequences += first->dim(0);
      cache.tokens += first->numel();
    }
  }
  for (auto& [name, s] : cache.tensors) {
    if (s.hist.total() == 0) s.min = s.max = 0;
  }
  cache.holdout = std::move(holdout);
  SURGE_LOG_INFO("calibrated {} tensors of '{}' on {} batches ({} sequences, {} tokens)",
                 cache.tensors.size(), model_label, cache.batches, cache.sequences, cache.tokens);
  return cache;
}

}  // namespace surge::engine::quant
