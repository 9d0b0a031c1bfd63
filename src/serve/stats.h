// Per model-version statistics: Triton's statistics extension (cumulative count + ns per phase,
// per batch size) and the data behind the Prometheus metrics (counters, failure reasons, latency
// histograms). Updated lock-free on the hot path except the per-batch-size map. Thread-safe.
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

struct ModelStats {
  DurationStat success, fail, queue, compute_input, compute_infer, compute_output;
  std::atomic<uint64_t> inference_count{0};
  std::atomic<uint64_t> execution_count{0};
  std::atomic<uint64_t> last_inference_ms{0};
  std::array<std::atomic<uint64_t>, 4> failures{};  // by FailureReason
  LatencyHistogram request_us, queue_us, compute_infer_us;

  void AddFailure(FailureReason r, int64_t ns) {
    failures[static_cast<size_t>(r)].fetch_add(1, std::memory_order_relaxed);
    fail.Add(ns);
  }
  void AddBatch(int batch_size, int64_t in_ns, int64_t infer_ns, int64_t out_ns) {
    std::lock_guard<std::mutex> lk(batch_mu);
    BatchStat& b = batches[batch_size];
    ++b.count;
    b.compute_input_ns += static_cast<uint64_t>(in_ns);
    b.compute_infer_ns += static_cast<uint64_t>(infer_ns);
    b.compute_output_ns += static_cast<uint64_t>(out_ns);
  }
  std::map<int, BatchStat> BatchSnapshot() const {
    std::lock_guard<std::mutex> lk(batch_mu);
    return batches;
  }

  mutable std::mutex batch_mu;
  std::map<int, BatchStat> batches;
};

}  // namespace surge::serve
