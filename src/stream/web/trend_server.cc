#include "stream/web/trend_server.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "core/logging.h"
#include "stream/post.h"
#include "stream/web/assets.h"

namespace surge::stream::web {
namespace {

using serve::HttpRequest;
using serve::HttpResponse;

HttpResponse ErrorResponse(int status, std::string_view message) {
  HttpResponse r;
  r.status = status;
  r.body = "{\"error\":";
  AppendJsonString(message, &r.body);
  r.body.push_back('}');
  return r;
}

HttpResponse JsonResponse(std::string body) {
  HttpResponse r;
  r.body = std::move(body);
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

std::string TrendsEvent(const HotList& list) {
  std::string e;
  e.reserve(list.json.size() + 64);
  fmt::format_to(std::back_inserter(e), "id: {}\nevent: trends\ndata: ", list.bucket_ms);
  e.append(list.json);
  e.append("\n\n");
  return e;
}

std::string HealthEvent(const std::string& json) { return "event: health\ndata: " + json + "\n\n"; }

bool IEquals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

// Splits "a=1&b=2" into pairs (no percent-decoding: every parameter we read is plain ASCII).
std::vector<std::pair<std::string_view, std::string_view>> ParseQuery(std::string_view q) {
  std::vector<std::pair<std::string_view, std::string_view>> out;
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view part = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (part.empty()) continue;
    size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      out.emplace_back(part, std::string_view());
    } else {
      out.emplace_back(part.substr(0, eq), part.substr(eq + 1));
    }
  }
  return out;
}

Result<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read {}", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string_view ContentType(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  if (name.ends_with(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

// What a client sent, cut short enough to quote in an error.
std::string_view Echo(std::string_view s) { return s.substr(0, 64); }

constexpr std::string_view kD3Missing =
    "the charting library is not installed: the dashboard loads d3 from {} (Debian package "
    "libjs-d3; scripts/setup installs it)";

}  // namespace

struct TrendServer::Client {
  std::shared_ptr<serve::HttpStream> stream;
  uint64_t last_seq = 0;  // last hot list sent
};

TrendServer::TrendServer(TrendStore* store, TrendServerOptions options)
    : store_(store), options_(std::move(options)) {}

TrendServer::~TrendServer() { Stop(); }

Status TrendServer::Start() {
  if (http_) return FailedPreconditionError("trend server: already started");
  if (auto d3 = ReadFile(options_.d3_path); d3.ok()) {
    d3_ = std::move(*d3);
  } else {
    SURGE_LOG_WARN("dashboard: {}; the page shows the tables without charts",
                   fmt::format(fmt::runtime(kD3Missing), options_.d3_path));
  }
  if (!options_.web_root.empty() && !std::filesystem::is_directory(options_.web_root)) {
    return InvalidArgumentError("trend server: web root '{}' is not a folder", options_.web_root);
  }
  serve::HttpServerOptions ho;
  ho.address = options_.address;
  ho.port = options_.port;
  ho.threads = options_.threads;
  ho.max_body_bytes = 64 * 1024;  // only GET/HEAD are served
  auto http = std::make_unique<serve::HttpServer>(
      ho, [this](HttpRequest&& req, serve::HttpResponder respond,
                 const std::shared_ptr<serve::HttpCall>&) {
        Handle(std::move(req), std::move(respond));
      });
  SURGE_RETURN_IF_ERROR(http->Start());
  http_ = std::move(http);
  TrendStoreListener listener;
  listener.on_trends = [this](const std::shared_ptr<const HotList>& list) {
    Broadcast(list->seq, TrendsEvent(*list));
  };
  listener.on_health = [this](const PipelineHealth&, const std::string& json) {
    Broadcast(0, HealthEvent(json));
  };
  token_ = store_->Subscribe(std::move(listener));
  subscribed_ = true;
  SURGE_LOG_INFO("dashboard: serving {}", url());
  return Status::Ok();
}

void TrendServer::Stop() {
  if (!http_) return;
  // Stopping the HTTP server ends every stream; their on_close removes the clients.
  http_->Stop();
  if (subscribed_) store_->Unsubscribe(token_);
  subscribed_ = false;
  std::lock_guard lock(clients_mu_);
  clients_.clear();
}

int TrendServer::port() const { return http_ ? http_->port() : 0; }

std::string TrendServer::url() const {
  return fmt::format("http://{}:{}/", options_.address, port());
}

size_t TrendServer::stream_clients() const {
  std::lock_guard lock(clients_mu_);
  return clients_.size();
}

uint64_t TrendServer::stream_events_dropped() const {
  std::lock_guard lock(clients_mu_);
  uint64_t n = dropped_closed_;
  for (const auto& [id, c] : clients_) n += c->stream->dropped();
  return n;
}

void TrendServer::Broadcast(uint64_t seq, const std::string& event) {
  std::lock_guard lock(clients_mu_);
  for (auto it = clients_.begin(); it != clients_.end();) {
    Client& c = *it->second;
    if (seq != 0 && c.last_seq >= seq) {
      ++it;
      continue;
    }
    if (!c.stream->Send(event)) {
      dropped_closed_ += c.stream->dropped();
      it = clients_.erase(it);
      continue;
    }
    if (seq != 0) c.last_seq = seq;
    ++it;
  }
}

void TrendServer::RemoveClient(uint64_t id) {
  std::lock_guard lock(clients_mu_);
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  dropped_closed_ += it->second->stream->dropped();
  clients_.erase(it);
}

HttpResponse TrendServer::OpenStream(const HttpRequest& req) {
  std::string_view last_event_id;
  for (const auto& [name, value] : req.headers) {
    if (IEquals(name, "Last-Event-ID")) last_event_id = value;
  }
  std::lock_guard lock(clients_mu_);
  if (clients_.size() >= options_.max_sse_clients) {
    return ErrorResponse(503, fmt::format("too many stream clients (at most {}); retry later",
                                          options_.max_sse_clients));
  }
  uint64_t id = next_client_++;
  serve::HttpStreamOptions so;
  so.queue_limit = std::max<size_t>(4, options_.sse_queue);
  so.heartbeat_ms = options_.sse_heartbeat_ms;
  so.heartbeat = ": ping\n\n";
  so.on_close = [this, id] { RemoveClient(id); };
  auto client = std::make_shared<Client>();
  client->stream = std::make_shared<serve::HttpStream>(std::move(so));
  client->stream->Send(fmt::format(": surge trends\nretry: {}\n\n", options_.sse_retry_ms));
  client->stream->Send(HealthEvent(store_->HealthJsonNow()));
  auto current = store_->Current();
  if (current->seq > 0 && last_event_id != std::to_string(current->bucket_ms)) {
    client->stream->Send(TrendsEvent(*current));
  }
  client->last_seq = current->seq;
  clients_.emplace(id, client);
  HttpResponse r;
  r.content_type = "text/event-stream; charset=utf-8";
  r.headers.emplace_back("Cache-Control", "no-store");
  r.headers.emplace_back("X-Accel-Buffering", "no");
  r.stream = client->stream;
  return r;
}

HttpResponse TrendServer::Static(const std::string& path) const {
  if (path == "/lib/d3.min.js") {
    if (d3_.empty()) {
      return ErrorResponse(404, fmt::format(fmt::runtime(kD3Missing), options_.d3_path));
    }
    HttpResponse r;
    r.content_type = "text/javascript; charset=utf-8";
    r.headers.emplace_back("Cache-Control", "max-age=3600");
    r.body = d3_;
    return r;
  }
  std::string name = path == "/" ? "/index.html" : path;
  HttpResponse r;
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  if (!options_.web_root.empty()) {
    std::string_view file = std::string_view(name).substr(1);
    bool plain = !file.empty() && std::all_of(file.begin(), file.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    });
    if (plain && file.find("..") == std::string_view::npos) {
      if (auto data = ReadFile(std::filesystem::path(options_.web_root) / file); data.ok()) {
        r.content_type = std::string(ContentType(file));
        r.body = std::move(*data);
        return r;
      }
    }
    return ErrorResponse(404, fmt::format("no such page: {}", Echo(path)));
  }
  for (const Asset& a : EmbeddedAssets()) {
    if (a.path == name) {
      r.content_type = std::string(a.content_type);
      r.body = std::string(a.data);
      return r;
    }
  }
  return ErrorResponse(404, fmt::format("no such page: {}", Echo(path)));
}

void TrendServer::Handle(HttpRequest&& req, serve::HttpResponder respond) {
  const bool head = req.method == "HEAD";
  if (req.method != "GET" && !head) {
    HttpResponse r =
        ErrorResponse(405, fmt::format("method {} is not allowed: this server answers GET and HEAD",
                                       Echo(req.method)));
    r.headers.emplace_back("Allow", "GET, HEAD");
    return respond(std::move(r));
  }
  std::string_view target = req.target;
  size_t qpos = target.find('?');
  std::string path(target.substr(0, qpos));
  auto query =
      ParseQuery(qpos == std::string_view::npos ? std::string_view() : target.substr(qpos + 1));
  HttpResponse r;
  if (path == "/v1/trends") {
    auto list = store_->Current();
    size_t k = list->trends.size();
    for (const auto& [key, value] : query) {
      if (key != "k") continue;
      size_t n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      const size_t max = 1000;
      if (ec != std::errc() || end != value.data() + value.size() || n < 1 || n > max) {
        return respond(ErrorResponse(
            400, fmt::format("query parameter 'k' must be an integer in [1, {}], got '{}'", max,
                             Echo(value))));
      }
      k = std::min(k, n);
    }
    r = JsonResponse(k == list->trends.size() ? list->json : HotListJson(*list, k));
  } else if (path == "/v1/trends/stream") {
    if (head) {
      r.content_type = "text/event-stream; charset=utf-8";
    } else {
      return respond(OpenStream(req));
    }
  } else if (path == "/v1/health") {
    r = JsonResponse(store_->HealthJsonNow());
  } else if (path.starts_with("/v1/topics/")) {
    std::string id = path.substr(std::string_view("/v1/topics/").size());
    if (!ValidTopicId(id)) {
      return respond(ErrorResponse(
          400, fmt::format("topic id '{}' is not 1..128 characters of [A-Za-z0-9_.:-]", Echo(id))));
    }
    auto detail = store_->Topic(id);
    if (!detail) return respond(ErrorResponse(404, fmt::format("no topic '{}'", Echo(id))));
    r = JsonResponse(TopicDetailJson(id, *detail));
  } else if (path.starts_with("/v1/") || path == "/v1") {
    return respond(ErrorResponse(404, fmt::format("no API endpoint {}", Echo(path))));
  } else {
    r = Static(path);
  }
  r.omit_body = head;
  respond(std::move(r));
}

}  // namespace surge::stream::web
