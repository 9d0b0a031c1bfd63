// `surge serve`: the model repository behind the HTTP (KServe v2), gRPC and metrics endpoints.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "serve/repository.h"

namespace surge::serve {

struct ServerOptions {
  RepositoryOptions repository;
  bool allow_http = true;
  std::string http_address = "0.0.0.0";
  int http_port = 8000;
  int http_threads = 2;
  bool allow_grpc = true;
  std::string grpc_address = "0.0.0.0";
  int grpc_port = 8001;
  int grpc_infer_threads = 2;
  bool allow_metrics = true;
  std::string metrics_address = "0.0.0.0";
  int metrics_port = 8002;
  int metrics_interval_ms = 2000;
  size_t max_request_bytes = 64u << 20;
  std::string admin_token;
};

class Server {
 public:
  // Loads the start-up models and opens the endpoints. Ports given as 0 pick free ports.
  static Result<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();
  // Graceful: stops accepting, answers what is in flight, drains the models. Idempotent.
  void Stop();

  int http_port() const;
  int grpc_port() const;
  int metrics_port() const;
  ModelRepository& repository();

 private:
  Server() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace surge::serve
