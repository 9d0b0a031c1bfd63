// gRPC front end: inference.GRPCInferenceService (Triton's protocol) on grpc++'s asynchronous API:
// a few threads poll one completion queue and serve every call; no call holds a thread while its
// request waits in a queue. gRPC headers stay inside grpc_server.cc.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "serve/api.h"

namespace surge::serve {

struct GrpcServerOptions {
  std::string address = "0.0.0.0";
  int port = 8001;  // 0: any free port
  int max_message_bytes = 64 << 20;
  int threads = 2;  // threads polling the completion queue (Triton's default infer thread count)
};

class GrpcServer {
 public:
  GrpcServer(GrpcServerOptions options, ApiContext* ctx);
  ~GrpcServer();
  Status Start();
  // Stops taking calls; in-flight calls finish (bounded wait). Idempotent.
  void Stop();
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace surge::serve
