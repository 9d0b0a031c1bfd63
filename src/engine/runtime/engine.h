// The run-time API: an Engine is a loaded plan (immutable, shared by any number of threads); an
// ExecutionContext runs it (owns activations; one thread at a time). As in TensorRT:
//
//   SURGE_ASSIGN_OR_RETURN(auto engine, Engine::Load("model.plan"));
//   SURGE_ASSIGN_OR_RETURN(auto ctx, engine->CreateContext());
//   SURGE_ASSIGN_OR_RETURN(TensorMap out, ctx->Run({{"input_ids", ids}, {"attention_mask", m}}));
//
// Load maps the plan (constants are zero-copy views into the mapping, which stays alive as long as
// the engine or any context does), checks it (format, checksums, backend, device arch) and hands
// graph and tactics to the backend named in the plan. Run checks every input: present, dtype
// (int32 is widened to int64 where int64 is expected), rank, static dims, symbolic dims bound
// consistently across inputs (batch and seq equal everywhere), and the optimisation profile; each
// failure is an InvalidArgument/OutOfRange error naming the input.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "engine/ir/dim.h"
#include "engine/ir/graph.h"
#include "engine/plan/plan_file.h"
#include "engine/runtime/backend.h"
#include "engine/runtime/plan_config.h"
#include "engine/runtime/profile.h"

namespace surge::engine {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  ir::SymShape shape;
};

using TensorMap = std::map<std::string, Tensor, std::less<>>;

class ExecutionContext;

class Engine : public std::enable_shared_from_this<Engine> {
 public:
  static Result<std::shared_ptr<const Engine>> Load(const std::string& plan_path,
                                                    const EngineOptions& options = {});
  // The same from plan bytes in memory (copied).
  static Result<std::shared_ptr<const Engine>> LoadFromMemory(std::span<const uint8_t> plan,
                                                              const EngineOptions& options = {});

  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
  const Profile& profile() const { return config_.builder.profile; }
  const PlanConfig& plan_config() const { return config_; }
  const plan::PlanFile& plan() const { return *plan_; }
  // The optimised graph (constants view the plan).
  const ir::Graph& graph() const { return *graph_; }
  const std::string& backend_name() const { return plan_->backend(); }
  const std::string& device_arch() const { return plan_->device_arch(); }
  size_t weights_bytes() const;
  // The backend's description (kernels, memory plan).
  std::string Describe() const;

  // A new context; thread-safe.
  Result<std::unique_ptr<ExecutionContext>> CreateContext() const;

  // The checks Run performs: returns the inputs in graph-input order (int32 ids widened to int64)
  // and, in `bindings`, the value of every symbol.
  Result<std::vector<Tensor>> PrepareInputs(const TensorMap& inputs,
                                            ir::SymbolBindings* bindings) const;

  // Constructed through Load only.
  Engine() = default;

 private:
  static Result<std::shared_ptr<const Engine>> Init(std::shared_ptr<const plan::PlanFile> plan,
                                                    const EngineOptions& options);

  std::shared_ptr<const plan::PlanFile> plan_;
  PlanConfig config_;
  EngineOptions options_;
  std::shared_ptr<const ir::Graph> graph_;
  std::vector<TensorInfo> inputs_;
  std::vector<TensorInfo> outputs_;
  std::unique_ptr<BackendEngine> backend_engine_;
  mutable std::mutex create_mu_;
};

class ExecutionContext {
 public:
  // Runs the engine on named inputs; returns every graph output by name. Output tensors may view
  // memory owned by this context that stays valid until the next Run.
  Result<TensorMap> Run(const TensorMap& inputs);
  const Engine& engine() const { return *engine_; }

 private:
  friend class Engine;
  ExecutionContext(std::shared_ptr<const Engine> engine, std::unique_ptr<BackendContext> backend)
      : engine_(std::move(engine)), backend_(std::move(backend)) {}

  std::shared_ptr<const Engine> engine_;
  std::unique_ptr<BackendContext> backend_;
};

}  // namespace surge::engine
