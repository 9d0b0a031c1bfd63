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
// never delivered one is an Unavailable error then (unreachable brokers, an empty topic).
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
  int idle_ms_ = 0;
  std::atomic<bool> stop_{false};
  bool received_ = false;
  bool assigned_ = false;  // the group has assigned this reader partitions (idle clock running)
  static constexpr int kJoinAllowanceMs = 10000;  // for the group join, on top of idle_ms
  std::chrono::steady_clock::time_point last_record_;
  PostBatch batch_;
  std::vector<SourceError> pending_errors_;
  std::vector<TopicPartitionOffset> next_;  // per partition, one past the last handed out
};

}  // namespace surge::stream::kafka
