#include "serve/server.h"

#include "core/logging.h"
#include "serve/api.h"
#include "serve/grpc_server.h"
#include "serve/http_server.h"

#ifndef SURGE_VERSION_STRING
#define SURGE_VERSION_STRING "0.1.0"
#endif

namespace surge::serve {

struct Server::Impl {
  std::unique_ptr<ModelRepository> repo;
  std::unique_ptr<ControlQueue> control;
  std::unique_ptr<GpuSampler> gpus;
  ApiContext ctx;
  std::unique_ptr<HttpServer> http;
  std::unique_ptr<HttpServer> metrics;
  std::unique_ptr<GrpcServer> grpc;
  bool stopped = false;
};

Result<std::unique_ptr<Server>> Server::Start(const ServerOptions& o) {
  std::unique_ptr<Server> s(new Server());
  s->impl_ = std::make_unique<Impl>();
  Impl& m = *s->impl_;
  m.repo = std::make_unique<ModelRepository>(o.repository);
  m.control = std::make_unique<ControlQueue>();
  m.ctx.repo = m.repo.get();
  m.ctx.control = m.control.get();
  m.ctx.server_version = SURGE_VERSION_STRING;
  m.ctx.admin_token = o.admin_token;
  SURGE_RETURN_IF_ERROR(m.repo->Start());
  if (o.allow_http) {
    HttpServerOptions ho;
    ho.address = o.http_address;
    ho.port = o.http_port;
    ho.threads = o.http_threads;
    ho.max_body_bytes = o.max_request_bytes;
    m.http = std::make_unique<HttpServer>(ho, MakeKServeHandler(&m.ctx));
    SURGE_RETURN_IF_ERROR(m.http->Start());
    SURGE_LOG_INFO("serve: HTTP (KServe v2) on {}:{}", o.http_address, m.http->port());
  }
  if (o.allow_grpc) {
    GrpcServerOptions go;
    go.address = o.grpc_address;
    go.port = o.grpc_port;
    go.threads = o.grpc_infer_threads;
    go.max_message_bytes = static_cast<int>(std::min<size_t>(o.max_request_bytes, INT32_MAX));
    m.grpc = std::make_unique<GrpcServer>(go, &m.ctx);
    SURGE_RETURN_IF_ERROR(m.grpc->Start());
    SURGE_LOG_INFO("serve: gRPC (inference.GRPCInferenceService) on {}:{}", o.grpc_address,
                   m.grpc->port());
  }
  if (o.allow_metrics) {
    m.gpus = std::make_unique<GpuSampler>(o.metrics_interval_ms);
    m.ctx.gpus = m.gpus.get();
    HttpServerOptions mo;
    mo.address = o.metrics_address;
    mo.port = o.metrics_port;
    mo.threads = 1;
    mo.max_body_bytes = 1 << 16;
    m.metrics = std::make_unique<HttpServer>(mo, MakeMetricsHandler(&m.ctx));
    SURGE_RETURN_IF_ERROR(m.metrics->Start());
    SURGE_LOG_INFO("serve: metrics on {}:{}/metrics", o.metrics_address, m.metrics->port());
  }
  return s;
}

Server::~Server() { Stop(); }

void Server::Stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  // Front ends first (they wait for in-flight answers, which the models still give), then the
  // models drain, then the network threads go.
  if (impl_->grpc) impl_->grpc->Stop();
  if (impl_->http) impl_->http->Stop();
  if (impl_->metrics) impl_->metrics->Stop();
  impl_->repo->Stop();
  impl_->control.reset();
}

int Server::http_port() const { return impl_->http ? impl_->http->port() : 0; }
int Server::grpc_port() const { return impl_->grpc ? impl_->grpc->port() : 0; }
int Server::metrics_port() const { return impl_->metrics ? impl_->metrics->port() : 0; }
ModelRepository& Server::repository() { return *impl_->repo; }

}  // namespace surge::serve
