// Prometheus metrics with Triton's names, rendered in the Prometheus text exposition format
// (version 0.0.4). The format is a few lines of text per sample, so it is written here directly:
// prometheus-cpp, which CONVENTIONS.md prefers, is not packaged in Debian 12.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/stats.h"

namespace surge::serve {

struct ModelMetricsView {
  std::string model;
  std::string version;
  const ModelStats* stats = nullptr;
  size_t pending = 0;
};

struct GpuSample {
  std::string uuid;
  double utilization = 0;  // 0..1
  double memory_used_bytes = 0;
  double memory_total_bytes = 0;
  double power_watts = 0;
  double power_limit_watts = 0;
};

// Samples GPUs through `nvidia-smi` (when it is on PATH) every interval on its own thread, so that
// the metrics endpoint never waits for it and no NVML link dependency is needed.
class GpuSampler {
 public:
  explicit GpuSampler(int interval_ms = 2000);
  ~GpuSampler();
  std::vector<GpuSample> Latest() const;
  bool available() const { return available_; }

 private:
  void Loop();
  int interval_ms_;
  bool available_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<GpuSample> latest_;
  bool stop_ = false;
  std::thread thread_;
};

// Parses nvidia-smi's "uuid, util %, mem MiB, mem MiB, W, W" CSV lines (exposed for tests).
std::vector<GpuSample> ParseNvidiaSmi(const std::string& csv);

// The whole /metrics page.
std::string RenderMetrics(const std::vector<ModelMetricsView>& models,
                          const std::vector<GpuSample>& gpus);

}  // namespace surge::serve
