// `surge dashboard`: replays a trends JSONL file (from `surge trends`) into the dashboard and its
// HTTP API, so both can be tried without running the pipeline.
#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <string>
#include <thread>
#include <unordered_set>

#include "cli/command.h"
#include "core/logging.h"
#include "stream/web/replay.h"
#include "stream/web/trend_server.h"

namespace surge::cli {
namespace {

struct DashboardArgs {
  std::string trends;
  std::string posts;
  std::string address = "127.0.0.1";
  int port = 8080;
  int threads = 2;
  double speed = 60;
  bool loop = false;
  std::string web_root;
};

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

int RunDashboard(const DashboardArgs& a) {
  auto file = stream::web::ReadTrendFile(a.trends);
  if (!file.ok()) {
    std::cerr << "error: " << file.status().message() << '\n';
    return 2;
  }
  if (file->bad_lines > 0) {
    std::cerr << "warning: " << a.trends << ": skipped " << file->bad_lines << " of " << file->lines
              << " lines:\n";
    for (const auto& e : file->errors) std::cerr << "  " << e << '\n';
  }
  std::unordered_map<std::string, stream::web::SamplePost> posts;
  if (!a.posts.empty()) {
    std::unordered_set<std::string> ids;
    for (const auto& b : file->buckets) {
      for (const auto& t : b.trends) ids.insert(t.samples.begin(), t.samples.end());
    }
    int64_t bad = 0;
    auto read = stream::web::ReadSamplePosts(a.posts, ids, &bad);
    if (!read.ok()) {
      std::cerr << "error: " << read.status().message() << '\n';
      return 2;
    }
    posts = std::move(*read);
    if (bad > 0) std::cerr << "warning: " << a.posts << ": skipped " << bad << " bad lines\n";
    std::cerr << "dashboard: " << posts.size() << " of " << ids.size() << " sample posts found in "
              << a.posts << '\n';
  }

  stream::web::TrendStore store;
  stream::web::TrendServerOptions so;
  so.address = a.address;
  so.port = a.port;
  so.threads = a.threads;
  so.web_root = a.web_root;
  stream::web::TrendServer server(&store, so);
  if (Status s = server.Start(); !s.ok()) {
    std::cerr << "error: " << s.message() << '\n';
    return 1;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::cout << "dashboard: " << server.url() << "  (" << file->buckets.size() << " buckets from "
            << a.trends << ", replay speed " << a.speed << (a.loop ? ", looping" : "")
            << "; Ctrl-C stops)" << std::endl;

  stream::web::ReplayOptions ro;
  ro.speed = a.speed;
  ro.loop = a.loop;
  ro.source = "replay: " + a.trends;
  auto refused = stream::web::Replay(*file, posts, ro, &store, &g_stop);
  if (!refused.ok()) {
    std::cerr << "error: " << refused.status().message() << '\n';
    return 2;
  }
  if (*refused > 0) std::cerr << "warning: " << *refused << " buckets were refused (see log)\n";
  if (!g_stop) std::cout << "dashboard: replay done; still serving (Ctrl-C stops)" << std::endl;
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server.Stop();
  return 0;
}

SURGE_REGISTER_COMMAND(
    dashboard, "dashboard",
    "Serve the live trends dashboard and HTTP API from a replayed trends file",
    [](CLI::App& sub) -> std::function<int()> {
      auto a = std::make_shared<DashboardArgs>();
      sub.add_option("--trends", a->trends, "trends JSONL (from `surge trends`) to replay")
          ->required()
          ->check(CLI::ExistingFile);
      sub.add_option("--posts", a->posts, "posts JSONL to take the sample posts' texts from")
          ->check(CLI::ExistingFile);
      sub.add_option("--address", a->address, "address to listen on")->capture_default_str();
      sub.add_option("--port", a->port, "port (0: any free port)")
          ->capture_default_str()
          ->check(CLI::Range(0, 65535));
      sub.add_option("--threads", a->threads, "HTTP threads")
          ->capture_default_str()
          ->check(CLI::Range(1, 64));
      sub.add_option("--replay-speed", a->speed,
                     "time compression: 1 = real time, 60 = a minute of "
                     "buckets per second, 0 = all at once")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      sub.add_flag("--loop", a->loop, "replay again from the start when the file ends");
      sub.add_option("--web-root", a->web_root,
                     "serve the dashboard files from this folder (default: "
                     "the copies built into surge)")
          ->check(CLI::ExistingDirectory);
      return [a] { return RunDashboard(*a); };
    });

}  // namespace
}  // namespace surge::cli
