// `surge worker annotate|detect|rank`: one stage of the trend pipeline as its own process,
// connected to the others by Kafka topics (src/stream/kafka/workers.h, docs/kafka.md). Run any
// number of annotate and detect workers per consumer group and one rank worker; SIGINT/SIGTERM
// stop a worker cleanly (its partitions are checkpointed and handed over).
#include <atomic>
#include <csignal>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/engine_io.h"
#include "stream/kafka/workers.h"

namespace surge::cli {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

struct WorkerArgs {
  std::string in;
  std::string out;
  std::string worker_id;
  std::string checkpoint_dir;
  int checkpoint_interval_ms = 5000;
  int max_batch = 512;
  std::string dead_letter;
  // annotate
  std::string model;
  bool no_new_words = false;
  bool no_hmm = false;
  std::string dict;
  std::string idf;
  // detect
  int64_t bucket_ms = 60000;
  double half_life = 0;
  double threshold = 0;
  double beta = 0;
  // rank
  int shards = 0;
  int top_k = 10;
};

Result<stream::kafka::WorkerOptions> Common(const WorkerArgs& a) {
  stream::kafka::WorkerOptions o;
  SURGE_ASSIGN_OR_RETURN(o.in, stream::kafka::KafkaUri::Parse(a.in));
  if (!a.out.empty()) {
    SURGE_ASSIGN_OR_RETURN(o.out, stream::kafka::KafkaUri::Parse(a.out));
  } else {
    o.out.brokers = o.in.brokers;
  }
  if (a.max_batch < 1) return InvalidArgumentError("--max-batch must be >= 1");
  o.worker_id = a.worker_id;
  o.checkpoint_dir = a.checkpoint_dir;
  o.checkpoint_interval_ms = a.checkpoint_interval_ms;
  o.max_batch = static_cast<size_t>(a.max_batch);
  o.dead_letter = a.dead_letter;
  o.stop = &g_stop;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  return o;
}

int RunStage(const std::string& stage, const WorkerArgs& a) {
  auto o = Common(a);
  if (!o.ok()) return Fail(o.status());
  Status st;
  if (stage == "annotate") {
    stream::AnnotateOptions ao;
    ao.model_dir = a.model;
    ao.new_words = !a.no_new_words;
    ao.hmm = !a.no_hmm;
    ao.dict_path = a.dict;
    ao.idf_path = a.idf;
    st = stream::kafka::RunAnnotateWorker(*o, ao);
  } else if (stage == "detect") {
    stream::DetectOptions d;
    d.bucket_ms = a.bucket_ms;
    if (a.half_life > 0) d.half_life_buckets = a.half_life;
    if (a.threshold > 0) d.threshold = a.threshold;
    if (a.beta > 0) d.beta = a.beta;
    st = stream::kafka::RunDetectWorker(*o, d);
  } else {
    stream::RankOptions r;
    if (a.top_k < 1 || a.top_k > 1000) {
      return Fail(InvalidArgumentError("--top-k must be 1..1000, got {}", a.top_k));
    }
    r.top_k = a.top_k;
    st = stream::kafka::RunRankWorker(*o, r, a.shards);
  }
  return st.ok() ? 0 : Fail(st);
}

void AddCommon(CLI::App* s, WorkerArgs* a, bool stateful) {
  s->add_option("--in", a->in, "input: kafka://host:port/topic?group=name[&property=value]")
      ->required();
  s->add_option("--out", a->out, "output: kafka://host:port/topic");
  s->add_option("--worker-id", a->worker_id, "name in logs and checkpoints (default host:pid)");
  s->add_option("--max-batch", a->max_batch, "records per poll")->capture_default_str();
  if (stateful) {
    s->add_option("--checkpoint-dir", a->checkpoint_dir,
                  "directory of the per-partition checkpoints (shared by the stage's workers)")
        ->required();
    s->add_option("--checkpoint-interval-ms", a->checkpoint_interval_ms,
                  "checkpoint (and commit) at most this often")
        ->capture_default_str();
  }
}

std::function<int()> SetupWorker(CLI::App& sub) {
  auto a = std::make_shared<WorkerArgs>();
  auto stage = std::make_shared<std::string>();
  sub.require_subcommand(1);
  CLI::App* ann = sub.add_subcommand("annotate", "posts -> term batches (stateless)");
  AddCommon(ann, a.get(), false);
  ann->add_option("--dead-letter", a->dead_letter, "JSONL file for posts that do not parse");
  ann->add_option("--model", a->model, "model folder (default: lexical only)");
  ann->add_flag("--no-new-words", a->no_new_words,
                "do not learn new phrases (needed for results equal to `surge trends`)");
  ann->add_flag("--no-hmm", a->no_hmm, "segment without the HMM for unknown words");
  ann->add_option("--dict", a->dict, "jieba dictionary (default: Debian's)");
  ann->add_option("--idf", a->idf, "idf table (default: jieba's idf.txt)");
  ann->callback([stage] { *stage = "annotate"; });
  CLI::App* det =
      sub.add_subcommand("detect", "term batches -> candidates (one shard per partition)");
  AddCommon(det, a.get(), true);
  det->add_option("--bucket-ms", a->bucket_ms, "bucket width in ms")->capture_default_str();
  det->add_option("--half-life", a->half_life, "EWMA half-life in buckets (default 8)");
  det->add_option("--threshold", a->threshold, "significance to report (default 3.5)");
  det->add_option("--beta", a->beta, "noise floor of the significance (default 3)");
  det->callback([stage] { *stage = "detect"; });
  CLI::App* rank = sub.add_subcommand("rank", "candidates -> trend updates (one worker)");
  AddCommon(rank, a.get(), true);
  rank->add_option("--shards", a->shards, "detect shards (partitions of the terms topic)")
      ->required();
  rank->add_option("--top-k", a->top_k, "topics per hot list")->capture_default_str();
  rank->callback([stage] { *stage = "rank"; });
  return [a, stage] { return RunStage(*stage, *a); };
}

}  // namespace

SURGE_REGISTER_COMMAND(worker, "worker",
                       "Run one pipeline stage (annotate, detect, rank) as a Kafka worker process",
                       SetupWorker);

}  // namespace surge::cli
