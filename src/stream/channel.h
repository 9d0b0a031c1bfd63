// Channel: how stages talk (DESIGN.md §1). A stage writes keyed records through a ChannelWriter
// and reads them through a ChannelReader; the embedded default is an in-process bounded queue
// (MemoryChannel, typed, no serialisation), and between processes a Kafka topic implements the
// same two interfaces with the record codecs of codec.h.
//
// Semantics every implementation keeps:
//  * Partitions. A channel has partitions() >= 1 partitions. Send(key, ...) routes to
//    PartitionOf(key, partitions()) (hash.h); SendTo(p, ...) to partition p. Records of one
//    partition are delivered in the order they were sent by one writer.
//  * Positions. Every delivered Message carries its partition and a per-partition offset that
//    increases by one per record. A consumer's state records the offsets it reflects (Offsets in
//    records.h) and, after checkpointing that state, calls Commit(); a restarted consumer resumes
//    from the committed (or checkpointed) offsets, so a record may be delivered again after a
//    crash but is never lost. Stages make replays harmless (detect's post-id dedup window, rank
//    keys candidates by shard and bucket).
//  * End of stream. When every writer has called Close(), readers drain what is queued and then
//    Receive() returns false. Kafka channels never end (Receive() only times out) unless the
//    implementation is told to stop at the end of its partitions.
//  * Back-pressure. Send() may block while the channel is full.
//
// Thread safety: a writer may be used by one thread at a time (make one per producing thread);
// a reader by one thread. Different writers/readers of one channel may run concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "stream/hash.h"
#include "stream/records.h"

namespace surge::stream {

template <typename T>
struct Message {
  uint64_t key = 0;
  InputPosition position;  // partition + offset in this channel
  T value;
};

template <typename T>
class ChannelWriter {
 public:
  virtual ~ChannelWriter() = default;
  virtual int32_t partitions() const = 0;
  // Sends to partition PartitionOf(key, partitions()).
  virtual Status Send(uint64_t key, T value) = 0;
  // Sends to partition `partition` (0 <= partition < partitions(); InvalidArgument otherwise), with
  // `key` as the record key.
  virtual Status SendTo(int32_t partition, uint64_t key, T value) = 0;
  // Returns once every record sent so far is delivered (in process: queued; Kafka: acknowledged).
  virtual Status Flush() = 0;
  // This writer sends no more records. Idempotent.
  virtual void Close() = 0;
};

template <typename T>
class ChannelReader {
 public:
  virtual ~ChannelReader() = default;
  // Appends up to `max` messages to `out`, waiting up to `timeout` for the first one. Returns true
  // while the channel may deliver more, false at its end (every writer closed, all drained).
  virtual Result<bool> Receive(std::vector<Message<T>>* out, size_t max,
                               std::chrono::milliseconds timeout) = 0;
  // The partitions this reader consumes.
  virtual std::vector<int32_t> partitions() const = 0;
  // Every message before `offsets` (per partition) is processed and its effects are checkpointed:
  // the channel may forget it. In process this only records the offsets.
  virtual Status Commit(const Offsets& offsets) = 0;
  // Resumes at `offsets` (from a checkpoint). In process, only offsets not yet delivered can be
  // sought to (FailedPrecondition otherwise).
  virtual Status Seek(const Offsets& offsets) = 0;
};

}  // namespace surge::stream
