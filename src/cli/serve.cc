// `surge serve`: a Triton-compatible inference server (KServe v2 HTTP/gRPC, Prometheus metrics)
// over a Triton-layout model repository. Flag names follow tritonserver's.
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "core/logging.h"
#include "serve/server.h"

namespace surge::cli {
namespace {

struct ServeArgs {
  std::vector<std::string> repos;
  std::string control_mode = "none";
  std::vector<std::string> load_models;
  int poll_secs = 15;
  std::string http_address = "0.0.0.0";
  int http_port = 8000;
  int http_threads = 2;
  int grpc_infer_threads = 2;
  std::string grpc_address = "0.0.0.0";
  int grpc_port = 8001;
  std::string metrics_address = "0.0.0.0";
  int metrics_port = 8002;
  int metrics_interval_ms = 2000;
  bool allow_http = true;
  bool allow_grpc = true;
  bool allow_metrics = true;
  std::string cache_dir;
  std::string backend;
  int default_max_batch_size = 4;
  size_t max_request_mb = 64;
  std::string admin_token_env = "SURGE_ADMIN_TOKEN";
  bool exit_on_error = false;
  std::string log_level = "info";
};

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

std::string DefaultCacheDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/surge/plans";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/surge/plans";
  return ".surge-cache/plans";
}

int RunServe(const ServeArgs& a) {
  SetLogLevel(a.log_level);
  serve::ServerOptions o;
  o.repository.paths = a.repos;
  auto mode = serve::ParseModelControlMode(a.control_mode);
  if (!mode.ok()) {
    std::cerr << "error: " << mode.status().message() << '\n';
    return 2;
  }
  o.repository.mode = *mode;
  o.repository.startup_models = a.load_models;
  o.repository.poll_secs = a.poll_secs;
  o.repository.exit_on_error = a.exit_on_error;
  o.repository.load.plan_cache_dir = a.cache_dir.empty() ? DefaultCacheDir() : a.cache_dir;
  o.repository.load.backend = a.backend;
  o.repository.load.default_max_batch_size = a.default_max_batch_size;
  if (!a.load_models.empty() && *mode != serve::ModelControlMode::kExplicit) {
    std::cerr << "error: --load-model needs --model-control-mode=explicit\n";
    return 2;
  }
  for (const auto& r : a.repos) {
    if (!std::filesystem::is_directory(r)) {
      std::cerr << "error: --model-repository '" << r << "' is not a folder\n";
      return 2;
    }
  }
  o.http_address = a.http_address;
  o.http_port = a.http_port;
  o.http_threads = a.http_threads;
  o.grpc_infer_threads = a.grpc_infer_threads;
  o.grpc_address = a.grpc_address;
  o.grpc_port = a.grpc_port;
  o.metrics_address = a.metrics_address;
  o.metrics_port = a.metrics_port;
  o.metrics_interval_ms = a.metrics_interval_ms;
  o.allow_http = a.allow_http;
  o.allow_grpc = a.allow_grpc;
  o.allow_metrics = a.allow_metrics;
  o.max_request_bytes = a.max_request_mb << 20;
  if (const char* t = std::getenv(a.admin_token_env.c_str()); t && *t) o.admin_token = t;

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  auto server = serve::Server::Start(o);
  if (!server.ok()) {
    std::cerr << "error: " << server.status().ToString() << '\n';
    return 1;
  }
  // One line on stdout that scripts (and tests) can wait for.
  std::cout << "surge serve: ready http=" << (*server)->http_port()
            << " grpc=" << (*server)->grpc_port() << " metrics=" << (*server)->metrics_port()
            << std::endl;
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  SURGE_LOG_INFO("serve: shutting down (draining in-flight requests)");
  (*server)->Stop();
  return 0;
}

std::function<int()> SetupServe(CLI::App& sub) {
  auto a = std::make_shared<ServeArgs>();
  sub.add_option("--model-repository,--model-store", a->repos,
                 "model repository folder (repeatable)")
      ->required();
  sub.add_option("--model-control-mode", a->control_mode, "none | poll | explicit");
  sub.add_option("--load-model", a->load_models,
                 "model to load at start (explicit mode; '*': all)");
  sub.add_option("--repository-poll-secs", a->poll_secs, "poll interval (poll mode)");
  sub.add_option("--http-address", a->http_address, "HTTP bind address");
  sub.add_option("--http-port", a->http_port, "HTTP port (0: any free port)");
  sub.add_option("--http-thread-count", a->http_threads, "HTTP network threads")
      ->check(CLI::Range(1, 256));
  sub.add_option("--grpc-address", a->grpc_address, "gRPC bind address");
  sub.add_option("--grpc-port", a->grpc_port, "gRPC port (0: any free port)");
  sub.add_option("--grpc-infer-thread-count", a->grpc_infer_threads,
                 "threads serving gRPC calls (one completion queue)")
      ->check(CLI::Range(1, 256));
  sub.add_option("--metrics-address", a->metrics_address, "metrics bind address");
  sub.add_option("--metrics-port", a->metrics_port, "metrics port (0: any free port)");
  sub.add_option("--metrics-interval-ms", a->metrics_interval_ms, "GPU metrics sampling interval");
  sub.add_option("--allow-http", a->allow_http, "serve HTTP");
  sub.add_option("--allow-grpc", a->allow_grpc, "serve gRPC");
  sub.add_option("--allow-metrics", a->allow_metrics, "serve metrics");
  sub.add_option("--model-cache-dir", a->cache_dir,
                 "where plans built from ONNX/HF models are cached (default ~/.cache/surge/plans)");
  sub.add_option("--backend", a->backend, "engine backend for every model (cpu, cuda)");
  sub.add_option("--default-max-batch-size", a->default_max_batch_size,
                 "max_batch_size of auto-completed configs");
  sub.add_option("--max-request-size-mb", a->max_request_mb, "largest request body accepted");
  sub.add_option("--admin-token-env", a->admin_token_env,
                 "environment variable holding the bearer token for repository APIs");
  sub.add_option("--exit-on-error", a->exit_on_error, "exit when a model fails to load at start");
  sub.add_option("--log-level", a->log_level, "trace, debug, info, warn, error");
  return [a] { return RunServe(*a); };
}

}  // namespace

SURGE_REGISTER_COMMAND(serve, "serve",
                       "Triton-compatible inference server: KServe v2 HTTP/gRPC, dynamic batching, "
                       "hot swap, Prometheus metrics",
                       SetupServe);

}  // namespace surge::cli
