// TrendServer: the trends HTTP API and the live dashboard, served from a TrendStore.
//
//   GET /v1/trends[?k=N]   current hot list: {"bucket","updated","seq","trends":[TrendUpdate…],
//                          "spark_buckets","spark"} (HotListJson), the first N trends
//   GET /v1/topics/{id}    one topic: latest update, heat/rank history, sample posts
//                          (TopicDetailJson); 400 for an invalid id, 404 for an unknown one
//   GET /v1/trends/stream  server-sent events: `retry:`, then `event: health` and
//                          `event: trends` (id: bucket end ms, data: the hot list JSON) now and
//                          on every change; `: ping` comments when idle. A reconnecting client
//                          whose Last-Event-ID is the current bucket is not sent it again.
//   GET /v1/health         pipeline health (HealthJson)
//   GET /                  the dashboard (web/index.html, app.js, style.css, embedded), and
//   GET /lib/d3.min.js     the charting library from its Debian install (libjs-d3)
//
// Errors are JSON {"error": "..."}: 400 bad parameter or id, 404 unknown path or topic, 405 a
// method other than GET/HEAD, 503 too many stream clients. HEAD answers like GET without a body.
//
// A slow stream client never holds up the publisher: each client has a bounded queue of events
// and skips to the newest ones when it falls behind (HttpStream).
//
// Thread safety: Start/Stop from one thread; the rest from any. The store must outlive the server.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/status.h"
#include "serve/http_server.h"
#include "stream/web/trend_store.h"

namespace surge::stream::web {

struct TrendServerOptions {
  std::string address = "127.0.0.1";
  int port = 8080;  // 0: any free port (see port())
  int threads = 2;
  int sse_retry_ms = 3000;       // reconnect delay suggested to EventSource clients
  int sse_heartbeat_ms = 15000;  // idle interval before a `: ping` comment
  size_t sse_queue = 8;          // events waiting per stream client before the oldest is dropped
  size_t max_sse_clients = 256;
  // Serve the dashboard files from this folder instead of the embedded copies (for working on
  // web/ without rebuilding). Empty: embedded.
  std::string web_root;
  // The charting library the page loads as /lib/d3.min.js (Debian package libjs-d3).
  std::string d3_path = "/usr/share/javascript/d3/d3.min.js";
};

class TrendServer {
 public:
  TrendServer(TrendStore* store, TrendServerOptions options = {});
  ~TrendServer();
  TrendServer(const TrendServer&) = delete;
  TrendServer& operator=(const TrendServer&) = delete;

  // Binds and starts serving. Unavailable if the address cannot be bound. A missing charting
  // library is not an error: it is logged, and the page says so.
  Status Start();
  // Ends every stream, stops the server. Idempotent; also done by the destructor.
  void Stop();
  int port() const;         // the bound port
  std::string url() const;  // "http://address:port/"

  size_t stream_clients() const;           // open /v1/trends/stream connections
  uint64_t stream_events_dropped() const;  // events skipped by slow stream clients, so far

 private:
  struct Client;
  void Handle(serve::HttpRequest&& req, serve::HttpResponder respond);
  serve::HttpResponse OpenStream(const serve::HttpRequest& req);
  serve::HttpResponse Static(const std::string& path) const;
  void Broadcast(uint64_t seq, const std::string& event);
  void RemoveClient(uint64_t id);

  TrendStore* const store_;
  const TrendServerOptions options_;
  std::unique_ptr<serve::HttpServer> http_;
  std::string d3_;  // the library's bytes; empty when missing
  uint64_t token_ = 0;
  bool subscribed_ = false;

  mutable std::mutex clients_mu_;
  std::map<uint64_t, std::shared_ptr<Client>> clients_;
  uint64_t next_client_ = 1;
  uint64_t dropped_closed_ = 0;  // dropped() of clients already gone
};

}  // namespace surge::stream::web
