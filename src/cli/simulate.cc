// `surge simulate`: a Weibo-like post stream with known events and spam campaigns, written as
// JSONL posts plus a ground-truth file (and optionally per-post training labels).
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "cli/command.h"
#include "stream/eval/truth.h"
#include "stream/kafka/sinks.h"
#include "stream/kafka/uri.h"
#include "stream/sim/generator.h"
#include "stream/sim/scenario.h"
#include "stream/sim/sink.h"

namespace surge::cli {
namespace {

namespace sim = stream::sim;

struct SimulateArgs {
  std::string scenario;
  std::string out = "posts.jsonl";
  std::string truth = "truth.json";
  std::string labels;
  std::string duration;
  double rate = -1;
  double speed = 0;  // simulated seconds per wall second; 0 = as fast as the sink takes them
  int64_t seed = -1;
  bool print_scenario = false;
  bool quiet = false;
};

int Fail(const Status& st) {
  std::cerr << "error: " << st.message() << '\n';
  return st.code() == StatusCode::kNotFound ? 1 : 2;
}

// The sink for --out. A Kafka producer plugs in here ("kafka:" targets).
// Posts produced to a Kafka topic (keyed by post id, idempotent producer).
class KafkaSimSink final : public sim::PostSink {
 public:
  explicit KafkaSimSink(std::unique_ptr<stream::kafka::KafkaPostSink> sink)
      : sink_(std::move(sink)) {}
  Status Write(const stream::Post& post) override { return sink_->Write(post); }
  Status Close() override { return sink_->Flush(60000); }

 private:
  std::unique_ptr<stream::kafka::KafkaPostSink> sink_;
};

Result<std::unique_ptr<sim::PostSink>> OpenPostSink(const std::string& target) {
  if (target.rfind("kafka://", 0) == 0) {
    SURGE_ASSIGN_OR_RETURN(auto uri, stream::kafka::KafkaUri::Parse(target));
    if (uri.topic.empty()) uri.topic = "surge.posts";
    SURGE_ASSIGN_OR_RETURN(auto sink, stream::kafka::KafkaPostSink::Create(uri, 30000));
    return std::unique_ptr<sim::PostSink>(std::make_unique<KafkaSimSink>(std::move(sink)));
  }
  SURGE_ASSIGN_OR_RETURN(auto sink, sim::JsonlPostSink::Open(target));
  return std::unique_ptr<sim::PostSink>(std::move(sink));
}

int RunSimulate(const SimulateArgs& a) {
  if (a.print_scenario) {
    std::cout << sim::DefaultScenarioYaml();
    return 0;
  }
  auto scenario = a.scenario.empty() ? sim::DefaultScenario() : sim::LoadScenario(a.scenario);
  if (!scenario.ok()) return Fail(scenario.status());
  sim::ScenarioOverrides o;
  if (a.seed >= 0) o.seed = static_cast<uint64_t>(a.seed);
  if (a.rate >= 0) o.rate_per_min = a.rate;
  if (!a.duration.empty()) {
    auto d = sim::ParseDuration(a.duration);
    if (!d.ok()) return Fail(d.status().WithContext("--duration"));
    o.duration_ms = *d;
  }
  auto dropped = sim::ApplyOverrides(o, &*scenario);
  if (!dropped.ok()) return Fail(dropped.status());
  for (const auto& id : a.quiet ? std::vector<std::string>{} : *dropped) {
    std::cerr << "note: '" << id << "' starts after the end of the shortened run; left out\n";
  }
  auto gen = sim::Generator::Create(*scenario);
  if (!gen.ok()) return Fail(gen.status());
  auto sink = OpenPostSink(a.out);
  if (!sink.ok()) return Fail(sink.status());
  std::unique_ptr<sim::JsonlLabelSink> labels;
  if (!a.labels.empty()) {
    auto l = sim::JsonlLabelSink::Open(a.labels, &(*gen)->scenario());
    if (!l.ok()) return Fail(l.status());
    labels = std::move(*l);
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<sim::SimPost> batch;
  int64_t first_ts = INT64_MIN;
  while ((*gen)->NextBatch(&batch)) {
    if (a.speed > 0 && !batch.empty()) {
      // Paced: a post leaves when as much wall time has passed as its simulated time / speed.
      if (first_ts == INT64_MIN) first_ts = batch.front().post.ts_ms;
      const double due_s = static_cast<double>(batch.front().post.ts_ms - first_ts) / 1000.0 / a.speed;
      std::this_thread::sleep_until(t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                             std::chrono::duration<double>(due_s)));
    }
    for (const auto& p : batch) {
      if (Status st = (*sink)->Write(p.post); !st.ok()) return Fail(st);
      if (labels) {
        if (Status st = labels->Write(p); !st.ok()) return Fail(st);
      }
    }
  }
  if (Status st = (*sink)->Close(); !st.ok()) return Fail(st);
  if (labels) {
    if (Status st = labels->Close(); !st.ok()) return Fail(st);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const stream::eval::Truth truth = (*gen)->truth();
  if (!a.truth.empty()) {
    if (Status st = sim::WriteTextFile(a.truth, stream::eval::TruthToJson(truth)); !st.ok()) {
      return Fail(st);
    }
  }
  if (!a.quiet) {
    std::cerr << fmt::format(
        "simulate: scenario '{}', seed {}: {} posts over {:.1f} simulated minutes, {} events, {} "
        "spam campaigns -> {}{}{} ({:.2f} s, {:.0f} posts/s)\n",
        truth.scenario, truth.seed, truth.posts,
        static_cast<double>(truth.end_ms - truth.start_ms) / 60000.0, truth.events.size(),
        truth.spam.size(), a.out, a.truth.empty() ? "" : ", " + a.truth,
        a.labels.empty() ? "" : ", " + a.labels, secs, static_cast<double>(truth.posts) / secs);
  }
  return 0;
}

std::function<int()> SetupSimulate(CLI::App& sub) {
  auto a = std::make_shared<SimulateArgs>();
  sub.add_option("--scenario", a->scenario,
                 "scenario file, YAML or JSON, read on top of the default (default: built-in)");
  sub.add_option(
      "--out", a->out,
      "posts: a JSONL file, '-' = stdout, or kafka://HOST:PORT/TOPIC (default posts.jsonl)");
  sub.add_option("--truth", a->truth, "ground truth JSON; '' = none (default truth.json)");
  sub.add_option("--labels", a->labels, "per-post labels JSONL (default: not written)");
  sub.add_option("--seed", a->seed, "random seed (overrides the scenario's)")
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--duration", a->duration, "simulated time, e.g. 30m, 2h (overrides)");
  sub.add_option("--rate", a->rate, "background posts per minute at peak activity (overrides)")
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--speed", a->speed,
                 "pace the posts at this many simulated seconds per second, e.g. 60 (default 0: "
                 "as fast as the output takes them)")
      ->check(CLI::NonNegativeNumber);
  sub.add_flag("--print-scenario", a->print_scenario, "print the default scenario (YAML) and exit");
  sub.add_flag("--quiet", a->quiet, "no summary on stderr");
  return [a] { return RunSimulate(*a); };
}

}  // namespace

SURGE_REGISTER_COMMAND(simulate, "simulate",
                       "Generate a Weibo-like post stream with ground truth (events, spam)",
                       SetupSimulate);

}  // namespace surge::cli
