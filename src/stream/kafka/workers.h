// The pipeline's stages as separate processes connected by keyed Kafka topics (DESIGN.md §1):
//
//   surge.posts ─► annotate workers ─► surge.terms (partition p = detect shard p)
//     ─► detect workers ─► surge.candidates (1 partition) ─► rank worker ─► surge.trends
//
// * annotate (stateless; any number in one consumer group): a polled batch of post records is
//   annotated as one block (annotate.h) and sent as one TermBatch per terms partition (codec.h,
//   each holding only that shard's part, key = the partition); once the brokers have acknowledged
//   them the input offsets are committed. A crash replays at most the batches after the last
//   commit; detect drops the replayed posts (post-id dedup window).
// * detect (one DetectStage per owned terms partition, shard = partition): TermBatches in,
//   CandidateBatches out (key = shard); state checkpointed per partition with the offsets it
//   reflects (PartitionCheckpointer): outputs are flushed first, then the checkpoint is written,
//   then the offsets committed, every checkpoint_interval_ms and when a partition is revoked. A
//   restarted or rebalanced worker restores the partition's checkpoint and replays from its
//   offset; rank replaces or ignores replayed candidate batches.
// * rank (one; surge.candidates must have one partition): CandidateBatches in, hot lists out as
//   TrendUpdate JSON keyed by topic id (KafkaTrendSink); checkpointed the same way. After a rank
//   crash, hot lists after its last checkpoint are written again (same content).
//
// New-word learning is per annotate process (its learner sees only its own posts), so scaled-out
// runs match the single-process pipeline only with new words off.
//
// Each Run* returns when *stop becomes true (leaving the group cleanly: revoked partitions are
// checkpointed) or on a fatal error (the input cannot be read, a checkpoint cannot be written or
// restored, an output fails); bad records are dead letters and never stop a worker.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "stream/annotate.h"
#include "stream/detect.h"
#include "stream/kafka/uri.h"
#include "stream/rank.h"

namespace surge::stream::kafka {

struct WorkerOptions {
  KafkaUri in;                 // topic and group required
  KafkaUri out;                // topic required (rank: defaults to surge.trends)
  std::string worker_id;       // for logs and checkpoint metadata (default host:pid)
  std::string checkpoint_dir;  // detect and rank: required
  int checkpoint_interval_ms = 5000;
  size_t max_batch = 512;  // records per poll
  int poll_timeout_ms = 200;
  int kafka_timeout_ms = 30000;  // metadata at start, flushes
  std::string dead_letter;       // annotate: JSONL file for bad posts ("" = count and log)
  const std::atomic<bool>* stop = nullptr;
};

Status RunAnnotateWorker(const WorkerOptions& options, const AnnotateOptions& annotate);
Status RunDetectWorker(const WorkerOptions& options, const DetectOptions& detect);
// `shards`: the number of detect shards (partitions of the terms topic).
Status RunRankWorker(const WorkerOptions& options, const RankOptions& rank, int32_t shards);

}  // namespace surge::stream::kafka
