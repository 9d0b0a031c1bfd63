// `surge bench PLAN`: trtexec-like latency/throughput of a plan on synthetic inputs (ids within the
// model's vocabulary, masks with optional random padding). Prints p50/p90/p99/mean latency and
// throughput in sequences and tokens per second.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "cli/engine_io.h"
#include "engine/runtime/engine.h"

namespace surge::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
  std::string plan;
  std::string shapes;
  int64_t batch = 8;
  int64_t seq = 128;
  int warmup = 10;
  int iterations = 0;
  double duration = 3.0;
  int threads = 0;
  int streams = 1;
  bool padding = false;
  uint64_t seed = 1;
  bool json = false;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

int RunBench(const BenchArgs& a) {
  if (a.batch < 1 || a.seq < 1 || a.warmup < 0 || a.iterations < 0 || a.duration <= 0 ||
      a.streams < 1) {
    return Fail(InvalidArgumentError(
        "need --batch, --seq, --streams >= 1, --warmup, --iterations >= 0 and --duration > 0"));
  }
  engine::EngineOptions options;
  options.num_threads = a.threads;
  auto loaded = engine::Engine::Load(a.plan, options);
  if (!loaded.ok()) return Fail(loaded.status());
  std::shared_ptr<const engine::Engine> engine = *loaded;

  std::map<std::string, Shape> explicit_shapes;
  if (!a.shapes.empty()) {
    auto parsed = ParseShapeList(a.shapes);
    if (!parsed.ok()) return Fail(parsed.status());
    explicit_shapes = *parsed;
  }
  SyntheticOptions so{a.batch, a.seq, a.padding, a.seed};
  auto shapes = ResolveShapes(*engine, so, explicit_shapes);
  if (!shapes.ok()) return Fail(shapes.status());
  auto inputs = SyntheticInputs(*engine, *shapes, so);
  if (!inputs.ok()) return Fail(inputs.status());
  ir::SymbolBindings bindings;
  auto checked = engine->PrepareInputs(*inputs, &bindings);  // profile errors before timing
  if (!checked.ok()) return Fail(checked.status());

  // Sequences per run: the first dim of the first input; tokens: its element count; real tokens:
  // the ones an attention mask keeps.
  const Shape& lead = shapes->at(engine->inputs()[0].name);
  const int64_t seqs = lead.empty() ? 1 : lead[0];
  const int64_t tokens = NumElements(lead);
  int64_t real_tokens = tokens;
  for (const auto& [name, t] : *inputs) {
    if (name.find("mask") != std::string::npos && NumElements(t.shape()) == tokens) {
      real_tokens = 0;
      for (int64_t i = 0; i < t.numel(); ++i) real_tokens += t.GetDouble(i) != 0;
    }
  }

  std::vector<std::unique_ptr<engine::ExecutionContext>> contexts;
  for (int s = 0; s < a.streams; ++s) {
    auto ctx = engine->CreateContext();
    if (!ctx.ok()) return Fail(ctx.status());
    contexts.push_back(std::move(ctx).value());
  }
  for (auto& ctx : contexts) {
    for (int i = 0; i < a.warmup; ++i) {
      auto out = ctx->Run(*inputs);
      if (!out.ok()) return Fail(out.status());
    }
  }

  std::vector<std::vector<double>> latencies(a.streams);
  std::atomic<bool> failed{false};
  Status first_error;
  std::mutex error_mu;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(a.duration);
  auto worker = [&](int s) {
    for (int i = 0; a.iterations > 0 ? i < a.iterations : Clock::now() < deadline; ++i) {
      auto t0 = Clock::now();
      auto out = contexts[s]->Run(*inputs);
      auto t1 = Clock::now();
      if (!out.ok()) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!failed.exchange(true)) first_error = out.status();
        return;
      }
      latencies[s].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      if (failed.load()) return;
    }
  };
  std::vector<std::thread> threads;
  for (int s = 1; s < a.streams; ++s) threads.emplace_back(worker, s);
  worker(0);
  for (auto& t : threads) t.join();
  const double wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (failed.load()) return Fail(first_error);

  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  double mean = 0;
  for (double x : all) mean += x;
  mean /= std::max<size_t>(all.size(), 1);
  const double runs_per_s = static_cast<double>(all.size()) / wall_s;
  nlohmann::json j;
  j["plan"] = a.plan;
  j["backend"] = engine->backend_name();
  nlohmann::json shape_json = nlohmann::json::object();
  for (const auto& [name, s] : *shapes) shape_json[name] = s;
  j["shapes"] = shape_json;
  j["streams"] = a.streams;
  j["threads"] = a.threads;
  j["runs"] = all.size();
  j["wall_s"] = wall_s;
  j["latency_ms"] = {{"min", Percentile(all, 0)},   {"p50", Percentile(all, 50)},
                     {"p90", Percentile(all, 90)},  {"p99", Percentile(all, 99)},
                     {"max", Percentile(all, 100)}, {"mean", mean}};
  j["throughput"] = {{"runs_per_s", runs_per_s},
                     {"sequences_per_s", runs_per_s * static_cast<double>(seqs)},
                     {"tokens_per_s", runs_per_s * static_cast<double>(tokens)},
                     {"real_tokens_per_s", runs_per_s * static_cast<double>(real_tokens)}};
  if (a.json) {
    std::cout << j.dump(1) << '\n';
    return 0;
  }
  std::cout << "plan: " << a.plan << " (backend " << engine->backend_name() << ")\n";
  std::cout << "shapes:";
  for (const auto& [name, s] : *shapes) std::cout << ' ' << name << '=' << ShapeToString(s);
  std::cout << "\nruns: " << all.size() << " in " << fmt::format("{:.2f}", wall_s) << " s on "
            << a.streams << " stream(s)\n";
  const auto& l = j["latency_ms"];
  std::cout << fmt::format(
      "latency (ms): min {:.3f}  p50 {:.3f}  p90 {:.3f}  p99 {:.3f}  max {:.3f}  mean {:.3f}\n",
      l["min"].get<double>(), l["p50"].get<double>(), l["p90"].get<double>(),
      l["p99"].get<double>(), l["max"].get<double>(), l["mean"].get<double>());
  std::cout << fmt::format("throughput: {:.1f} seq/s, {:.0f} tokens/s", runs_per_s * seqs,
                           runs_per_s * tokens);
  if (real_tokens != tokens) {
    std::cout << fmt::format(" ({:.0f} real tokens/s)", runs_per_s * real_tokens);
  }
  std::cout << '\n';
  return 0;
}

std::function<int()> SetupBench(CLI::App& sub) {
  auto a = std::make_shared<BenchArgs>();
  sub.add_option("plan", a->plan, "plan file")->required();
  sub.add_option("--shapes", a->shapes, "per-input shapes: input_ids:8x128,attention_mask:8x128");
  sub.add_option("--batch", a->batch, "batch size for inputs not in --shapes")
      ->capture_default_str();
  sub.add_option("--seq", a->seq, "sequence length for inputs not in --shapes")
      ->capture_default_str();
  sub.add_option("--warmup", a->warmup, "untimed runs per stream")->capture_default_str();
  sub.add_option("--iterations", a->iterations, "timed runs per stream (0: use --duration)");
  sub.add_option("--duration", a->duration, "seconds to run when --iterations is 0")
      ->capture_default_str();
  sub.add_option("--threads", a->threads, "threads per context (0: as built)");
  sub.add_option("--streams", a->streams, "contexts running concurrently")->capture_default_str();
  sub.add_flag("--padding", a->padding, "random padding in attention masks");
  sub.add_option("--seed", a->seed, "random seed for the synthetic inputs");
  sub.add_flag("--json", a->json, "print JSON");
  return [a] { return RunBench(*a); };
}

SURGE_REGISTER_COMMAND(bench, "bench", "Measure latency and throughput of a plan", SetupBench);

}  // namespace
}  // namespace surge::cli
