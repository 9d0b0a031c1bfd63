#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "stream/web/trend_server.h"
#include "web_test_util.h"

namespace surge::stream::web {
namespace {

using json = nlohmann::json;
using testing::MakeList;
using testing::MakeUpdate;
using testing::Request;
using testing::SseClient;
using testing::WaitFor;

class TrendServerTest : public ::testing::Test {
 protected:
  void Start(TrendServerOptions o = {}) {
    o.address = "127.0.0.1";
    o.port = 0;
    server_ = std::make_unique<TrendServer>(&store_, o);
    ASSERT_TRUE(server_->Start().ok());
    port_ = server_->port();
    ASSERT_GT(port_, 0);
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }
  json GetJson(const std::string& target, int want_status = 200) {
    auto r = Request(port_, "GET", target);
    EXPECT_EQ(r.status, want_status) << target << ": " << r.body;
    EXPECT_EQ(r.Header("Content-Type").value_or(""), "application/json") << target;
    return json::parse(r.body);
  }

  TrendStore store_;
  std::unique_ptr<TrendServer> server_;
  int port_ = 0;
};

TEST_F(TrendServerTest, TrendsEndpoint) {
  Start();
  auto empty = GetJson("/v1/trends");
  EXPECT_EQ(empty["bucket"], 0);
  EXPECT_TRUE(empty["trends"].empty());

  ASSERT_TRUE(store_.Publish(60000, MakeList(5)).ok());
  auto all = GetJson("/v1/trends");
  EXPECT_EQ(all["bucket"], 60000);
  ASSERT_EQ(all["trends"].size(), 5u);
  EXPECT_EQ(all["trends"][0]["topic_id"], "t1");
  EXPECT_EQ(all["trends"][0]["hashtag"], "#话题t1#");
  EXPECT_EQ(all["trends"][4]["rank"], 5);
  auto top2 = GetJson("/v1/trends?k=2");
  EXPECT_EQ(top2["trends"].size(), 2u);
  EXPECT_EQ(GetJson("/v1/trends?k=50")["trends"].size(), 5u);
  EXPECT_EQ(GetJson("/v1/trends?foo=bar&k=3")["trends"].size(), 3u);  // others ignored
}

TEST_F(TrendServerTest, BadKIsA400WithTheReason) {
  Start();
  for (std::string k : {"0", "abc", "-1", "1001", "2x", ""}) {
    auto j = GetJson("/v1/trends?k=" + k, 400);
    EXPECT_NE(j["error"].get<std::string>().find("'k' must be an integer in [1, 1000]"),
              std::string::npos)
        << k << ": " << j.dump();
  }
}

TEST_F(TrendServerTest, TopicEndpoint) {
  Start();
  ASSERT_TRUE(store_.Publish(1000, MakeList(3)).ok());
  ASSERT_TRUE(store_.Publish(2000, MakeList(3, 2000)).ok());
  ASSERT_TRUE(store_.AddSamplePosts("t2", {{"p9", "今天的热点", "u7", 1500}}).ok());
  auto t2 = GetJson("/v1/topics/t2");
  EXPECT_EQ(t2["topic_id"], "t2");
  EXPECT_EQ(t2["on_list"], true);
  EXPECT_EQ(t2["latest"]["rank"], 2);
  ASSERT_EQ(t2["history"].size(), 2u);
  EXPECT_DOUBLE_EQ(t2["history"][1]["heat"].get<double>(), 1000);
  ASSERT_EQ(t2["samples"].size(), 1u);
  EXPECT_EQ(t2["samples"][0]["text"], "今天的热点");

  auto unknown = GetJson("/v1/topics/t404", 404);
  EXPECT_EQ(unknown["error"], "no topic 't404'");
  for (const std::string& bad :
       std::vector<std::string>{"a%2Fb", "%E8%AF%9D", std::string(200, 'x'), "a/b", ""}) {
    auto j = GetJson("/v1/topics/" + bad, 400);
    EXPECT_NE(j["error"].get<std::string>().find("is not 1..128 characters"), std::string::npos)
        << bad << ": " << j.dump();
  }
}

TEST_F(TrendServerTest, HealthEndpoint) {
  Start();
  EXPECT_EQ(GetJson("/v1/health")["updated"], 0);
  PipelineHealth h;
  h.posts_per_s = 321;
  h.model = "lexical only";
  ASSERT_TRUE(store_.UpdateHealth(h).ok());
  auto j = GetJson("/v1/health");
  EXPECT_DOUBLE_EQ(j["posts_per_s"].get<double>(), 321);
  EXPECT_EQ(j["model"], "lexical only");
}

TEST_F(TrendServerTest, OnlyGetAndHead) {
  Start();
  for (std::string m : {"POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    auto r = Request(port_, m, "/v1/trends");
    EXPECT_EQ(r.status, 405) << m;
    EXPECT_EQ(r.Header("Allow").value_or(""), "GET, HEAD");
    EXPECT_NE(json::parse(r.body)["error"].get<std::string>().find("method " + m),
              std::string::npos);
  }
}

TEST_F(TrendServerTest, UnknownPathsAre404Json) {
  Start();
  for (std::string p : {"/v1/nope", "/v1", "/v1/trends/x", "/nope.html", "/../etc/passwd"}) {
    auto j = GetJson(p, 404);
    EXPECT_TRUE(j.contains("error")) << p;
  }
}

TEST_F(TrendServerTest, HeadSendsHeadersOnly) {
  Start();
  ASSERT_TRUE(store_.Publish(1000, MakeList(4)).ok());
  auto get = Request(port_, "GET", "/v1/trends");
  auto head = Request(port_, "HEAD", "/v1/trends");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty()) << head.body;
  EXPECT_EQ(head.Header("Content-Length"), std::to_string(get.body.size()));
  auto stream_head = Request(port_, "HEAD", "/v1/trends/stream");
  EXPECT_EQ(stream_head.status, 200);
  EXPECT_EQ(stream_head.Header("Content-Type").value_or(""), "text/event-stream; charset=utf-8");
  EXPECT_TRUE(stream_head.body.empty());
  EXPECT_EQ(server_->stream_clients(), 0u);
}

TEST_F(TrendServerTest, ServesTheEmbeddedDashboard) {
  Start();
  auto index = Request(port_, "GET", "/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.Header("Content-Type").value_or(""), "text/html; charset=utf-8");
  EXPECT_NE(index.body.find("/app.js"), std::string::npos);
  EXPECT_NE(index.body.find("/lib/d3.min.js"), std::string::npos);
  auto app = Request(port_, "GET", "/app.js");
  EXPECT_EQ(app.status, 200);
  EXPECT_EQ(app.Header("Content-Type").value_or(""), "text/javascript; charset=utf-8");
  EXPECT_NE(app.body.find("EventSource"), std::string::npos);
  // The embedded copy is the file in web/.
  std::ifstream in(std::string(SURGE_SOURCE_DIR) + "/web/app.js", std::ios::binary);
  std::string disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(app.body, disk);
  EXPECT_EQ(Request(port_, "GET", "/style.css").status, 200);
}

TEST(TrendServerAssetsTest, ChartingLibraryFromItsInstallPathOrAClearError) {
  auto dir = std::filesystem::temp_directory_path() / ("surge_web_d3_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "d3.min.js") << "window.d3 = {version: 'test'};";
  TrendStore store;
  {
    TrendServerOptions o;
    o.port = 0;
    o.d3_path = (dir / "d3.min.js").string();
    TrendServer server(&store, o);
    ASSERT_TRUE(server.Start().ok());
    auto r = Request(server.port(), "GET", "/lib/d3.min.js");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "window.d3 = {version: 'test'};");
  }
  {
    TrendServerOptions o;
    o.port = 0;
    o.d3_path = (dir / "missing.js").string();
    TrendServer server(&store, o);
    ASSERT_TRUE(server.Start().ok());  // the API still works without it
    auto r = Request(server.port(), "GET", "/lib/d3.min.js");
    EXPECT_EQ(r.status, 404);
    auto err = json::parse(r.body)["error"].get<std::string>();
    EXPECT_NE(err.find("libjs-d3"), std::string::npos) << err;
    EXPECT_NE(err.find("missing.js"), std::string::npos) << err;
    EXPECT_EQ(Request(server.port(), "GET", "/v1/trends").status, 200);
  }
  std::filesystem::remove_all(dir);
}

TEST(TrendServerAssetsTest, WebRootServesFilesFromDisk) {
  auto dir =
      std::filesystem::temp_directory_path() / ("surge_web_root_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "index.html") << "<p>dev copy</p>";
  TrendStore store;
  TrendServerOptions o;
  o.port = 0;
  o.web_root = dir.string();
  TrendServer server(&store, o);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(Request(server.port(), "GET", "/").body, "<p>dev copy</p>");
  EXPECT_EQ(Request(server.port(), "GET", "/app.js").status, 404);  // not in that folder
  EXPECT_EQ(Request(server.port(), "GET", "/..%2Findex.html").status, 404);
  server.Stop();
  std::filesystem::remove_all(dir);

  TrendServerOptions bad;
  bad.port = 0;
  bad.web_root = (dir / "nope").string();
  TrendServer refused(&store, bad);
  Status s = refused.Start();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("is not a folder"), std::string::npos);
}

TEST(TrendServerAssetsTest, PortInUseIsAClearError) {
  TrendStore store;
  TrendServerOptions o;
  o.port = 0;
  TrendServer first(&store, o);
  ASSERT_TRUE(first.Start().ok());
  o.port = first.port();
  TrendServer second(&store, o);
  Status s = second.Start();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find(std::to_string(o.port)), std::string::npos) << s.message();
}

// ---- server-sent events ----

TEST_F(TrendServerTest, StreamSendsRetryHealthThenAnEventPerBucketToEveryClient) {
  TrendServerOptions o;
  o.sse_retry_ms = 1234;
  o.sse_queue = 64;
  Start(o);
  SseClient a(port_), b(port_);
  ASSERT_TRUE(a.ReadHead());
  ASSERT_TRUE(b.ReadHead());
  EXPECT_EQ(a.head().status, 200);
  EXPECT_EQ(a.head().Header("Content-Type").value_or(""), "text/event-stream; charset=utf-8");
  EXPECT_EQ(a.head().Header("Transfer-Encoding").value_or(""), "chunked");
  EXPECT_EQ(a.head().Header("Cache-Control").value_or(""), "no-store");
  for (SseClient* c : {&a, &b}) {
    auto first = c->Next();
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->retry, 1234);
    auto health = c->NextEvent();
    ASSERT_TRUE(health.has_value());
    EXPECT_EQ(health->event, "health");
    EXPECT_EQ(json::parse(health->data)["model"], "lexical only");
  }
  ASSERT_TRUE(WaitFor([&] { return server_->stream_clients() == 2; }));
  for (int bucket = 1; bucket <= 5; ++bucket) {
    ASSERT_TRUE(store_.Publish(bucket * 60000, MakeList(3, 100.0 * bucket)).ok());
  }
  for (SseClient* c : {&a, &b}) {
    for (int bucket = 1; bucket <= 5; ++bucket) {
      auto e = c->NextEvent();
      ASSERT_TRUE(e.has_value()) << "bucket " << bucket;
      EXPECT_EQ(e->event, "trends");
      EXPECT_EQ(e->id, std::to_string(bucket * 60000));
      auto j = json::parse(e->data);
      EXPECT_EQ(j["bucket"], bucket * 60000);
      EXPECT_EQ(j["seq"], bucket);
      EXPECT_EQ(j["trends"].size(), 3u);
      EXPECT_EQ(j["spark"]["t1"].size(), static_cast<size_t>(bucket));
    }
  }
  PipelineHealth h;
  h.posts_per_s = 77;
  ASSERT_TRUE(store_.UpdateHealth(h).ok());
  auto e = a.NextEvent();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->event, "health");
  EXPECT_DOUBLE_EQ(json::parse(e->data)["posts_per_s"].get<double>(), 77);
  EXPECT_EQ(server_->stream_events_dropped(), 0u);
}

TEST_F(TrendServerTest, StreamStartsWithTheCurrentListUnlessLastEventIdHasIt) {
  Start();
  ASSERT_TRUE(store_.Publish(60000, MakeList(2)).ok());
  SseClient fresh(port_);
  auto e = fresh.NextEvent();  // health
  ASSERT_TRUE(e.has_value());
  e = fresh.NextEvent();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->event, "trends");
  EXPECT_EQ(e->id, "60000");

  SseClient resumed(port_, "Last-Event-ID: 60000\r\n");
  ASSERT_TRUE(resumed.NextEvent().has_value());  // health
  ASSERT_TRUE(WaitFor([&] { return server_->stream_clients() == 2; }));
  ASSERT_TRUE(store_.Publish(120000, MakeList(2)).ok());
  e = resumed.NextEvent();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->id, "120000");  // 60000 was not sent again

  SseClient stale(port_, "last-event-id: 60000\r\n");  // older than current: gets the current
  ASSERT_TRUE(stale.NextEvent().has_value());
  e = stale.NextEvent();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->id, "120000");
}

TEST_F(TrendServerTest, HeartbeatCommentsWhenIdle) {
  TrendServerOptions o;
  o.sse_heartbeat_ms = 20;
  Start(o);
  SseClient c(port_);
  int pings = 0;
  for (int i = 0; i < 10 && pings < 2; ++i) {
    auto block = c.Next();
    ASSERT_TRUE(block.has_value());
    for (const auto& comment : block->comments) pings += comment == " ping";
  }
  EXPECT_EQ(pings, 2);
}

TEST_F(TrendServerTest, DisconnectedClientsAreDropped) {
  Start();
  auto a = std::make_unique<SseClient>(port_);
  SseClient b(port_);
  ASSERT_TRUE(a->ReadHead());
  ASSERT_TRUE(b.ReadHead());
  ASSERT_TRUE(WaitFor([&] { return server_->stream_clients() == 2; }));
  a.reset();  // closes the socket
  ASSERT_TRUE(WaitFor([&] { return server_->stream_clients() == 1; }));
  ASSERT_TRUE(store_.Publish(1000, MakeList(2)).ok());
  auto e = b.NextEvent();  // health
  e = b.NextEvent();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->id, "1000");
  EXPECT_EQ(server_->stream_clients(), 1u);
}

TEST_F(TrendServerTest, TooManyStreamClientsIs503) {
  TrendServerOptions o;
  o.max_sse_clients = 1;
  Start(o);
  SseClient a(port_);
  ASSERT_TRUE(a.ReadHead());
  auto r = Request(port_, "GET", "/v1/trends/stream");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(json::parse(r.body)["error"].get<std::string>().find("too many stream clients"),
            std::string::npos);
}

// A client that never reads must not hold up the publisher or the other clients: its queue
// drops the oldest events, the reading client still gets the newest list.
TEST_F(TrendServerTest, SlowClientDoesNotStallThePublisher) {
  TrendServerOptions o;
  o.sse_queue = 4;
  Start(o);
  SseClient stuck(port_, "", /*rcvbuf=*/4096);
  ASSERT_TRUE(stuck.ReadHead());
  SseClient reader(port_);
  ASSERT_TRUE(reader.ReadHead());
  ASSERT_TRUE(WaitFor([&] { return server_->stream_clients() == 2; }));

  constexpr int kBuckets = 300;
  std::atomic<int64_t> last_seen{0};
  std::atomic<int> out_of_order{0};
  std::thread read([&] {
    while (last_seen < kBuckets) {
      auto e = reader.NextEvent();
      if (!e) return;
      if (e->event != "trends") continue;
      int64_t seq = json::parse(e->data)["seq"].get<int64_t>();
      if (seq <= last_seen) out_of_order++;
      last_seen = seq;
    }
  });
  // ~40 KB per event: far more than the stuck client's socket buffers can hold.
  for (int b = 1; b <= kBuckets; ++b) {
    ASSERT_TRUE(store_.Publish(b * 1000, MakeList(100, 1000.0 + b)).ok());
  }
  read.join();
  EXPECT_EQ(last_seen.load(), kBuckets);
  EXPECT_EQ(out_of_order.load(), 0);
  EXPECT_GT(server_->stream_events_dropped(), 0u);
  EXPECT_EQ(server_->stream_clients(), 2u);  // the slow client is still connected
}

TEST_F(TrendServerTest, StopEndsOpenStreams) {
  Start();
  SseClient c(port_);
  ASSERT_TRUE(c.ReadHead());
  ASSERT_TRUE(WaitFor([&] { return server_->stream_clients() == 1; }));
  server_->Stop();
  EXPECT_EQ(server_->stream_clients(), 0u);
  // The connection is gone: reading ends (EOF) instead of waiting for events.
  while (c.Next().has_value()) {
  }
  ASSERT_TRUE(store_.Publish(1000, MakeList(1)).ok());  // no listener left to call
  server_.reset();
}

}  // namespace
}  // namespace surge::stream::web
