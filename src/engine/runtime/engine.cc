#include "engine/runtime/engine.h"

#include <algorithm>

#include "core/logging.h"
#include "engine/runtime/graph_codec.h"

namespace surge::engine {

namespace {

std::string Join(const std::vector<TensorInfo>& infos) {
  std::string s;
  for (const auto& i : infos) s += (s.empty() ? "" : ", ") + i.name;
  return s;
}

std::string DescribeInfo(const TensorInfo& info) {
  return fmt::format("{} {}", DTypeName(info.dtype), ir::SymShapeToString(info.shape));
}

Result<TensorInfo> InfoOf(const ir::Graph& g, int id) {
  const ir::Value& v = g.values[id];
  if (!v.shape) return DataLossError("graph value '{}' has no shape", v.name);
  return TensorInfo{v.name, v.dtype, *v.shape};
}

}  // namespace

Result<std::shared_ptr<const Engine>> Engine::Load(const std::string& plan_path,
                                                   const EngineOptions& options) {
  SURGE_ASSIGN_OR_RETURN(auto plan, plan::PlanFile::Open(plan_path));
  return Init(std::move(plan), options);
}

Result<std::shared_ptr<const Engine>> Engine::LoadFromMemory(std::span<const uint8_t> bytes,
                                                             const EngineOptions& options) {
  SURGE_ASSIGN_OR_RETURN(auto plan, plan::PlanFile::FromBytes(bytes));
  return Init(std::move(plan), options);
}

Result<std::shared_ptr<const Engine>> Engine::Init(std::shared_ptr<const plan::PlanFile> plan,
                                                   const EngineOptions& options) {
  const std::string where = "plan '" + plan->source() + "'";
  Backend* backend = FindBackend(plan->backend());
  if (backend == nullptr) {
    std::string names;
    for (const auto& n : BackendNames()) names += (names.empty() ? "" : ", ") + n;
    return FailedPreconditionError(
        "{} was built for backend '{}', which this build of surge does not include (available: "
        "{})",
        where, plan->backend(), names);
  }
  const std::string arch = backend->DeviceArch();
  if (arch != plan->device_arch()) {
    return FailedPreconditionError(
        "{} was built for device arch '{}' (backend '{}'), but this machine is '{}'; rebuild the "
        "plan on this machine",
        where, plan->device_arch(), plan->backend(), arch);
  }

  auto engine = std::make_shared<Engine>();
  engine->plan_ = plan;
  engine->options_ = options;
  SURGE_ASSIGN_OR_RETURN(auto config_bytes, plan->Section(plan::kConfigSection));
  auto config =
      PlanConfigFromJson({reinterpret_cast<const char*>(config_bytes.data()), config_bytes.size()});
  if (!config.ok()) return config.status().WithContext(where);
  engine->config_ = std::move(config).value();
  if (engine->config_.builder.backend != plan->backend()) {
    return DataLossError("{}: header says backend '{}', config says '{}'", where, plan->backend(),
                         engine->config_.builder.backend);
  }

  if (plan->FindSection(plan::kQuantSection) != nullptr) {
    SURGE_ASSIGN_OR_RETURN(auto quant_bytes, plan->Section(plan::kQuantSection));
    auto quant =
        QuantSpecFromJson({reinterpret_cast<const char*>(quant_bytes.data()), quant_bytes.size()});
    if (!quant.ok()) return quant.status().WithContext(where);
    engine->config_.builder.quant = std::move(quant).value();
  }
  SURGE_ASSIGN_OR_RETURN(auto graph_bytes, plan->Section(plan::kGraphSection));
  SURGE_ASSIGN_OR_RETURN(auto weights, plan->Section(plan::kWeightsSection));
  SURGE_ASSIGN_OR_RETURN(auto tactics, plan->Section(plan::kTacticsSection));
  auto decoded = DecodeGraph(graph_bytes, weights);
  if (!decoded.ok()) return decoded.status().WithContext(where);
  // The graph's constants view the mapping: the graph keeps the plan alive, however long a backend
  // holds on to it.
  engine->graph_ = std::shared_ptr<const ir::Graph>(new ir::Graph(std::move(decoded).value()),
                                                    [plan](const ir::Graph* g) { delete g; });
  const ir::Graph& g = *engine->graph_;
  for (int id : g.inputs) {
    SURGE_ASSIGN_OR_RETURN(auto info, InfoOf(g, id));
    engine->inputs_.push_back(std::move(info));
  }
  for (int id : g.outputs) {
    SURGE_ASSIGN_OR_RETURN(auto info, InfoOf(g, id));
    engine->outputs_.push_back(std::move(info));
  }
  for (const auto& p : engine->config_.builder.profile.inputs) {
    auto it = std::find_if(engine->inputs_.begin(), engine->inputs_.end(),
                           [&](const TensorInfo& i) { return i.name == p.name; });
    if (it == engine->inputs_.end() || it->shape.size() != p.min.size()) {
      return DataLossError("{}: profile for '{}' does not match any input of the graph", where,
                           p.name);
    }
  }

  auto backend_engine = backend->Load(engine->graph_, tactics, engine->config_.builder, options);
  if (!backend_engine.ok()) return backend_engine.status().WithContext(where);
  engine->backend_engine_ = std::move(backend_engine).value();
  SURGE_LOG_DEBUG("loaded {}: backend {}, {} nodes, {} bytes of weights", where, plan->backend(),
                  g.nodes.size(), weights.size());
  return std::shared_ptr<const Engine>(std::move(engine));
}

size_t Engine::weights_bytes() const {
  const plan::SectionInfo* s = plan_->FindSection(plan::kWeightsSection);
  return s ? s->size : 0;
}

std::string Engine::Describe() const { return backend_engine_->Describe(); }

Result<std::unique_ptr<ExecutionContext>> Engine::CreateContext() const {
  std::unique_ptr<BackendContext> backend;
  {
    std::lock_guard<std::mutex> lock(create_mu_);
    SURGE_ASSIGN_OR_RETURN(backend, backend_engine_->CreateContext());
  }
  return std::unique_ptr<ExecutionContext>(
      new ExecutionContext(shared_from_this(), std::move(backend)));
}

Result<std::vector<Tensor>> Engine::PrepareInputs(const TensorMap& inputs,
                                                  ir::SymbolBindings* bindings) const {
  for (const auto& [name, t] : inputs) {
    bool known = std::any_of(inputs_.begin(), inputs_.end(),
                             [&](const TensorInfo& i) { return i.name == name; });
    if (!known) {
      return InvalidArgumentError("unknown input '{}'; the engine's inputs are: {}", name,
                                  Join(inputs_));
    }
  }
  std::vector<Tensor> ordered;
  ordered.reserve(inputs_.size());
  ir::SymbolBindings bound;
  std::map<std::string, std::string> bound_by;  // symbol → "input 'x' dim i"
  for (const auto& info : inputs_) {
    auto it = inputs.find(info.name);
    if (it == inputs.end()) {
      return InvalidArgumentError("missing input '{}' ({})", info.name, DescribeInfo(info));
    }
    Tensor t = it->second;
    if (!t.defined() || t.empty()) {
      return InvalidArgumentError("input '{}' has no data", info.name);
    }
    if (t.dtype() != info.dtype) {
      if (t.dtype() == DType::kInt32 && info.dtype == DType::kInt64) {
        Tensor wide(DType::kInt64, t.shape());
        auto src = t.span<int32_t>();
        auto dst = wide.span<int64_t>();
        for (size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
        t = std::move(wide);
      } else {
        return InvalidArgumentError("input '{}' has dtype {}, expected {}", info.name,
                                    DTypeName(t.dtype()), DTypeName(info.dtype));
      }
    }
    if (t.rank() != info.shape.size()) {
      return InvalidArgumentError("input '{}' has rank {} (shape {}), expected rank {} ({})",
                                  info.name, t.rank(), ShapeToString(t.shape()), info.shape.size(),
                                  ir::SymShapeToString(info.shape));
    }
    for (size_t d = 0; d < info.shape.size(); ++d) {
      const ir::Dim& dim = info.shape[d];
      const int64_t actual = t.dim(d);
      if (dim.IsStatic()) {
        if (dim.StaticValue() != actual) {
          return InvalidArgumentError("input '{}' has shape {}: dim {} must be {}", info.name,
                                      ShapeToString(t.shape()), d, dim.StaticValue());
        }
      } else if (dim.IsSymbol()) {
        const std::string sym = dim.Symbols()[0];
        auto b = bound.find(sym);
        if (b == bound.end()) {
          bound[sym] = actual;
          bound_by[sym] = fmt::format("input '{}' dim {}", info.name, d);
        } else if (b->second != actual) {
          return InvalidArgumentError(
              "input '{}' has shape {}: dim {} ('{}') is {}, but {} set '{}' to {}", info.name,
              ShapeToString(t.shape()), d, sym, actual, bound_by[sym], sym, b->second);
        }
      }
    }
    ordered.push_back(std::move(t));
  }
  // Dims that are expressions of symbols (seq+1) are checked once every symbol is bound.
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const auto& info = inputs_[i];
    for (size_t d = 0; d < info.shape.size(); ++d) {
      const ir::Dim& dim = info.shape[d];
      if (dim.IsStatic() || dim.IsSymbol()) continue;
      auto v = dim.Eval(bound);
      if (!v.ok()) {
        return InvalidArgumentError("input '{}' dim {} ({}) cannot be evaluated: {}", info.name, d,
                                    dim.ToString(), v.status().message());
      }
      if (*v != ordered[i].dim(d)) {
        return InvalidArgumentError("input '{}' has shape {}: dim {} ({}) must be {}", info.name,
                                    ShapeToString(ordered[i].shape()), d, dim.ToString(), *v);
      }
    }
    SURGE_RETURN_IF_ERROR(profile().Check(info.name, ordered[i].shape()));
  }
  if (bindings != nullptr) *bindings = std::move(bound);
  return ordered;
}

Result<TensorMap> ExecutionContext::Run(const TensorMap& inputs) {
  SURGE_ASSIGN_OR_RETURN(std::vector<Tensor> ordered, engine_->PrepareInputs(inputs, nullptr));
  std::vector<Tensor> outputs;
  SURGE_RETURN_IF_ERROR(backend_->Execute(ordered, &outputs));
  const auto& infos = engine_->outputs();
  if (outputs.size() != infos.size()) {
    return InternalError("backend '{}' returned {} outputs, the graph has {}",
                         engine_->backend_name(), outputs.size(), infos.size());
  }
  TensorMap named;
  for (size_t i = 0; i < infos.size(); ++i) named.emplace(infos[i].name, std::move(outputs[i]));
  return named;
}

}  // namespace surge::engine
