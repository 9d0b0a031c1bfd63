#include "stream/kafka/workers.h"

#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>

#include "core/logging.h"
#include "stream/codec.h"
#include "stream/dead_letter.h"
#include "stream/kafka/consumer.h"
#include "stream/kafka/partition_checkpointer.h"
#include "stream/kafka/producer.h"
#include "stream/kafka/sinks.h"

namespace surge::stream::kafka {
namespace {

bool Stopped(const WorkerOptions& o) {
  return o.stop != nullptr && o.stop->load(std::memory_order_relaxed);
}

std::string WorkerId(const WorkerOptions& o) {
  if (!o.worker_id.empty()) return o.worker_id;
  char host[256] = "host";
  gethostname(host, sizeof(host) - 1);
  return fmt::format("{}:{}", host, getpid());
}

Status CheckEndpoints(const WorkerOptions& o, std::string_view stage, bool needs_out_topic) {
  if (o.in.topic.empty() || o.in.group.empty()) {
    return InvalidArgumentError(
        "{} worker: --in {} needs a topic and a group (kafka://host:port/topic?group=name)", stage,
        o.in.ToString());
  }
  if (needs_out_topic && o.out.topic.empty()) {
    return InvalidArgumentError("{} worker: --out {} needs a topic", stage, o.out.ToString());
  }
  if (o.checkpoint_interval_ms < 1 || o.max_batch < 1) {
    return InvalidArgumentError("{} worker: checkpoint interval and batch size must be >= 1",
                                stage);
  }
  return Status::Ok();
}

Result<std::unique_ptr<KafkaProducer>> MakeOutput(const WorkerOptions& o, std::string_view stage) {
  ProducerOptions po = ProducerOptions::FromUri(o.out);
  po.client_id = fmt::format("surge-{}-out", stage);
  return KafkaProducer::Create(std::move(po));
}

Result<std::unique_ptr<KafkaConsumer>> MakeInput(const WorkerOptions& o, std::string_view stage,
                                                 RebalanceHandler on_rebalance) {
  ConsumerOptions co = ConsumerOptions::FromUri(o.in);
  co.client_id = fmt::format("surge-{}", stage);
  co.on_rebalance = std::move(on_rebalance);
  SURGE_ASSIGN_OR_RETURN(auto consumer, KafkaConsumer::Create(std::move(co)));
  SURGE_RETURN_IF_ERROR(consumer->Subscribe({o.in.topic}));
  return consumer;
}

// A stage whose state lives per input partition (detect, rank).
class PartitionedStage {
 public:
  virtual ~PartitionedStage() = default;
  virtual Status Restore(const TopicPartition& tp, const Checkpoint* checkpoint) = 0;
  virtual Result<std::string> Snapshot(const TopicPartition& tp) = 0;
  virtual void Drop(const TopicPartition& tp) = 0;
  // Applies one record of an owned partition; outputs go to the stage's producer.
  virtual Status Apply(const Message& m) = 0;
  virtual Status FlushOutputs(int timeout_ms) = 0;
};

constexpr std::string_view kStateBlob = "state";

// A record that is not of the stage's kind (another build's format, a stray producer): skipped,
// counted, the first one logged; never stops the worker.
void SkipBadRecord(std::string_view stage, const Message& m, const Status& why, int64_t* count) {
  if ((*count)++ == 0) {
    SURGE_LOG_WARN("{}: skipping {}[{}]@{}: {} (later bad records only counted)", stage, m.topic,
                   m.partition, m.offset, why.message());
  }
}

// The stage state in a checkpoint (nullptr without a checkpoint).
Result<const CheckpointBlob*> StateBlob(const Checkpoint* c, std::string_view stage) {
  if (c == nullptr) return static_cast<const CheckpointBlob*>(nullptr);
  const CheckpointBlob* blob = c->FindBlob(kStateBlob);
  if (blob == nullptr) return DataLossError("checkpoint {} has no {} state", c->name, stage);
  return blob;
}

Status RunPartitioned(const WorkerOptions& o, std::string_view stage, uint32_t state_version,
                      PartitionedStage* impl) {
  if (o.checkpoint_dir.empty()) {
    return InvalidArgumentError(
        "{} worker: --checkpoint-dir is required (state is checkpointed "
        "per partition there; every worker of the stage must reach it)",
        stage);
  }
  SURGE_ASSIGN_OR_RETURN(CheckpointStore store, CheckpointStore::Open(o.checkpoint_dir));
  PartitionStateHooks hooks;
  hooks.restore = [impl](const TopicPartition& tp, const Checkpoint* c) {
    return impl->Restore(tp, c);
  };
  hooks.snapshot = [impl](const TopicPartition& tp) -> Result<std::vector<CheckpointBlob>> {
    SURGE_ASSIGN_OR_RETURN(std::string data, impl->Snapshot(tp));
    return std::vector<CheckpointBlob>{{std::string(kStateBlob), std::move(data)}};
  };
  hooks.drop = [impl](const TopicPartition& tp) { impl->Drop(tp); };
  hooks.flush_outputs = [impl, &o] { return impl->FlushOutputs(o.kafka_timeout_ms); };
  PartitionCheckpointer::Options po;
  po.stage = std::string(stage);
  po.worker_id = WorkerId(o);
  po.state_version = state_version;
  PartitionCheckpointer checkpointer(&store, po, std::move(hooks));
  SURGE_ASSIGN_OR_RETURN(auto consumer, MakeInput(o, stage, checkpointer.Handler()));
  checkpointer.Attach(consumer.get());
  SURGE_LOG_INFO("{} worker {}: reading {} (group {}), writing {}", stage, po.worker_id, o.in.topic,
                 o.in.group, o.out.topic);
  auto last = std::chrono::steady_clock::now();
  Status result;
  while (!Stopped(o)) {
    Result<std::vector<Message>> batch = consumer->Poll(o.max_batch, o.poll_timeout_ms);
    if (!batch.ok()) {
      result = batch.status();
      break;
    }
    for (const Message& m : *batch) {
      result = impl->Apply(m);
      if (!result.ok()) break;
      checkpointer.MarkApplied(m);
    }
    if (!result.ok()) break;
    auto now = std::chrono::steady_clock::now();
    if (now - last >= std::chrono::milliseconds(o.checkpoint_interval_ms)) {
      result = checkpointer.CheckpointAll();
      if (!result.ok()) break;
      last = now;
    }
  }
  if (!result.ok()) {
    // Leave without checkpointing: the state may be inconsistent; the next owner restores the
    // last good checkpoint.
    consumer->Abandon();
    return result.WithContext(fmt::format("{} worker", stage));
  }
  // A clean stop: Close() revokes everything, which checkpoints and commits it.
  SURGE_RETURN_IF_ERROR(consumer->Close(o.kafka_timeout_ms));
  SURGE_LOG_INFO("{} worker {}: stopped ({} checkpoints written, {} commit failures)", stage,
                 po.worker_id, checkpointer.counters().checkpoints,
                 checkpointer.counters().commit_failures);
  return Status::Ok();
}

// ---- detect ----

class DetectPartitions final : public PartitionedStage {
 public:
  DetectPartitions(const DetectOptions& options, int32_t shards, KafkaProducer* out,
                   std::string out_topic, int out_partitions)
      : options_(options),
        shards_(shards),
        out_(out),
        out_topic_(std::move(out_topic)),
        out_partitions_(out_partitions) {}

  Status Restore(const TopicPartition& tp, const Checkpoint* c) override {
    SURGE_ASSIGN_OR_RETURN(auto stage, DetectStage::Create(options_, tp.partition, shards_));
    SURGE_ASSIGN_OR_RETURN(const CheckpointBlob* blob, StateBlob(c, "detect"));
    if (blob != nullptr) SURGE_RETURN_IF_ERROR(stage->Restore(blob->data));
    stages_[tp.partition] = std::move(stage);
    return Status::Ok();
  }
  Result<std::string> Snapshot(const TopicPartition& tp) override {
    std::string s;
    stages_.at(tp.partition)->Snapshot(&s);
    return s;
  }
  void Drop(const TopicPartition& tp) override { stages_.erase(tp.partition); }

  Status Apply(const Message& m) override {
    auto it = stages_.find(m.partition);
    if (it == stages_.end()) {
      return InternalError("detect: a record of {}[{}] arrived for an unowned partition", m.topic,
                           m.partition);
    }
    Result<TermBatch> batch = DecodeTermBatch(m.value);
    if (!batch.ok()) {
      SkipBadRecord("detect", m, batch.status(), &bad_records_);
      return Status::Ok();
    }
    DetectStage& stage = *it->second;
    out_batches_.clear();
    SURGE_RETURN_IF_ERROR(stage.Process(*batch, &out_batches_));
    stage.offsets().Advance({m.partition, m.offset});
    for (const CandidateBatch& cb : out_batches_) {
      encoded_.clear();
      EncodeCandidateBatch(cb, &encoded_);
      ProducerRecord r;
      r.topic = out_topic_;
      std::string key = EncodeKey(static_cast<uint64_t>(cb.shard));
      r.key = key;
      r.value = encoded_;
      r.partition = cb.shard % out_partitions_;
      SURGE_RETURN_IF_ERROR(out_->Produce(r));
    }
    return Status::Ok();
  }
  Status FlushOutputs(int timeout_ms) override { return out_->Flush(timeout_ms); }

 private:
  DetectOptions options_;
  int32_t shards_;
  KafkaProducer* out_;
  std::string out_topic_;
  int out_partitions_;
  std::map<int32_t, std::unique_ptr<DetectStage>> stages_;
  std::vector<CandidateBatch> out_batches_;
  std::string encoded_;
  int64_t bad_records_ = 0;
};

// ---- rank ----

class RankPartition final : public PartitionedStage {
 public:
  RankPartition(const RankOptions& options, int32_t shards, KafkaTrendSink* out)
      : options_(options), shards_(shards), out_(out) {}

  Status Restore(const TopicPartition& tp, const Checkpoint* c) override {
    SURGE_ASSIGN_OR_RETURN(stage_, RankStage::Create(options_, shards_));
    SURGE_ASSIGN_OR_RETURN(const CheckpointBlob* blob, StateBlob(c, "rank"));
    if (blob != nullptr) SURGE_RETURN_IF_ERROR(stage_->Restore(blob->data));
    return Status::Ok();
  }
  Result<std::string> Snapshot(const TopicPartition&) override {
    std::string s;
    stage_->Snapshot(&s);
    return s;
  }
  void Drop(const TopicPartition&) override { stage_.reset(); }

  Status Apply(const Message& m) override {
    if (stage_ == nullptr) return InternalError("rank: a record arrived before an assignment");
    Result<CandidateBatch> batch = DecodeCandidateBatch(m.value);
    if (!batch.ok()) {
      SkipBadRecord("rank", m, batch.status(), &bad_records_);
      return Status::Ok();
    }
    lists_.clear();
    SURGE_RETURN_IF_ERROR(stage_->Process(std::move(batch).value(), &lists_));
    stage_->offsets().Advance({m.partition, m.offset});
    for (const HotList& l : lists_) SURGE_RETURN_IF_ERROR(out_->OnHotList(l));
    return Status::Ok();
  }
  Status FlushOutputs(int timeout_ms) override { return out_->Flush(timeout_ms); }

 private:
  RankOptions options_;
  int32_t shards_;
  KafkaTrendSink* out_;
  std::unique_ptr<RankStage> stage_;
  std::vector<HotList> lists_;
  int64_t bad_records_ = 0;
};

constexpr uint32_t kDetectStateVersion = 1;
constexpr uint32_t kRankStateVersion = 1;

}  // namespace

Status RunAnnotateWorker(const WorkerOptions& o, const AnnotateOptions& annotate) {
  SURGE_RETURN_IF_ERROR(CheckEndpoints(o, "annotate", true));
  SURGE_ASSIGN_OR_RETURN(auto resources, AnnotateResources::Create(annotate));
  SURGE_ASSIGN_OR_RETURN(auto annotator, Annotator::Create(resources));
  SURGE_ASSIGN_OR_RETURN(auto dead, DeadLetterSink::Open(o.dead_letter));
  SURGE_ASSIGN_OR_RETURN(auto producer, MakeOutput(o, "annotate"));
  SURGE_ASSIGN_OR_RETURN(const int partitions,
                         producer->PartitionCount(o.out.topic, o.kafka_timeout_ms));
  SURGE_ASSIGN_OR_RETURN(auto consumer, MakeInput(o, "annotate", nullptr));
  const std::string source = o.in.ToString();
  NewWordLearner* learner = resources->learner();
  SURGE_LOG_INFO("annotate worker {}: reading {} (group {}), writing {} ({} partitions)",
                 WorkerId(o), o.in.topic, o.in.group, o.out.topic, partitions);
  RecordBlock block;
  auto annotated = std::make_shared<AnnotatedBlock>();
  std::string encoded;
  uint64_t sequence = 0;
  while (!Stopped(o)) {
    SURGE_ASSIGN_OR_RETURN(std::vector<Message> batch,
                           consumer->Poll(o.max_batch, o.poll_timeout_ms));
    if (batch.empty()) continue;
    block = RecordBlock();
    block.sequence = sequence++;
    std::map<std::pair<std::string, int32_t>, int64_t> next;
    for (const Message& m : batch) {
      RawRecord r;
      r.offset = static_cast<uint32_t>(block.data.size());
      r.size = static_cast<uint32_t>(m.value.size());
      r.position = {m.partition, m.offset};
      block.data += m.value;
      block.raw.push_back(r);
      int64_t& n = next[{m.topic, m.partition}];
      n = std::max(n, m.offset + 1);
    }
    annotated = std::make_shared<AnnotatedBlock>();
    SURGE_RETURN_IF_ERROR(annotator->Annotate(block, source, dead.get(), annotated.get())
                              .WithContext("annotate worker"));
    if (learner != nullptr) {
      for (const AnnotatedPost& p : annotated->posts) {
        if (learner->Offer(annotated->PostText(p))) learner->Refresh();
      }
    }
    for (int32_t p = 0; p < partitions; ++p) {
      TermBatch tb;
      tb.block = annotated;
      tb.partition = p;
      tb.partitions = partitions;
      encoded.clear();
      EncodeTermBatch(tb, &encoded);
      ProducerRecord r;
      r.topic = o.out.topic;
      std::string key = EncodeKey(static_cast<uint64_t>(p));
      r.key = key;
      r.value = encoded;
      r.partition = p;
      SURGE_RETURN_IF_ERROR(producer->Produce(r).WithContext("annotate worker"));
    }
    // The terms are acknowledged before the posts' offsets are committed: a crash in between
    // replays them (detect drops the replayed posts), it never loses them.
    SURGE_RETURN_IF_ERROR(producer->Flush(o.kafka_timeout_ms).WithContext("annotate worker"));
    SURGE_RETURN_IF_ERROR(dead->Flush());
    std::vector<TopicPartitionOffset> commit;
    for (const auto& [tp, offset] : next) commit.push_back({tp.first, tp.second, offset});
    Status committed = consumer->Commit(commit, o.kafka_timeout_ms);
    if (!committed.ok()) {
      SURGE_LOG_WARN(
          "annotate worker: {} (those records may be annotated again; detect drops the "
          "replays)",
          committed.message());
    }
  }
  SURGE_RETURN_IF_ERROR(consumer->Close(o.kafka_timeout_ms));
  return producer->Flush(o.kafka_timeout_ms);
}

Status RunDetectWorker(const WorkerOptions& o, const DetectOptions& detect) {
  SURGE_RETURN_IF_ERROR(CheckEndpoints(o, "detect", true));
  SURGE_RETURN_IF_ERROR(detect.Validate());
  SURGE_ASSIGN_OR_RETURN(auto producer, MakeOutput(o, "detect"));
  SURGE_ASSIGN_OR_RETURN(const int shards,
                         producer->PartitionCount(o.in.topic, o.kafka_timeout_ms));
  SURGE_ASSIGN_OR_RETURN(const int out_partitions,
                         producer->PartitionCount(o.out.topic, o.kafka_timeout_ms));
  DetectPartitions impl(detect, shards, producer.get(), o.out.topic, out_partitions);
  return RunPartitioned(o, "detect", kDetectStateVersion, &impl);
}

Status RunRankWorker(const WorkerOptions& o, const RankOptions& rank, int32_t shards) {
  SURGE_RETURN_IF_ERROR(CheckEndpoints(o, "rank", false));
  SURGE_RETURN_IF_ERROR(rank.Validate());
  if (shards < 1) {
    return InvalidArgumentError("rank worker: --shards must be the detect shard count (>= 1)");
  }
  SURGE_ASSIGN_OR_RETURN(auto sink, KafkaTrendSink::Create(o.out, o.kafka_timeout_ms));
  SURGE_ASSIGN_OR_RETURN(const int in_partitions,
                         sink->writer().producer().PartitionCount(o.in.topic, o.kafka_timeout_ms));
  if (in_partitions != 1) {
    return InvalidArgumentError(
        "rank worker: {} has {} partitions; rank sees every shard's candidates, so it needs "
        "exactly 1",
        o.in.topic, in_partitions);
  }
  RankPartition impl(rank, shards, sink.get());
  return RunPartitioned(o, "rank", kRankStateVersion, &impl);
}

}  // namespace surge::stream::kafka
