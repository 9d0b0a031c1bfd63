// `surge demo`: the embedded default end to end — the simulator's Weibo-like stream (or a JSONL
// file, or a Kafka topic) through the whole pipeline in one process (annotate with the bundled
// demo model on the CPU engine, detect, rank, hashtags), a live dashboard on
// http://127.0.0.1:8080, a refreshing top-10 in the terminal, and the evaluation against the
// simulator's ground truth at the end (README.md, "The surge command").
#include "stream/demo/demo.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "cli/command.h"
#include "cli/engine_io.h"
#include "core/logging.h"
#include "stream/eval/eval.h"
#include "stream/kafka/pipeline_source.h"
#include "stream/pipeline.h"
#include "stream/sim/generator.h"
#include "stream/sim/scenario.h"
#include "stream/web/trend_server.h"

namespace surge::cli {
namespace {

namespace fs = std::filesystem;

struct DemoArgs {
  std::string source = "sim";
  std::string scenario;
  std::string duration;
  int64_t seed = -1;
  std::string truth;
  std::string model;
  bool no_model = false;
  int model_every = 16;
  std::string serve;
  std::string serve_model;
  double speed = -1;
  std::string address = "127.0.0.1";
  int port = 8080;
  bool no_dashboard = false;
  double hold_seconds = 0;
  bool hold = false;
  bool plain = false;
  int threads = 0;
  int idle_ms = 10000;
  std::string out;
  std::string eval_json;
};

std::atomic<bool> g_interrupted{false};

void OnInterrupt(int) { g_interrupted.store(true); }

// The bundled demo model: ./models/demo, or models/demo beside the source tree the binary was
// built in (build/<preset>/bin/surge), or <prefix>/share/surge/models/demo for an installed one.
std::string FindDemoModel() {
  std::vector<fs::path> candidates = {fs::path("models") / "demo"};
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path bin = exe.parent_path();
    candidates.push_back(bin / ".." / ".." / ".." / "models" / "demo");
    candidates.push_back(bin / ".." / "share" / "surge" / "models" / "demo");
  }
  for (const fs::path& c : candidates) {
    if (fs::exists(c / "surge_model.json", ec)) return fs::weakly_canonical(c, ec).string();
  }
  return "";
}

int RunDemo(const DemoArgs& a) {
  if (a.model_every < 1) return Fail(InvalidArgumentError("--model-every must be >= 1"));
  if (a.port < 0 || a.port > 65535) {
    return Fail(InvalidArgumentError("--port must be 0..65535 (0: any free port)"));
  }

  // The source: the simulator (paced against the wall clock), a JSONL file or a Kafka topic.
  stream::PipelineOptions o;
  o.threads = a.threads;
  o.rank.top_k = 10;
  std::unique_ptr<stream::PostSource> source;
  stream::demo::PacedSimGenerator* paced = nullptr;
  stream::kafka::KafkaPipelineSource* kafka = nullptr;
  std::optional<stream::eval::Truth> truth;
  if (a.source == "sim" || a.source.rfind("sim:", 0) == 0) {
    std::string file = a.scenario;
    if (a.source.size() > 4) file = a.source.substr(4);
    auto scenario = file.empty() ? stream::sim::DefaultScenario() : stream::sim::LoadScenario(file);
    if (!scenario.ok()) return Fail(scenario.status());
    stream::sim::ScenarioOverrides ov;
    if (a.seed >= 0) ov.seed = static_cast<uint64_t>(a.seed);
    if (!a.duration.empty()) {
      auto d = stream::sim::ParseDuration(a.duration);
      if (!d.ok()) return Fail(d.status().WithContext("--duration"));
      ov.duration_ms = *d;
    }
    auto dropped = stream::sim::ApplyOverrides(ov, &*scenario);
    if (!dropped.ok()) return Fail(dropped.status());
    auto gen = stream::sim::Generator::Create(*scenario);
    if (!gen.ok()) return Fail(gen.status());
    // Default pace: the whole scenario in about 40 s of wall time.
    double speed =
        a.speed >= 0 ? a.speed : std::max(1.0, static_cast<double>(scenario->duration_ms) / 40000);
    o.detect.bucket_ms = scenario->bucket_ms;
    auto g = std::make_unique<stream::demo::PacedSimGenerator>(std::move(*gen), speed);
    paced = g.get();
    source = std::make_unique<stream::PostGeneratorSource>(std::move(g), "sim:" + scenario->name);
    std::cout << fmt::format(
        "demo: scenario '{}' ({:.0f} simulated minutes, {} events, {} spam campaigns) {}\n",
        scenario->name, scenario->duration_ms / 60000.0, scenario->events.size(),
        scenario->spam.size(),
        speed > 0 ? fmt::format("at {:.0f}x speed", speed) : std::string("as fast as it runs"));
  } else if (a.source.rfind("kafka://", 0) == 0) {
    auto k = stream::kafka::KafkaPipelineSource::Open(a.source, a.idle_ms);
    if (!k.ok()) return Fail(k.status());
    kafka = k->get();
    source = std::move(*k);
  } else {
    auto j = stream::JsonlSource::Open(a.source);
    if (!j.ok()) return Fail(j.status());
    source = std::move(*j);
  }
  if (!a.truth.empty()) {
    auto t = stream::eval::LoadTruth(a.truth);
    if (!t.ok()) return Fail(t.status());
    truth = std::move(*t);
    o.detect.bucket_ms = truth->bucket_ms;
  }

  // The model: the bundled demo model unless told otherwise.
  std::string model = a.model;
  if (model.empty() && !a.no_model) {
    model = FindDemoModel();
    if (model.empty()) {
      SURGE_LOG_WARN(
          "the bundled demo model (models/demo) was not found: running the lexical path only "
          "(pass --model DIR, or --no-model to silence this)");
    }
  }
  if (!a.serve.empty() && model.empty()) {
    return Fail(InvalidArgumentError(
        "--serve needs the model folder too (--model DIR): its surge_model.json and vocab.txt "
        "describe the served model"));
  }
  o.annotate.model_dir = model;
  o.annotate.model_every = a.model_every;
  o.annotate.model.remote = a.serve;
  o.annotate.model.remote_model = a.serve_model;

  auto pipeline = stream::Pipeline::Create(o);
  if (!pipeline.ok()) return Fail(pipeline.status());

  // The dashboard.
  std::unique_ptr<stream::web::TrendStore> store;
  std::unique_ptr<stream::web::TrendServer> server;
  std::string url;
  if (!a.no_dashboard) {
    store = std::make_unique<stream::web::TrendStore>();
    stream::web::TrendServerOptions so;
    so.address = a.address;
    so.port = a.port;
    server = std::make_unique<stream::web::TrendServer>(store.get(), so);
    if (Status st = server->Start(); !st.ok()) {
      return Fail(st.WithContext(fmt::format(
          "dashboard on {}:{} (another process may hold the port: try --port 0 or --port N)",
          a.address, a.port)));
    }
    url = server->url();
    std::cout << "dashboard: " << url << std::endl;
  }

  stream::demo::DemoSink sink(store.get(), source->name());
  if (paced) {
    // Lag of a simulated stream: simulated time not yet in a closed bucket, in wall time.
    const double speed = paced->speed();
    sink.set_lag([paced, speed](const stream::PipelineHealth& h) {
      stream::demo::SimProgress p = paced->progress();
      if (h.last_bucket_end_ms == 0) return 0.0;
      double behind = static_cast<double>(p.now_ms - h.last_bucket_end_ms);
      return std::max(0.0, speed > 0 ? behind / speed : 0.0);
    });
  }
  std::vector<stream::TrendSink*> sinks = {&sink};
  std::unique_ptr<stream::JsonlTrendSink> jsonl;
  if (!a.out.empty()) {
    auto j = stream::JsonlTrendSink::Open(a.out);
    if (!j.ok()) return Fail(j.status());
    jsonl = std::move(*j);
    sinks.push_back(jsonl.get());
  }
  auto dead = stream::DeadLetterSink::Open("");
  if (!dead.ok()) return Fail(dead.status());

  struct sigaction sa = {};
  sa.sa_handler = OnInterrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::atomic<bool> finished{false};
  Status run_status;
  std::thread runner([&] {
    run_status = (*pipeline)->Run(source.get(), sinks, dead->get());
    finished.store(true);
  });
  const bool interactive = !a.plain && isatty(STDOUT_FILENO) && getenv("TERM") != nullptr &&
                           std::string_view(getenv("TERM")) != "dumb";
  stream::demo::TerminalView view(stdout, interactive, url);
  bool stopping = false;
  while (!finished.load()) {
    if (g_interrupted.load() && !stopping) {
      stopping = true;
      if (paced) paced->Stop();
      if (kafka) kafka->Stop();
    }
    stream::demo::SimProgress p;
    if (paced) p = paced->progress();
    view.Draw(sink.latest(), (*pipeline)->health(), paced ? &p : nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(interactive ? 500 : 200));
  }
  runner.join();
  stream::demo::SimProgress p;
  if (paced) p = paced->progress();
  view.Draw(sink.latest(), (*pipeline)->health(), paced ? &p : nullptr);
  if (!run_status.ok()) return Fail(run_status);
  if (kafka) {
    if (Status st = kafka->CommitAll(); !st.ok()) SURGE_LOG_WARN("{}", st.ToString());
  }

  stream::PipelineHealth h = (*pipeline)->health();
  std::cout << fmt::format(
      "\ndemo: {} posts in {:.1f} s ({:.0f} posts/s), {} buckets, {}; post-to-hot-list latency "
      "p50 {:.0f} ms, p99 {:.0f} ms{}\n",
      h.posts, h.wall_seconds, h.posts_per_second, h.buckets,
      h.model ? fmt::format("model {} on 1 post in {} (inference p99 {:.1f} ms per batch)",
                            fs::path(h.model_name).filename().string(), a.model_every,
                            h.inference_p99_ms)
              : std::string("lexical path (no model)"),
      h.latency_p50_ms, h.latency_p99_ms,
      h.dead_letters ? fmt::format(", {} dead letters", h.dead_letters) : "");

  if (paced) truth = paced->truth();
  if (truth) {
    auto report = stream::eval::Evaluate(*truth, sink.eval_lists());
    if (!report.ok()) return Fail(report.status());
    std::cout << "\nevaluation against the simulator's ground truth (docs/stream-sim.md):\n"
              << stream::eval::FormatReports({{"demo", *report}});
    if (!a.eval_json.empty()) {
      std::FILE* f = std::fopen(a.eval_json.c_str(), "w");
      if (f == nullptr) {
        return Fail(InvalidArgumentError("--eval-json '{}': cannot write: {}", a.eval_json,
                                         std::strerror(errno)));
      }
      std::string j = stream::eval::ReportToJson(*report);
      std::fwrite(j.data(), 1, j.size(), f);
      std::fclose(f);
    }
  }

  if (server && (a.hold || a.hold_seconds > 0) && !g_interrupted.load()) {
    std::cout << "dashboard still serving at " << url << (a.hold ? " (Ctrl-C to stop)" : "")
              << std::endl;
    auto until = std::chrono::steady_clock::now() +
                 std::chrono::milliseconds(static_cast<int64_t>(a.hold_seconds * 1000));
    while (!g_interrupted.load() && (a.hold || std::chrono::steady_clock::now() < until)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  if (server) server->Stop();
  return 0;
}

std::function<int()> SetupDemo(CLI::App& sub) {
  auto a = std::make_shared<DemoArgs>();
  sub.add_option("--source", a->source,
                 "posts: sim[:SCENARIO] (the simulator), a JSONL file, '-' (stdin), or "
                 "kafka://HOST:PORT/TOPIC[?group=G]")
      ->capture_default_str();
  sub.add_option("--scenario", a->scenario,
                 "simulator scenario file (YAML/JSON; default built-in)");
  sub.add_option("--duration", a->duration, "simulated time (e.g. 10m), overrides the scenario's");
  sub.add_option("--seed", a->seed, "simulator seed, overrides the scenario's");
  sub.add_option("--truth", a->truth,
                 "ground truth for a JSONL/Kafka source (from surge simulate)");
  sub.add_option("--model", a->model, "model folder (default: the bundled models/demo)");
  sub.add_flag("--no-model", a->no_model, "lexical path only");
  sub.add_option("--model-every", a->model_every,
                 "run the model on one post in N (the rest stay lexical)")
      ->capture_default_str();
  sub.add_option("--serve", a->serve, "run the model on a running surge serve: grpc://HOST:PORT");
  sub.add_option("--serve-model", a->serve_model, "the model's name on the server");
  sub.add_option("--speed", a->speed,
                 "simulated seconds per wall second (default: the scenario in about 40 s; 0: as "
                 "fast as possible)");
  sub.add_option("--address", a->address, "dashboard address")->capture_default_str();
  sub.add_option("--port", a->port, "dashboard port (0: any free port)")->capture_default_str();
  sub.add_flag("--no-dashboard", a->no_dashboard, "no HTTP server");
  sub.add_flag("--hold", a->hold, "keep the dashboard serving after the stream ends (Ctrl-C)");
  sub.add_option("--hold-seconds", a->hold_seconds, "keep it serving this long after the end");
  sub.add_flag("--plain", a->plain, "print a line per bucket instead of redrawing the terminal");
  sub.add_option("--threads", a->threads, "annotate threads (0: all cores)");
  sub.add_option("--idle-ms", a->idle_ms,
                 "Kafka source: end after this long without a post (0: never)")
      ->capture_default_str();
  sub.add_option("--out", a->out, "also write the trend updates here (JSONL)");
  sub.add_option("--eval-json", a->eval_json, "write the evaluation as JSON here");
  return [a] { return RunDemo(*a); };
}

}  // namespace

SURGE_REGISTER_COMMAND(demo, "demo",
                       "The embedded default end to end: simulator -> pipeline (demo model on the "
                       "CPU) -> live dashboard and terminal top 10 -> evaluation",
                       SetupDemo);

}  // namespace surge::cli
