// The per-model scheduler: a dynamic batcher in front of a pool of model instances.
//
// Semantics follow Triton's dynamic batcher (model_config.proto ModelDynamicBatching /
// ModelQueuePolicy) with Surge's additions:
//   * Requests queue per priority level (1 is the highest; 0 maps to the default level). A free
//     instance takes the oldest request of the highest non-empty level as the anchor and adds
//     compatible requests in arrival order up to max_batch_size. With preferred sizes, the largest
//     reachable preferred size is sent at once; otherwise the batch is sent when full or when the
//     anchor has waited max_queue_delay.
//   * Length-aware batching: inputs listed in `ragged_inputs` may differ in dim 1 (sequence
//     length). A batch pads them with zeros only up to its longest member, and a candidate joins
//     only while padding stays below `max_padding_fraction` of the batch's tokens; the others wait
//     for a batch of their own length. Outputs in `ragged_outputs` are cut back to each request's
//     own length.
//   * max_queue_size holds: Enqueue fails at once with Unavailable when the level's queue is full.
//   * Timeouts: a request's deadline is its policy's default timeout, or the request's own when
//     allowed (only ever lower). On expiry REJECT answers DeadlineExceeded; DELAY moves the request
//     behind every request that has not timed out.
//   * Cancellation: a queued request whose CancelFlag is set is dropped (callback: Cancelled) on
//     the scheduler's next pass; Poke() forces one.
//   * Shutdown drains: queued requests still run and are answered, then the threads exit.
// Thread-safe. The executor is called on the instance's own worker thread, one batch at a time.
// A batch's callbacks run on the batcher's answer thread, in completion order, so that an instance
// starts its next batch while the previous one's answers are being sent; callbacks for requests
// that time out or are cancelled in the queue run on the thread that removes them.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "engine/runtime/engine.h"
#include "serve/infer.h"

namespace surge::serve {

struct QueuePolicy {
  bool delay_on_timeout = false;  // ModelQueuePolicy.timeout_action == DELAY
  uint64_t default_timeout_us = 0;
  bool allow_timeout_override = false;
  uint32_t max_queue_size = 0;  // 0: unbounded
};

struct BatcherOptions {
  // 0: requests carry no batch dimension and run one at a time.
  int max_batch_size = 0;
  std::vector<int> preferred_batch_sizes;
  uint64_t max_queue_delay_us = 0;
  uint32_t priority_levels = 0;  // 0: one level
  uint32_t default_priority_level = 0;
  QueuePolicy default_policy;
  std::map<uint32_t, QueuePolicy> priority_policy;
  int instance_count = 1;
  std::set<std::string, std::less<>> ragged_inputs;
  std::set<std::string, std::less<>> ragged_outputs;
  double max_padding_fraction = 0.25;
};

struct WorkTiming {
  int64_t queue_ns = 0;
  int64_t compute_input_ns = 0;
  int64_t compute_infer_ns = 0;
  int64_t compute_output_ns = 0;
  int batch_size = 0;  // of the execution this request was part of
};

using WorkCallback = std::function<void(Result<engine::TensorMap>, const WorkTiming&)>;

struct Work {
  engine::TensorMap inputs;
  int64_t priority = 0;
  uint64_t timeout_us = 0;
  CancelFlag cancelled;
  WorkCallback done;
};

// Runs one batch on instance `instance`. Outputs may view memory owned by the instance until the
// next call; the scheduler copies what it returns.
using Executor =
    std::function<Result<engine::TensorMap>(int instance, const engine::TensorMap& inputs)>;

struct ExecutionStats {
  int batch_size = 0;
  int64_t compute_input_ns = 0;
  int64_t compute_infer_ns = 0;
  int64_t compute_output_ns = 0;
  bool ok = true;
};

class DynamicBatcher {
 public:
  // `on_execution` (may be empty) is called after every model execution.
  DynamicBatcher(BatcherOptions options, Executor executor,
                 std::function<void(const ExecutionStats&)> on_execution = {});
  ~DynamicBatcher();
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Queues `work`; on error `work.done` is NOT called and the error says why: Unavailable when
  // the queue is full, FailedPrecondition after Shutdown, InvalidArgument for a batch too large
  // or a priority out of range.
  Status Enqueue(Work work);
  // Wakes the workers so cancelled requests leave the queue now.
  void Poke();
  // Stops accepting work, runs what is queued, joins the workers. Idempotent.
  void Shutdown();

  size_t pending() const;   // queued, not executing
  size_t inflight() const;  // executing now
  const BatcherOptions& options() const { return options_; }

 private:
  struct Item;
  using ItemPtr = std::unique_ptr<Item>;
  struct Answer;

  void WorkerLoop(int instance);
  // Answers timed-out and cancelled requests while every instance is busy (Triton #7512: its
  // queue timeouts fire only after the running execution ends).
  void ReaperLoop();
  // Under mu_: drops cancelled and expired requests (returns them for answering outside the
  // lock) and returns the earliest pending deadline.
  Clock::time_point PurgeLocked(Clock::time_point now, std::vector<ItemPtr>* rejected,
                                std::vector<ItemPtr>* cancelled);
  // Under mu_: picks the next batch; returns false (and when to look again) if it should wait.
  bool FormBatchLocked(Clock::time_point now, std::vector<ItemPtr>* batch, Clock::time_point* wake);
  void RunBatch(int instance, std::vector<ItemPtr>& batch);
  // Hands finished requests to the answer thread.
  void Deliver(std::vector<Answer> answers);
  void AnswerLoop();
  const QueuePolicy& PolicyFor(uint32_t level) const;
  size_t LevelIndex(int64_t priority) const;

  BatcherOptions options_;
  Executor executor_;
  std::function<void(const ExecutionStats&)> on_execution_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  // levels_[0..L-1] for priorities 1..L; levels_[L] holds timed-out DELAY requests.
  std::vector<std::deque<ItemPtr>> levels_;
  std::vector<size_t> level_counts_;
  size_t pending_ = 0;
  size_t inflight_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
  std::condition_variable reaper_cv_;
  bool reaper_stop_ = false;
  std::thread reaper_;
  std::mutex answer_mu_;
  std::condition_variable answer_cv_;
  std::vector<Answer> answers_;
  bool answer_stop_ = false;
  std::thread answerer_;
};

// Batch assembly helpers (exposed for tests).
// Concatenates per-request inputs along dim 0, padding `ragged` inputs' dim 1 with zeros to the
// longest. All tensors of one name must share dtype, rank and every other dim.
Result<engine::TensorMap> ConcatInputs(const std::vector<const engine::TensorMap*>& parts,
                                       const std::set<std::string, std::less<>>& ragged);
// Slices rows [row, row + rows) of `t` into an owned tensor; when `seq` > 0 and t's dim 1 is
// larger, dim 1 is cut to `seq` as well.
Tensor SliceRows(const Tensor& t, int64_t row, int64_t rows, int64_t seq);

}  // namespace surge::serve
