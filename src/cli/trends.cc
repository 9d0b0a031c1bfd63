// `surge trends`: the whole trend pipeline in one process (sources -> annotate -> detect -> rank
// -> JSONL), see docs/stream.md.
#include <cmath>
#include <iostream>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/engine_io.h"
#include "core/logging.h"
#include "stream/kafka/pipeline_source.h"
#include "stream/pipeline.h"
#include "stream/sim_source.h"

namespace surge::cli {
namespace {

struct TrendsArgs {
  std::string source = "posts.jsonl";
  std::string out = "trends.jsonl";
  std::string model;
  std::string serve;
  std::string serve_model;
  int model_every = 1;
  int idle_ms = 10000;
  std::string bucket = "60s";
  int top_k = 10;
  std::string dead_letter;
  int threads = 0;
  int shards = 1;
  double half_life = 0;
  double threshold = 0;
  double beta = 0;
  bool no_new_words = false;
  bool no_hmm = false;
  bool json = false;
  std::string dict;
  std::string idf;
};

// "60s", "1m", "500ms", "1.5m", "2h" or a plain number of seconds -> ms.
Result<int64_t> ParseBucket(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  std::string num = text.substr(0, i), unit = text.substr(i);
  char* end = nullptr;
  double v = num.empty() ? -1 : std::strtod(num.c_str(), &end);
  double scale = unit.empty() || unit == "s" ? 1000
                 : unit == "ms"              ? 1
                 : unit == "m"               ? 60000
                 : unit == "h"               ? 3600000
                                             : -1;
  if (num.empty() || end != num.c_str() + num.size() || scale < 0 || !(v > 0)) {
    return InvalidArgumentError(
        "--bucket '{}': expected a positive duration such as 60s, 1m, "
        "500ms or a number of seconds",
        text);
  }
  double ms = v * scale;
  if (ms < 1 || ms > 86400000.0 * 7) {
    return InvalidArgumentError("--bucket '{}': must be between 1 ms and 7 days", text);
  }
  return static_cast<int64_t>(std::llround(ms));
}

Result<std::unique_ptr<stream::PostSource>> OpenSource(const std::string& spec, int idle_ms) {
  if (spec.rfind("kafka://", 0) == 0) {
    SURGE_ASSIGN_OR_RETURN(auto k, stream::kafka::KafkaPipelineSource::Open(spec, idle_ms));
    return std::unique_ptr<stream::PostSource>(std::move(k));
  }
  if (spec == "sim" || spec.rfind("sim:", 0) == 0) return stream::OpenSimSource(spec);
  SURGE_ASSIGN_OR_RETURN(auto s, stream::JsonlSource::Open(spec));
  return std::unique_ptr<stream::PostSource>(std::move(s));
}

int RunTrends(const TrendsArgs& a) {
  stream::PipelineOptions o;
  auto bucket = ParseBucket(a.bucket);
  if (!bucket.ok()) return Fail(bucket.status());
  o.detect.bucket_ms = *bucket;
  if (a.top_k < 1 || a.top_k > 1000) {
    return Fail(InvalidArgumentError("--top-k must be 1..1000, got {}", a.top_k));
  }
  o.rank.top_k = a.top_k;
  if (a.threads < 0) return Fail(InvalidArgumentError("--threads must be >= 0 (0: all cores)"));
  o.threads = a.threads;
  o.detect_shards = a.shards;
  if (a.half_life > 0) o.detect.half_life_buckets = a.half_life;
  if (a.threshold > 0) o.detect.threshold = a.threshold;
  if (a.beta > 0) o.detect.beta = a.beta;
  o.annotate.model_dir = a.model;
  if (!a.serve.empty() && a.model.empty()) {
    return Fail(InvalidArgumentError(
        "--serve needs --model DIR too: the folder's surge_model.json and vocab.txt describe the "
        "served model"));
  }
  o.annotate.model.remote = a.serve;
  o.annotate.model.remote_model = a.serve_model;
  o.annotate.model_every = a.model_every;
  o.annotate.new_words = !a.no_new_words;
  o.annotate.hmm = !a.no_hmm;
  o.annotate.dict_path = a.dict;
  o.annotate.idf_path = a.idf;

  auto source = OpenSource(a.source, a.idle_ms);
  if (!source.ok()) return Fail(source.status());
  auto pipeline = stream::Pipeline::Create(o);
  if (!pipeline.ok()) return Fail(pipeline.status());
  auto sink = stream::JsonlTrendSink::Open(a.out);
  if (!sink.ok()) return Fail(sink.status());
  auto dead = stream::DeadLetterSink::Open(a.dead_letter);
  if (!dead.ok()) return Fail(dead.status());
  Status st = (*pipeline)->Run(source->get(), {sink->get()}, dead->get());
  if (st.ok()) {
    // A Kafka source commits what the finished run has flushed (see pipeline_source.h).
    if (auto* k = dynamic_cast<stream::kafka::KafkaPipelineSource*>(source->get())) {
      st = k->CommitAll();
    }
  }
  stream::PipelineHealth h = (*pipeline)->health();
  std::ostream& os = a.out == "-" ? std::cerr : std::cout;
  if (a.json) {
    nlohmann::json j;
    j["source"] = (*source)->name();
    j["out"] = a.out;
    j["records"] = h.records_read;
    j["posts"] = h.posts;
    j["dead_letters"] = h.dead_letters;
    j["dead_letters_by_kind"] = h.dead_letters_by_kind;
    j["replays_dropped"] = h.replays_dropped;
    j["buckets"] = h.buckets;
    j["updates"] = (*sink)->updates_written();
    j["wall_seconds"] = h.wall_seconds;
    j["posts_per_second"] = h.posts_per_second;
    j["latency_p50_ms"] = h.latency_p50_ms;
    j["latency_p99_ms"] = h.latency_p99_ms;
    j["model"] = h.model ? h.model_name : "";
    j["threads"] = (*pipeline)->options().threads;
    os << j.dump() << '\n';
  } else {
    os << fmt::format(
        "trends: {} posts from {} ({} records) in {:.2f} s = {:.0f} posts/s, {} threads, {}\n",
        h.posts, (*source)->name(), h.records_read, h.wall_seconds, h.posts_per_second,
        (*pipeline)->options().threads,
        h.model ? "model " + h.model_name + (a.serve.empty() ? "" : " on " + a.serve)
                : "lexical path (no model)");
    os << fmt::format("buckets: {} of {} ms, {} trend updates written to {}\n", h.buckets,
                      o.detect.bucket_ms, (*sink)->updates_written(), a.out);
    std::string kinds;
    for (const auto& [k, n] : h.dead_letters_by_kind) kinds += fmt::format(" {}={}", k, n);
    os << fmt::format(
        "dead letters: {}{}{}\n", h.dead_letters, kinds.empty() ? "" : " (" + kinds.substr(1) + ")",
        a.dead_letter.empty() || h.dead_letters == 0 ? "" : ", written to " + a.dead_letter);
    if (h.replays_dropped) os << fmt::format("replayed posts dropped: {}\n", h.replays_dropped);
    os << fmt::format("post-to-hot-list latency: p50 {:.1f} ms, p99 {:.1f} ms\n", h.latency_p50_ms,
                      h.latency_p99_ms);
  }
  if (!st.ok()) return Fail(st);
  return 0;
}

std::function<int()> SetupTrends(CLI::App& sub) {
  auto a = std::make_shared<TrendsArgs>();
  sub.add_option(
         "--source", a->source,
         "posts: a JSONL file, '-' for stdin, sim:[SCENARIO], or kafka://HOST:PORT/TOPIC[?group=G]")
      ->capture_default_str();
  sub.add_option("--out", a->out, "trend updates (JSONL, '-' for stdout)")->capture_default_str();
  sub.add_option("--model", a->model,
                 "model folder (model.onnx, vocab.txt, surge_model.json); default: lexical only");
  sub.add_option("--serve", a->serve,
                 "run the model on surge serve instead of in process: grpc://HOST:PORT");
  sub.add_option("--idle-ms", a->idle_ms,
                 "kafka:// source: end after this long without a post (0: never)")
      ->capture_default_str();
  sub.add_option("--model-every", a->model_every,
                 "run the model on one post in N (by post-id hash); the rest stay lexical")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub.add_option("--serve-model", a->serve_model,
                 "the model's name on the server (default: the --model folder's name)");
  sub.add_option("--bucket", a->bucket, "bucket width (60s, 1m, 500ms)")->capture_default_str();
  sub.add_option("--top-k", a->top_k, "topics per hot list")->capture_default_str();
  sub.add_option("--dead-letter", a->dead_letter,
                 "JSONL file for records that cannot be processed (default: counted and logged)");
  sub.add_option("--threads", a->threads, "annotate threads (0: all cores)")->capture_default_str();
  sub.add_option("--shards", a->shards, "detect shards (threads)")->capture_default_str();
  sub.add_option("--half-life", a->half_life, "EWMA half-life in buckets (default 8)");
  sub.add_option("--threshold", a->threshold, "significance to report (default 3.5)");
  sub.add_option("--beta", a->beta, "noise floor of the significance (default 3)");
  sub.add_flag("--no-new-words", a->no_new_words, "do not learn new phrases from the stream");
  sub.add_flag("--no-hmm", a->no_hmm, "segment without the HMM for unknown words");
  sub.add_option("--dict", a->dict, "jieba dictionary (default: Debian's)");
  sub.add_option("--idf", a->idf, "idf table (default: jieba's idf.txt)");
  sub.add_flag("--json", a->json, "print the summary as one JSON object");
  return [a] { return RunTrends(*a); };
}

}  // namespace

SURGE_REGISTER_COMMAND(trends, "trends",
                       "Detect trending topics in a stream of posts and name them as hashtags",
                       SetupTrends);

}  // namespace surge::cli
