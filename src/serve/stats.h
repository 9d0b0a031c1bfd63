// Per model-version statistics: Triton's statistics extension (cumulative count + ns per phase,
// per batch size) and the data behind the Prometheus metrics (counters, failure reasons, latency
// histograms). Thread-safe. A request's or an execution's counters change together under one
// mutex and Snapshot() reads them under it, so the statistics extension never shows a request
// counted in one phase and not yet in the next (perf_analyzer refuses such a window: "compute
// counts must be the same"); the Prometheus counters and histograms read the atomics directly.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace surge::serve {

struct DurationStat {
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> ns{0};
  void Add(int64_t n) {
    count.fetch_add(1, std::memory_order_relaxed);
    ns.fetch_add(static_cast<uint64_t>(n < 0 ? 0 : n), std::memory_order_relaxed);
  }
};

// Cumulative histogram with fixed bucket bounds in microseconds.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 14> kBoundsUs = {100,    250,    500,     1000,   2500,
                                                       5000,   10000,  25000,   50000,  100000,
                                                       250000, 500000, 1000000, 5000000};
  void Observe(double us) {
    size_t i = 0;
    while (i < kBoundsUs.size() && us > kBoundsUs[i]) ++i;
    buckets_[i].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_us_.fetch_add(static_cast<uint64_t>(us), std::memory_order_relaxed);
  }
  // Per bucket (not cumulative); the last is +Inf.
  uint64_t bucket(size_t i) const { return buckets_[i].load(std::memory_order_relaxed); }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  uint64_t sum_us() const { return sum_us_.load(std::memory_order_relaxed); }

 private:
  std::array<std::atomic<uint64_t>, kBoundsUs.size() + 1> buckets_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_us_{0};
};

enum class FailureReason { kRejected, kCanceled, kBackend, kOther };

struct BatchStat {
  uint64_t count = 0;
  uint64_t compute_input_ns = 0;
  uint64_t compute_infer_ns = 0;
  uint64_t compute_output_ns = 0;
};

struct DurationTotals {
  uint64_t count = 0;
  uint64_t ns = 0;
};

// One consistent reading of a ModelStats.
struct StatsSnapshot {
  DurationTotals success, fail, queue, compute_input, compute_infer, compute_output;
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  uint64_t last_inference_ms = 0;
  std::map<int, BatchStat> batches;
};

struct ModelStats {
  DurationStat success, fail, queue, compute_input, compute_infer, compute_output;
  std::atomic<uint64_t> inference_count{0};
  std::atomic<uint64_t> execution_count{0};
  std::atomic<uint64_t> last_inference_ms{0};
  std::array<std::atomic<uint64_t>, 4> failures{};  // by FailureReason
  LatencyHistogram request_us, queue_us, compute_infer_us;

  void AddFailure(FailureReason r, int64_t ns) {
    std::lock_guard<std::mutex> lk(mu);
    failures[static_cast<size_t>(r)].fetch_add(1, std::memory_order_relaxed);
    fail.Add(ns);
  }
  // A successful request of `inferences` inferences: every phase's count and time at once.
  void AddSuccess(int64_t total_ns, int64_t queue_ns, int64_t in_ns, int64_t infer_ns,
                  int64_t out_ns, uint64_t inferences, uint64_t now_ms) {
    std::lock_guard<std::mutex> lk(mu);
    success.Add(total_ns);
    queue.Add(queue_ns);
    compute_input.Add(in_ns);
    compute_infer.Add(infer_ns);
    compute_output.Add(out_ns);
    inference_count.fetch_add(inferences, std::memory_order_relaxed);
    last_inference_ms.store(now_ms, std::memory_order_relaxed);
  }
  // One model execution of `batch_size` rows.
  void AddExecution(int batch_size, int64_t in_ns, int64_t infer_ns, int64_t out_ns) {
    std::lock_guard<std::mutex> lk(mu);
    execution_count.fetch_add(1, std::memory_order_relaxed);
    BatchStat& b = batches[batch_size];
    ++b.count;
    b.compute_input_ns += static_cast<uint64_t>(in_ns);
    b.compute_infer_ns += static_cast<uint64_t>(infer_ns);
    b.compute_output_ns += static_cast<uint64_t>(out_ns);
  }
  StatsSnapshot Snapshot() const {
    std::lock_guard<std::mutex> lk(mu);
    auto read = [](const DurationStat& d) {
      return DurationTotals{d.count.load(std::memory_order_relaxed),
                            d.ns.load(std::memory_order_relaxed)};
    };
    StatsSnapshot s;
    s.success = read(success);
    s.fail = read(fail);
    s.queue = read(queue);
    s.compute_input = read(compute_input);
    s.compute_infer = read(compute_infer);
    s.compute_output = read(compute_output);
    s.inference_count = inference_count.load(std::memory_order_relaxed);
    s.execution_count = execution_count.load(std::memory_order_relaxed);
    s.last_inference_ms = last_inference_ms.load(std::memory_order_relaxed);
    s.batches = batches;
    return s;
  }

  mutable std::mutex mu;
  std::map<int, BatchStat> batches;  // guarded by mu
};

}  // namespace surge::serve
