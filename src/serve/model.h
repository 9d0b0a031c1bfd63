// One loaded version of a model: its effective config, the engine and one ExecutionContext per
// instance behind a DynamicBatcher, optional tokenizer (raw text in) and label files (labels out),
// and its statistics.
//
// Submit() validates a request against the config (names, datatypes, shapes, batch size, the
// engine's profile), tokenises BYTES text when the config names a tokenizer, and queues it; the
// callback receives the requested outputs (with the classification extension applied). Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/runtime/engine.h"
#include "serve/infer.h"
#include "serve/proto/model_config.pb.h"
#include "serve/scheduler.h"
#include "serve/stats.h"
#include "text/tokenizer.h"

namespace surge::serve {

struct LoadOptions {
  std::string plan_cache_dir;      // where plans built from ONNX/HF models are cached
  int default_max_batch_size = 4;  // Triton's default for auto-completed configs
  std::string backend;             // "" : cuda when built in and the config allows GPU, else cpu
};

class ModelVersion {
 public:
  // Loads `<model_dir>/<version>/` with `config` (auto-completed from the engine), builds or
  // reuses the plan, creates the instances and runs warm-up. Returns a version ready to serve.
  static Result<std::shared_ptr<ModelVersion>> Load(const std::string& model_dir, int64_t version,
                                                    inference::ModelConfig config,
                                                    const LoadOptions& options);
  ~ModelVersion();

  // Queues `request`; `done` is called exactly once (also on failure). When this version is being
  // retired (a hot swap raced with the caller) and `retry` is set, the request goes to `retry`
  // instead, untouched.
  using Retry = std::function<void(InferRequest, InferCallback)>;
  void Submit(InferRequest request, InferCallback done, const Retry& retry = {});
  // Stops taking requests and drains the queue (blocking). Idempotent.
  void Shutdown();
  // Wakes the batcher so that cancelled requests leave the queue now.
  void Poke() { batcher_->Poke(); }

  const std::string& name() const { return config_.name(); }
  int64_t version() const { return version_; }
  const std::string& version_string() const { return version_str_; }
  const inference::ModelConfig& config() const { return config_; }
  const engine::Engine& engine() const { return *engine_; }
  ModelStats& stats() { return stats_; }
  size_t pending() const { return batcher_->pending(); }
  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  const std::string& text_input() const { return text_input_; }

 private:
  ModelVersion() = default;
  Status Validate(const InferRequest& r, engine::TensorMap* inputs) const;
  Status Tokenize(const InferTensor& text, engine::TensorMap* inputs) const;
  Status Warmup();
  Result<InferResponse> MakeResponse(const InferRequest& r, engine::TensorMap outputs) const;
  void Finish(const Status& s, Clock::time_point received);

  inference::ModelConfig config_;
  std::string model_dir_;
  int64_t version_ = 0;
  std::string version_str_;
  std::shared_ptr<const engine::Engine> engine_;
  std::vector<std::unique_ptr<engine::ExecutionContext>> contexts_;
  std::unique_ptr<DynamicBatcher> batcher_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::string text_input_;  // name of the BYTES input carrying raw text
  int tokenizer_max_length_ = 0;
  std::map<std::string, std::vector<std::string>> labels_;  // output name -> labels
  ModelStats stats_;
};

// Finds the model file inside a version folder: model.plan, model.onnx, an ONNX file named by
// default_model_filename, or a Hugging Face folder (config.json + weights).
Result<std::string> FindModelFile(const std::string& version_dir,
                                  const inference::ModelConfig& config);

// The engine for `model_path`: loaded directly for a plan, else built with `builder_config` and
// cached as `<cache_dir>/<name>-<xxh64 of model bytes, backend, arch, builder config>.plan`.
Result<std::shared_ptr<const engine::Engine>> LoadOrBuildEngine(const std::string& model_path,
                                                                const engine::BuilderConfig& bc,
                                                                const std::string& cache_dir,
                                                                bool* cache_hit);

}  // namespace surge::serve
