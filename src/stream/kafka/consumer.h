// KafkaConsumer: a librdkafka consumer-group member that never commits on its own
// (enable.auto.commit=false, enable.auto.offset.store=false). A stage commits an offset only after
// the effects of every record before it are checkpointed (see PartitionCheckpointer), so a crash
// replays from the last checkpoint instead of losing or double-applying records.
//
// Rebalances are reported to `on_rebalance` from inside Poll, on the polling thread, between
// batches: on kAssigned the handler may set where each partition starts (its checkpoint's offset
// wins over the group's committed one); on kRevoked it checkpoints and commits the partitions
// before they go to another member; on kLost (this member's session expired and the partitions
// already belong to someone else) it must only drop their state. Records of a revoked partition
// that Poll had collected but not returned are dropped: the new owner re-reads them from the
// committed offset.
//
// Thread safety: one thread per consumer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "stream/kafka/types.h"
#include "stream/kafka/uri.h"

namespace surge::stream::kafka {

using RebalanceHandler = std::function<Status(RebalanceEvent& event)>;

struct ConsumerOptions {
  std::string brokers;    // bootstrap.servers form
  std::string group;      // consumer group id (required: commits belong to a group)
  Properties properties;  // passed to librdkafka (e.g. session.timeout.ms)
  std::string client_id = "surge";
  // Where a partition with neither a checkpoint nor a committed offset starts: earliest | latest.
  std::string auto_offset_reset = "earliest";
  // A non-OK return makes the current Poll return that error (its records are not returned, nor
  // committed); the assignment change still happens, but partitions whose kAssigned handler
  // failed are paused: nothing of them is returned, not even records fetched before the pause,
  // until the group assigns them again and the handler succeeds.
  RebalanceHandler on_rebalance;

  static ConsumerOptions FromUri(const KafkaUri& uri);
};

class KafkaConsumer {
 public:
  // Errors: no group, a property librdkafka rejects, or one that would let librdkafka commit or
  // store offsets by itself (named, with the reason).
  static Result<std::unique_ptr<KafkaConsumer>> Create(ConsumerOptions options);
  // Leaves the group without calling on_rebalance and without committing (as if the stage stopped
  // between checkpoints: the next owner resumes from the last checkpoint).
  ~KafkaConsumer();
  KafkaConsumer(const KafkaConsumer&) = delete;
  KafkaConsumer& operator=(const KafkaConsumer&) = delete;

  // Joins the group for `topics` (partitions come through on_rebalance).
  Status Subscribe(const std::vector<std::string>& topics);
  // Takes exactly these partitions, no group balancing (offsets may be kOffsetCommitted, a real
  // offset, kOffsetBeginning or kOffsetEnd). Commits still go to the group.
  Status Assign(const std::vector<TopicPartitionOffset>& partitions);

  // Up to `max_messages` records: waits up to `timeout_ms` for the first, then takes what is
  // already fetched. Returns early (possibly empty) after a rebalance. Errors: a subscribed topic
  // that does not exist (kNotFound), an error returned by on_rebalance, a fatal client error.
  // Transient broker trouble is logged and retried by librdkafka; Poll then returns fewer records.
  Result<std::vector<Message>> Poll(size_t max_messages, int timeout_ms);

  // Commits these next-offsets for the group and waits up to `timeout_ms` for the coordinator's
  // answer; transient coordinator errors (moving, loading, just back, out of reach) are retried
  // within that time. kFailedPrecondition when the group rebalanced meanwhile (the partition's
  // new owner resumes from its checkpoint, so nothing is lost; the caller may carry on);
  // kDeadlineExceeded when the commit did not land in time (brokers unreachable: it may still
  // land later, and the next one supersedes it).
  Status Commit(const std::vector<TopicPartitionOffset>& offsets, int timeout_ms = 30000);
  // The group's committed next-offsets (kOffsetCommitted where none is committed).
  Result<std::vector<TopicPartitionOffset>> Committed(const std::vector<TopicPartition>& partitions,
                                                      int timeout_ms);
  // Moves an assigned partition's read position.
  Status Seek(const TopicPartitionOffset& position, int timeout_ms);
  Result<std::vector<TopicPartition>> Assignment() const;
  // Partitions of `topic`, from the brokers' metadata. kNotFound when it does not exist;
  // kUnavailable when no broker answers within `timeout_ms`.
  Result<int> PartitionCount(std::string_view topic, int timeout_ms);

  // Leaves the group cleanly: on_rebalance(kRevoked) runs first so the stage can checkpoint.
  // Afterwards only destruction is valid. kDeadlineExceeded when the group did not answer within
  // `timeout_ms` (coordinator unreachable): the client is then dropped as Abandon does.
  Status Close(int timeout_ms = 30000);
  // Drops the client without leaving the group or committing — what a crash (SIGKILL) does; the
  // group notices when the member's session times out. For tests of crash recovery.
  void Abandon();

  const std::string& group() const;
  std::string MemberId() const;

 private:
  struct Impl;
  explicit KafkaConsumer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace surge::stream::kafka
