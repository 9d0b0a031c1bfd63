// A Kafka topic as the embedded pipeline's PostSource (`surge trends` / `surge demo` with
// --source kafka://HOST:PORT/TOPIC?group=G): posts come from a consumer group through
// KafkaPostSource; records that do not parse reach the pipeline's dead-letter sink with their
// topic, partition and offset.
//
// The embedded pipeline keeps no checkpoints, so offsets are committed only when the run has
// flushed everything it read (CommitAll, called after Pipeline::Run returns): a crash re-reads
// from the last committed offsets and recounts those posts. The scaled-out workers (`surge
// worker`, docs/kafka.md) checkpoint state with its offsets instead and lose or double nothing.
//
// The stream ends after `idle_ms` without a record (0: never; then Stop() ends it); a stream that
// never delivered one is an Unavailable error then (unreachable brokers, an empty topic). The idle
// clock starts when the group assigns this reader partitions. The join before that has idle_ms +
// 10 s; then the brokers are asked for the topic's metadata: without an answer (or without the
// topic) the source fails, with one the group is only rebalancing and has up to idle_ms + 60 s.
//
// Thread safety: Read/CommitAll on one thread; Stop from any.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "stream/kafka/post_source.h"
#include "stream/source.h"

namespace surge::stream::kafka {

class KafkaPipelineSource final : public PostSource {
 public:
  // `uri` as KafkaUri::Parse takes it; a missing group defaults to "surge-trends".
  static Result<std::unique_ptr<KafkaPipelineSource>> Open(const std::string& uri, int idle_ms);
  Result<bool> Read(RecordBlock* block, size_t max_records) override;
  const std::string& name() const override { return name_; }
  // Commits the offsets of every record handed out so far.
  Status CommitAll();
  void Stop() { stop_.store(true); }

 private:
  KafkaPipelineSource() = default;
  std::unique_ptr<KafkaPostSource> source_;
  std::string name_;
  std::string topic_;
  int idle_ms_ = 0;
  std::atomic<bool> stop_{false};
  bool received_ = false;
  bool assigned_ = false;  // the group has assigned this reader partitions (idle clock running)
  bool cluster_answered_ = false;  // the brokers answered for the topic during a slow join
  // On top of idle_ms, before the first assignment: for the group join; then, where the brokers
  // answer a metadata request for the topic, for the group's rebalance to settle.
  static constexpr int kJoinAllowanceMs = 10000;
  static constexpr int kRebalanceAllowanceMs = 60000;
  static constexpr int kMetadataTimeoutMs = 5000;
  std::chrono::steady_clock::time_point last_record_;
  PostBatch batch_;
  std::vector<SourceError> pending_errors_;
  std::vector<TopicPartitionOffset> next_;  // per partition, one past the last handed out
};

}  // namespace surge::stream::kafka
