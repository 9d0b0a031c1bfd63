// The model repository: Triton's layout (<repo>/<model>/config.pbtxt, <repo>/<model>/<version>/),
// model control (none / poll / explicit), version policies and hot swap.
//
// Load (or reload) of a model loads and warms every version its policy selects while the current
// versions keep serving, then switches atomically; the old versions drain their queues and are
// freed. A failed load leaves the serving versions untouched and records the reason. Unload
// removes the model from routing at once and drains it. Thread-safe; Load/Unload block (call them
// off the network threads).
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "serve/model.h"

namespace surge::serve {

enum class ModelControlMode { kNone, kPoll, kExplicit };
Result<ModelControlMode> ParseModelControlMode(std::string_view s);

struct RepositoryOptions {
  std::vector<std::string> paths;
  ModelControlMode mode = ModelControlMode::kNone;
  std::vector<std::string> startup_models;  // explicit mode; "*" loads all
  int poll_secs = 15;
  LoadOptions load;
  bool exit_on_error = false;  // fail Start() when a model fails to load at start-up
};

struct ModelIndexEntry {
  std::string name;
  std::string version;
  std::string state;  // READY, UNAVAILABLE, LOADING
  std::string reason;
};

// A model name is a single path component of [A-Za-z0-9_.-], not "." or "..".
Status ValidateModelName(std::string_view name);

class ModelRepository {
 public:
  explicit ModelRepository(RepositoryOptions options);
  ~ModelRepository();

  // Loads the start-up models for the mode; starts polling in poll mode.
  Status Start();
  void Stop();

  // Routes a request to the named (or latest ready) version. `done` is called exactly once.
  void Infer(InferRequest request, InferCallback done);

  // A ready version (version "" or "-1": the highest ready one).
  Result<std::shared_ptr<ModelVersion>> Find(std::string_view name, std::string_view version);
  // All ready versions of a model, ascending.
  std::vector<std::shared_ptr<ModelVersion>> Versions(std::string_view name);
  // Every ready version of every model (for statistics and metrics).
  std::vector<std::shared_ptr<ModelVersion>> AllVersions();

  // `config_json` (optional) overrides config.pbtxt, as Triton's load API "config" parameter.
  Status Load(const std::string& name, const std::string& config_json = "");
  Status Unload(const std::string& name);
  // Errors unless the mode is explicit (Triton's rule).
  Status CheckControlAllowed() const;

  std::vector<ModelIndexEntry> Index(bool ready_only);
  // True when every model that should be loaded is ready.
  bool Ready();
  // Notify cancellation of queued requests for `name` (wakes its schedulers).
  void Poke(std::string_view name);

  // One pass of the poller (exposed for tests).
  void PollOnce();

 private:
  struct Entry {
    std::string dir;
    std::map<int64_t, std::shared_ptr<ModelVersion>> versions;  // serving
    std::string state = "UNAVAILABLE";
    std::string reason;
    std::string fingerprint;  // what poll mode compares
  };

  Result<std::string> ModelDir(const std::string& name) const;
  std::vector<std::string> ScanModelNames() const;
  std::string Fingerprint(const std::string& dir) const;
  void Retire(std::vector<std::shared_ptr<ModelVersion>> old);
  void PollLoop();

  RepositoryOptions options_;
  std::mutex mu_;  // guards entries_ (held briefly)
  std::map<std::string, Entry, std::less<>> entries_;
  std::mutex load_mu_;  // one load/unload at a time
  std::atomic<bool> stop_{false};
  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  std::thread poller_;
};

}  // namespace surge::serve
