// The embedded pipeline: every stage in one process, connected by in-process channels
// (memory_channel.h), the default of `surge trends`.
//
//   reader (calling thread) ─blocks─► annotate workers ─in order─► terms channel (P partitions)
//     ─► P detect shards (a thread each) ─► candidates channel ─► rank (a thread) ─► sinks
//
// The reader cuts the source into blocks of block_records records; `threads` annotate workers
// annotate blocks in parallel (with threads == 1 the reader annotates them itself, and the run is
// deterministic); blocks leave annotate in their input order, feed the new-word learner and are
// routed to the detect partitions. Dead letters go to the DeadLetterSink and never stop the run.
// A fatal error (the source cannot be read, the model fails on a batch, a sink cannot write) stops
// the reader; what was read is still flushed through the stages, and Run() returns the error.
//
// Thread safety: Run() once per Pipeline; health() may be called from any thread meanwhile.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "stream/annotate.h"
#include "stream/dead_letter.h"
#include "stream/detect.h"
#include "stream/rank.h"
#include "stream/sink.h"
#include "stream/source.h"

namespace surge::stream {

struct PipelineOptions {
  AnnotateOptions annotate;
  DetectOptions detect;
  RankOptions rank;
  int threads = 0;  // annotate workers; 0: the hardware's cores
  int detect_shards = 1;
  size_t block_records = 2048;
  size_t queue_blocks = 8;  // blocks waiting for annotate, per worker
};

class Pipeline {
 public:
  // `resources` may be null (created from options.annotate).
  static Result<std::unique_ptr<Pipeline>> Create(
      const PipelineOptions& options, std::shared_ptr<AnnotateResources> resources = nullptr);
  ~Pipeline();

  Status Run(PostSource* source, const std::vector<TrendSink*>& sinks, DeadLetterSink* dead);
  PipelineHealth health() const;
  const PipelineOptions& options() const { return o_; }
  const AnnotateResources& resources() const { return *res_; }

 private:
  struct State;
  Pipeline() = default;
  PipelineOptions o_;
  std::shared_ptr<AnnotateResources> res_;
  std::unique_ptr<State> s_;
};

}  // namespace surge::stream
