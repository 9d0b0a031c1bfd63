// The only translation unit that includes Beast (build time: Beast is header-only and heavy).
#include "serve/http_server.h"

#include <sys/socket.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <deque>
#include <mutex>
#include <thread>

#include "core/logging.h"

namespace surge::serve {
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// The state of a streamed body, shared by the producer's handle and the connection writing it.
// `kick` posts a write pump onto the connection's strand; it is only called under `mu` and cleared
// (with `ended` set) before the server's io_context goes away, so it never posts to a dead one.
struct HttpStream::Impl {
  explicit Impl(HttpStreamOptions o) : options(std::move(o)) {}

  HttpStreamOptions options;
  std::mutex mu;
  std::deque<std::string> queue;
  bool finishing = false;  // Close() was called: write what is queued, then the last chunk
  bool ended = false;      // nothing more will be written
  bool pumping = false;    // the connection is writing (or has been asked to)
  std::function<void()> kick;
  std::function<void()> abort;  // closes the connection (posted to its strand); set with kick
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> written{0};

  bool Send(std::string chunk) {
    std::lock_guard lock(mu);
    if (ended || finishing) return false;
    // An empty chunk would read as the end of the body.
    if (chunk.empty()) return true;
    queue.push_back(std::move(chunk));
    while (queue.size() > std::max<size_t>(1, options.queue_limit)) {
      queue.pop_front();
      dropped.fetch_add(1);
    }
    WakeLocked();
    return true;
  }

  void Close() {
    std::lock_guard lock(mu);
    if (ended || finishing) return;
    finishing = true;
    WakeLocked();
  }

  void WakeLocked() {
    if (!pumping && kick) {
      pumping = true;
      kick();
    }
  }

  // Marks the stream ended and calls on_close (once, outside the lock).
  void End() {
    std::function<void()> on_close;
    {
      std::lock_guard lock(mu);
      if (ended) return;
      ended = true;
      kick = nullptr;
      abort = nullptr;
      queue.clear();
      on_close = std::move(options.on_close);
    }
    if (on_close) on_close();
  }
};

HttpStream::HttpStream(HttpStreamOptions options)
    : impl_(std::make_shared<Impl>(std::move(options))) {}
HttpStream::~HttpStream() { impl_->Close(); }
bool HttpStream::Send(std::string chunk) { return impl_->Send(std::move(chunk)); }
void HttpStream::Close() { impl_->Close(); }
bool HttpStream::closed() const {
  std::lock_guard lock(impl_->mu);
  return impl_->ended || impl_->finishing;
}
bool HttpStream::ended() const {
  std::lock_guard lock(impl_->mu);
  return impl_->ended;
}
uint64_t HttpStream::dropped() const { return impl_->dropped.load(); }
uint64_t HttpStream::written() const { return impl_->written.load(); }

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  net::io_context ioc;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::atomic<int> active{0};  // requests read and not yet answered
  std::atomic<bool> stopping{false};
  int bound_port = 0;
  bool started = false;
  std::mutex streams_mu;
  std::vector<std::weak_ptr<HttpStream::Impl>> streams;  // streamed responses being written

  explicit Impl(HttpServerOptions o, HttpHandler h)
      : options(std::move(o)), handler(std::move(h)), ioc(std::max(1, options.threads)) {}
  void DoAccept();

  // Registers a stream being written; false when the server is stopping.
  bool AddStream(const std::shared_ptr<HttpStream::Impl>& s) {
    std::lock_guard lock(streams_mu);
    if (stopping) return false;
    std::erase_if(streams, [](const auto& w) { return w.expired(); });
    streams.push_back(s);
    return true;
  }
  // Ends every stream and closes its connection, so clients see the end at once. Called once
  // `stopping` is set, while the network threads still run; a stream whose connection did not
  // get to it within a second is ended here (its on_close then runs on this thread).
  void EndStreams() {
    std::vector<std::shared_ptr<HttpStream::Impl>> live;
    {
      std::lock_guard lock(streams_mu);
      for (auto& w : streams) {
        if (auto s = w.lock()) live.push_back(std::move(s));
      }
      streams.clear();
    }
    for (auto& s : live) {
      std::lock_guard lock(s->mu);
      if (s->abort) s->abort();
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    for (auto& s : live) {
      for (;;) {
        {
          std::lock_guard lock(s->mu);
          if (s->ended) break;
        }
        if (std::chrono::steady_clock::now() > deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      s->End();
    }
  }
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, HttpServer::Impl* server)
      : stream_(std::move(socket)), server_(server) {}

  void Run() {
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&Session::DoRead, shared_from_this()));
  }

 private:
  void DoRead() {
    if (server_->stopping) return DoClose();
    parser_.emplace();
    parser_->body_limit(server_->options.max_body_bytes);
    parser_->header_limit(64 * 1024);
    stream_.expires_after(std::chrono::seconds(server_->options.idle_timeout_s));
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

  void OnRead(beast::error_code ec, size_t) {
    if (ec == http::error::end_of_stream) return DoClose();
    if (ec == http::error::body_limit || ec == http::error::header_limit) {
      return Reject(413, fmt::format("request exceeds the size limit of {} bytes",
                                     server_->options.max_body_bytes));
    }
    if (ec && ec.category() == http::make_error_code(http::error::bad_target).category()) {
      return Reject(400, "malformed HTTP request: " + ec.message());
    }
    if (ec) return;  // network error or idle timeout: drop the connection
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.body = std::move(req.body());
    if (auto it = req.find(http::field::content_type); it != req.end()) {
      r.content_type = std::string(it->value());
    }
    if (auto it = req.find(http::field::authorization); it != req.end()) {
      r.authorization = std::string(it->value());
    }
    for (const auto& f : req) {
      r.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    if (auto it = req.find("Inference-Header-Content-Length"); it != req.end()) {
      std::string v(it->value());
      char* end = nullptr;
      unsigned long long n = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n > r.body.size()) {
        return Reject(400, fmt::format("Inference-Header-Content-Length '{}' is not a number in "
                                       "[0, body size {}]",
                                       v, r.body.size()));
      }
      r.inference_header_length = static_cast<size_t>(n);
    }
    stream_.expires_never();
    call_ = std::make_shared<HttpCall>();
    uint64_t gen = ++gen_;
    responded_ = false;
    server_->active.fetch_add(1);
    auto self = shared_from_this();
    // A handler that answers at once runs on this connection's strand: dispatch then writes
    // without a hop through the io_context's queue (and the thread wake-up that may cost).
    HttpResponder responder = [self, gen](HttpResponse resp) {
      net::dispatch(self->stream_.get_executor(), [self, gen, resp = std::move(resp)]() mutable {
        self->Write(gen, std::move(resp));
      });
    };
    try {
      server_->handler(std::move(r), std::move(responder), call_);
    } catch (const std::exception& e) {
      SURGE_LOG_ERROR("serve: HTTP handler threw: {}", e.what());
      HttpResponse resp;
      resp.status = 500;
      resp.body = R"({"error":"internal error"})";
      Write(gen, std::move(resp));
    }
    if (!responded_) WatchDisconnect(gen);
  }

  // While a request is being answered, a readable socket with nothing to read means the client
  // went away: cancel the request.
  void WatchDisconnect(uint64_t gen) {
    auto self = shared_from_this();
    stream_.socket().async_wait(tcp::socket::wait_read, [self, gen](beast::error_code ec) {
      if (ec || gen != self->gen_ || self->responded_) return;
      char c;
      ssize_t n = ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        self->call_->cancelled->store(true);
        if (self->call_->on_cancel) self->call_->on_cancel();
      }
    });
  }

  void Reject(int status, std::string message) {
    keep_alive_ = false;
    server_->active.fetch_add(1);
    responded_ = false;
    HttpResponse resp;
    resp.status = status;
    resp.body = fmt::format(R"({{"error":"{}"}})", message);
    Write(++gen_, std::move(resp));
  }

  void Write(uint64_t gen, HttpResponse resp) {
    if (gen != gen_ || responded_) {
      if (resp.stream) resp.stream->impl()->End();
      return;
    }
    responded_ = true;
    if (resp.stream) return StartStream(std::move(resp));
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(resp.status), 11);
    res->set(http::field::server, "surge");
    if (!resp.content_type.empty()) res->set(http::field::content_type, resp.content_type);
    for (auto& [k, v] : resp.headers) res->set(k, v);
    res->keep_alive(keep_alive_ && !server_->stopping);
    res->body() = std::move(resp.body);
    res->prepare_payload();
    if (resp.omit_body) {
      size_t n = res->body().size();
      res->body().clear();
      res->content_length(n);
    }
    res_ = res;
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        self->server_->active.fetch_sub(1);
                        if (ec) return;
                        if (!res->keep_alive()) return self->DoClose();
                        self->DoRead();
                      });
  }

  void DoClose() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  // Streamed response: headers (chunked), then the stream's chunks as they come; the connection
  // ends with the stream.
  void StartStream(HttpResponse resp) {
    sse_ = resp.stream->impl();
    resp.stream.reset();
    if (!server_->AddStream(sse_)) {
      server_->active.fetch_sub(1);
      return EndStream();
    }
    auto res = std::make_shared<http::response<http::empty_body>>(
        static_cast<http::status>(resp.status), 11);
    res->set(http::field::server, "surge");
    if (!resp.content_type.empty()) res->set(http::field::content_type, resp.content_type);
    for (auto& [k, v] : resp.headers) res->set(k, v);
    res->keep_alive(false);
    res->chunked(true);
    stream_res_ = res;
    stream_sr_ = std::make_shared<http::response_serializer<http::empty_body>>(*res);
    http::async_write_header(stream_, *stream_sr_,
                             [self = shared_from_this()](beast::error_code ec, size_t) {
                               self->server_->active.fetch_sub(1);
                               if (ec) return self->EndStream();
                               self->AttachStream();
                             });
  }

  void AttachStream() {
    {
      std::unique_lock lock(sse_->mu);
      if (sse_->ended) {
        lock.unlock();
        return EndStream();
      }
      std::weak_ptr<Session> weak = shared_from_this();
      sse_->kick = [weak, ex = stream_.get_executor()] {
        net::post(ex, [weak] {
          if (auto s = weak.lock()) s->PumpStream();
        });
      };
      sse_->abort = [weak, ex = stream_.get_executor()] {
        net::post(ex, [weak] {
          if (auto s = weak.lock()) s->EndStream();
        });
      };
      sse_->pumping = true;
    }
    last_write_ = std::chrono::steady_clock::now();
    WatchStreamPeer();
    ArmHeartbeat();
    PumpStream();
  }

  void PumpStream() {
    std::shared_ptr<std::string> chunk;
    {
      std::lock_guard lock(sse_->mu);
      if (sse_->ended) return;
      if (sse_->queue.empty()) {
        if (!sse_->finishing) {
          sse_->pumping = false;
          return;
        }
      } else {
        chunk = std::make_shared<std::string>(std::move(sse_->queue.front()));
        sse_->queue.pop_front();
      }
    }
    auto self = shared_from_this();
    if (!chunk) {
      net::async_write(stream_, http::make_chunk_last(),
                       [self](beast::error_code, size_t) { self->EndStream(); });
      return;
    }
    last_write_ = std::chrono::steady_clock::now();
    net::async_write(stream_, http::make_chunk(net::buffer(*chunk)),
                     [self, chunk](beast::error_code ec, size_t) {
                       if (ec) return self->EndStream();
                       self->sse_->written.fetch_add(1);
                       self->PumpStream();
                     });
  }

  // The client sends nothing on a stream; a readable socket is either stray bytes (dropped) or
  // the client going away.
  void WatchStreamPeer() {
    stream_.socket().async_wait(
        tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
          if (ec) return self->EndStream();
          for (;;) {
            ssize_t n = ::recv(self->stream_.socket().native_handle(), self->sink_,
                               sizeof(self->sink_), MSG_DONTWAIT);
            if (n > 0) continue;
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            return self->EndStream();
          }
          self->WatchStreamPeer();
        });
  }

  void ArmHeartbeat() {
    const auto& o = sse_->options;
    if (o.heartbeat_ms <= 0 || o.heartbeat.empty()) return;
    if (!heartbeat_) heartbeat_.emplace(stream_.get_executor());
    auto interval = std::chrono::milliseconds(o.heartbeat_ms);
    auto now = std::chrono::steady_clock::now();
    heartbeat_->expires_at(std::max(last_write_ + interval, now + std::chrono::milliseconds(1)));
    heartbeat_->async_wait([self = shared_from_this(), interval](beast::error_code ec) {
      if (ec) return;
      bool pump = false;
      {
        std::lock_guard lock(self->sse_->mu);
        if (self->sse_->ended) return;
        auto now = std::chrono::steady_clock::now();
        if (now - self->last_write_ >= interval) {
          if (!self->sse_->pumping && !self->sse_->finishing) {
            self->sse_->queue.push_back(self->sse_->options.heartbeat);
            self->sse_->pumping = pump = true;
          } else {
            self->last_write_ = now;  // a write is in flight: check again one interval on
          }
        }
      }
      if (pump) self->PumpStream();
      self->ArmHeartbeat();
    });
  }

  void EndStream() {
    if (!sse_) return;
    sse_->End();
    if (heartbeat_) heartbeat_->cancel();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpServer::Impl* server_;
  std::shared_ptr<HttpCall> call_;
  std::shared_ptr<http::response<http::string_body>> res_;
  std::shared_ptr<HttpStream::Impl> sse_;
  std::shared_ptr<http::response<http::empty_body>> stream_res_;
  std::shared_ptr<http::response_serializer<http::empty_body>> stream_sr_;
  std::optional<net::steady_timer> heartbeat_;
  std::chrono::steady_clock::time_point last_write_;
  char sink_[256];
  uint64_t gen_ = 0;
  bool responded_ = true;
  bool keep_alive_ = true;
};

}  // namespace

void HttpServer::Impl::DoAccept() {
  acceptor->async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (stopping) return;
    if (!ec) {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Session>(std::move(socket), this)->Run();
    }
    DoAccept();
  });
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  try {
    auto addr = net::ip::make_address(impl_->options.address);
    tcp::endpoint ep(addr, static_cast<unsigned short>(impl_->options.port));
    impl_->acceptor = std::make_unique<tcp::acceptor>(net::make_strand(impl_->ioc));
    impl_->acceptor->open(ep.protocol());
    impl_->acceptor->set_option(net::socket_base::reuse_address(true));
    impl_->acceptor->bind(ep);
    impl_->acceptor->listen(net::socket_base::max_listen_connections);
    impl_->bound_port = impl_->acceptor->local_endpoint().port();
  } catch (const std::exception& e) {
    return UnavailableError("cannot listen on {}:{}: {}", impl_->options.address,
                            impl_->options.port, e.what());
  }
  impl_->DoAccept();
  for (int i = 0; i < std::max(1, impl_->options.threads); ++i) {
    impl_->threads.emplace_back([this] {
      for (;;) {
        try {
          impl_->ioc.run();
          return;
        } catch (const std::exception& e) {
          SURGE_LOG_ERROR("serve: HTTP thread caught: {}", e.what());
        }
      }
    });
  }
  impl_->started = true;
  return Status::Ok();
}

void HttpServer::Stop() {
  if (!impl_ || !impl_->started) return;
  impl_->started = false;
  impl_->stopping = true;
  impl_->EndStreams();
  net::post(impl_->acceptor->get_executor(), [this] {
    beast::error_code ec;
    impl_->acceptor->close(ec);
  });
  // Graceful: let answered-but-unwritten requests finish (bounded).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (impl_->active.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  impl_->ioc.stop();
  for (auto& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
  impl_->threads.clear();
}

int HttpServer::port() const { return impl_->bound_port; }

}  // namespace surge::serve
