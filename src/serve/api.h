// The KServe v2 / Triton HTTP API and the metrics page as HttpHandlers, plus what the HTTP and
// gRPC front ends share: server metadata, error-code mapping, blocking repository actions run off
// the network threads.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "serve/repository.h"

namespace surge::serve {

// Runs blocking tasks (model load/unload) one at a time on its own thread.
class ControlQueue {
 public:
  ControlQueue();
  ~ControlQueue();
  void Post(std::function<void()> task);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::thread thread_;
};

struct ApiContext {
  ModelRepository* repo = nullptr;
  ControlQueue* control = nullptr;
  GpuSampler* gpus = nullptr;
  std::string server_name = "surge";
  std::string server_version;
  std::string admin_token;  // when set, repository APIs need "Authorization: Bearer <token>"
};

inline const std::vector<std::string>& ServerExtensions() {
  static const std::vector<std::string> kExtensions = {
      "classification",  "model_repository",    "model_repository(unload_dependents)",
      "schedule_policy", "model_configuration", "binary_tensor_data",
      "parameters",      "statistics"};
  return kExtensions;
}

// Triton's mapping of error codes to HTTP statuses.
int HttpStatusFor(StatusCode code);

HttpHandler MakeKServeHandler(ApiContext* ctx);
HttpHandler MakeMetricsHandler(ApiContext* ctx);

// Metrics for every ready model version (used by the metrics page).
std::vector<ModelMetricsView> MetricsViews(ModelRepository* repo,
                                           std::vector<std::shared_ptr<ModelVersion>>* keep);

// Exposed for tests: decodes a KServe JSON (+ binary) infer request body.
Status DecodeInferRequest(const HttpRequest& http, InferRequest* out);
// Encodes a response; binary outputs go after the JSON header (sets the header length).
HttpResponse EncodeInferResponse(const InferResponse& resp);

}  // namespace surge::serve
