// A small event-driven HTTP/1.1 server on Boost.Beast/Asio: keep-alive, pipelined requests
// answered in order, a body size limit, and disconnect detection while a request is being
// answered (so queued inference can be cancelled). Beast stays inside http_server.cc; handlers see
// plain structs. Thread-safe; handlers may answer from any thread.
//
// A response may also be streamed (server-sent events): see HttpStream.
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
  // Every request header as sent (name case as the client wrote it), for handlers that need one
  // the fields above do not carry (e.g. Last-Event-ID).
  std::vector<std::pair<std::string, std::string>> headers;
};

struct HttpStreamOptions {
  // Chunks that may wait for a slow client; past this the oldest waiting chunk is dropped, so
  // Send never blocks and a client that reads too slowly skips to the newest chunks. A producer
  // should therefore make each chunk self-contained (one SSE event per chunk).
  size_t queue_limit = 16;
  // When > 0 and nothing was written for this long, `heartbeat` is written (e.g. an SSE comment)
  // so that proxies keep the connection open and a vanished client is noticed.
  int heartbeat_ms = 0;
  std::string heartbeat;
  // Called once when the stream ends for any reason (client gone, Close() done, server stopped),
  // on a network thread or the thread that stops the server. Must not block.
  std::function<void()> on_close;
};

// The body of a streamed response. The handler creates one, keeps a handle, and answers with an
// HttpResponse whose `stream` is set: the server sends the status and headers with chunked
// transfer encoding, then every Send() as one chunk, in order. Chunks sent before the headers
// went out wait in the queue. The connection is closed when the stream ends (it is not reused).
// Thread-safe: any thread may Send or Close; Send never blocks. Destroying the last handle (the
// response's copy included) closes the stream after the queued chunks.
class HttpStream {
 public:
  explicit HttpStream(HttpStreamOptions options = {});
  ~HttpStream();
  HttpStream(const HttpStream&) = delete;
  HttpStream& operator=(const HttpStream&) = delete;

  // Queues one chunk. False (and nothing queued) once the stream is closed or ended.
  bool Send(std::string chunk);
  // Ends the response after the queued chunks (then the last chunk). Idempotent.
  void Close();
  // True after Close() or once the stream ended (client gone, server stopped).
  bool closed() const;
  // True once the stream ended: nothing more will be written.
  bool ended() const;
  uint64_t dropped() const;  // chunks dropped because the client read too slowly
  uint64_t written() const;  // chunks written to the socket (heartbeats included)

  struct Impl;  // shared with the connection that writes the stream
  const std::shared_ptr<Impl>& impl() const { return impl_; }

 private:
  std::shared_ptr<Impl> impl_;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // A streamed response: status, content_type and headers are sent, `body` is ignored.
  std::shared_ptr<HttpStream> stream;
  // For HEAD: send the headers (Content-Length of `body` included) but not the body.
  bool omit_body = false;
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
