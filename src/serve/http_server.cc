// The only translation unit that includes Beast (build time: Beast is header-only and heavy).
#include "serve/http_server.h"

#include <sys/socket.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <thread>

#include "core/logging.h"

namespace surge::serve {
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

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

  explicit Impl(HttpServerOptions o, HttpHandler h)
      : options(std::move(o)), handler(std::move(h)), ioc(std::max(1, options.threads)) {}
  void DoAccept();
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
    HttpResponder responder = [self, gen](HttpResponse resp) {
      net::post(self->stream_.get_executor(), [self, gen, resp = std::move(resp)]() mutable {
        self->Write(gen, std::move(resp));
      });
    };
    WatchDisconnect(gen);
    try {
      server_->handler(std::move(r), std::move(responder), call_);
    } catch (const std::exception& e) {
      SURGE_LOG_ERROR("serve: HTTP handler threw: {}", e.what());
      HttpResponse resp;
      resp.status = 500;
      resp.body = R"({"error":"internal error"})";
      Write(gen, std::move(resp));
    }
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
    if (gen != gen_ || responded_) return;
    responded_ = true;
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(resp.status), 11);
    res->set(http::field::server, "surge");
    if (!resp.content_type.empty()) res->set(http::field::content_type, resp.content_type);
    for (auto& [k, v] : resp.headers) res->set(k, v);
    res->keep_alive(keep_alive_ && !server_->stopping);
    res->body() = std::move(resp.body);
    res->prepare_payload();
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

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpServer::Impl* server_;
  std::shared_ptr<HttpCall> call_;
  std::shared_ptr<http::response<http::string_body>> res_;
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
