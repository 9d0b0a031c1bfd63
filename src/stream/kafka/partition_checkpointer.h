// PartitionCheckpointer: the commit protocol of a stateful stage reading Kafka, one checkpoint per
// input partition, so partition state can move between workers of a consumer group.
//
//   running:  poll → apply → MarkApplied(record) ... → CheckpointAll():
//               flush outputs (their acks) → per owned partition with progress: snapshot →
//               write checkpoint (state + the next offset it reflects) → commit those offsets
//   assigned: load the partition's newest good checkpoint → restore its state → start reading at
//             the checkpoint's offset. The checkpoint wins over the group's committed offset,
//             whether that is older (a crash between checkpoint and commit: starting there would
//             apply records twice) or newer (a commit that ran ahead of a lost checkpoint:
//             starting there would lose records). No checkpoint: empty state from the committed
//             offset, or from the partition's beginning when none is committed (the state must
//             reflect all of it); that start is checkpointed at the next CheckpointAll, so every
//             owned partition has a checkpoint from then on.
//   revoked:  checkpoint the revoked partitions, then drop their state (the next owner
//             restores it from the checkpoint).
//   lost:     drop the state only; the partitions already belong to someone else.
//
// A crash at any point leaves: state = the last checkpoint, input = read again from its offset,
// so no record is lost and none is applied twice. Outputs of records after the checkpoint are sent
// again on replay; downstream dedups them (post-id dedup window, candidate keys).
//
// Checkpoints are named "<stage>.<topic>.<partition>" in one CheckpointStore directory that every
// worker of the stage can reach (one host, or a shared file system). Commit failures (e.g. the
// group is rebalancing) are logged and counted, not fatal: the checkpoint already holds the
// offsets and wins on restore. A failed snapshot or checkpoint write is returned (the stage must
// stop rather than run on without a durable state).
//
// Thread safety: one thread — the stage's polling thread (rebalance callbacks run inside Poll).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "stream/checkpoint.h"
#include "stream/kafka/consumer.h"
#include "stream/kafka/types.h"

namespace surge::stream::kafka {

struct PartitionStateHooks {
  // The partition is now ours: restore its state from `checkpoint` (nullptr: none, start empty).
  std::function<Status(const TopicPartition& tp, const Checkpoint* checkpoint)> restore;
  // The partition's state as of every record marked applied, as blobs.
  std::function<Result<std::vector<CheckpointBlob>>(const TopicPartition& tp)> snapshot;
  // The partition is no longer ours: forget its state.
  std::function<void(const TopicPartition& tp)> drop;
  // Make every output sent so far durable (e.g. KafkaProducer::Flush) before any checkpoint; may
  // be empty for a stage without outputs.
  std::function<Status()> flush_outputs;
};

class PartitionCheckpointer {
 public:
  struct Options {
    std::string stage;      // checkpoint name prefix and metadata
    std::string worker_id;  // metadata: who wrote a checkpoint
    uint32_t state_version = 0;
    // Bound on reading committed offsets for partitions assigned without a checkpoint, and on
    // waiting for a commit's answer.
    int committed_timeout_ms = 30000;
  };
  struct Counters {
    int64_t checkpoints = 0;  // files written
    int64_t restored = 0;     // partitions restored from a checkpoint
    int64_t commit_failures = 0;
  };

  PartitionCheckpointer(CheckpointStore* store, Options options, PartitionStateHooks hooks);

  // Goes into ConsumerOptions::on_rebalance; the checkpointer commits through `consumer`, set
  // with Attach once the consumer exists.
  RebalanceHandler Handler();
  void Attach(KafkaConsumer* consumer) { consumer_ = consumer; }

  // The record's effects are applied to its partition's state.
  void MarkApplied(const std::string& topic, int32_t partition, int64_t offset);
  void MarkApplied(const Message& m) { MarkApplied(m.topic, m.partition, m.offset); }
  // Sets a partition's position (next offset) directly, e.g. from a batch's next_offsets.
  void MarkPosition(const TopicPartitionOffset& next);

  // Checkpoints every owned partition with progress (or never checkpointed) since its last
  // checkpoint, then commits those offsets (a partition still at its beginning is not committed).
  Status CheckpointAll();

  // "<stage>.<topic>.<partition>".
  std::string CheckpointName(const TopicPartition& tp) const;
  // Next offset per owned partition (what a checkpoint now would record).
  const std::map<TopicPartition, int64_t>& positions() const { return positions_; }
  const Counters& counters() const { return counters_; }
  const Status& last_commit_error() const { return last_commit_error_; }

 private:
  Status OnRebalance(RebalanceEvent& event);
  Status CheckpointPartitions(const std::vector<TopicPartition>& partitions);

  CheckpointStore* store_;
  Options options_;
  PartitionStateHooks hooks_;
  KafkaConsumer* consumer_ = nullptr;
  std::map<TopicPartition, int64_t> positions_;     // owned partitions
  std::map<TopicPartition, int64_t> checkpointed_;  // last checkpointed position
  Counters counters_;
  Status last_commit_error_;
};

}  // namespace surge::stream::kafka
