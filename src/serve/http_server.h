// A small event-driven HTTP/1.1 server on Boost.Beast/Asio: keep-alive, pipelined requests
// answered in order, a body size limit, and disconnect detection while a request is being
// answered (so queued inference can be cancelled). Beast stays inside http_server.cc; handlers see
// plain structs. Thread-safe; handlers may answer from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "serve/infer.h"

namespace surge::serve {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query
  std::string body;
  std::string content_type;
  std::string authorization;
  std::optional<size_t> inference_header_length;  // Inference-Header-Content-Length
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Per-request state shared with the handler. When the client disconnects before the response
// is written, `cancelled` is set and `on_cancel` (if the handler set one) is called.
struct HttpCall {
  CancelFlag cancelled = std::make_shared<std::atomic<bool>>(false);
  std::function<void()> on_cancel;
};

using HttpResponder = std::function<void(HttpResponse)>;
// Called on a network thread; must not block. Answer through the responder exactly once.
using HttpHandler =
    std::function<void(HttpRequest&&, HttpResponder, const std::shared_ptr<HttpCall>&)>;

struct HttpServerOptions {
  std::string address = "0.0.0.0";
  int port = 8000;  // 0: any free port
  int threads = 2;
  size_t max_body_bytes = 64u << 20;
  int idle_timeout_s = 300;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts the network threads.
  Status Start();
  // Stops accepting, closes connections, joins the threads. Idempotent.
  void Stop();
  int port() const;  // the bound port

  struct Impl;  // public so the connection sessions in http_server.cc can name it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace surge::serve
