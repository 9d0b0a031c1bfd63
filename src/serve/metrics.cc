#include "serve/metrics.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace surge::serve {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string Labels(const ModelMetricsView& m) {
  return fmt::format("model=\"{}\",version=\"{}\"", Escape(m.model), Escape(m.version));
}

void Family(std::string* out, const char* name, const char* type, const char* help) {
  fmt::format_to(std::back_inserter(*out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

template <typename Fn>
void PerModel(std::string* out, const std::vector<ModelMetricsView>& models, const char* name,
              const char* type, const char* help, Fn value) {
  if (models.empty()) return;
  Family(out, name, type, help);
  for (const auto& m : models) {
    fmt::format_to(std::back_inserter(*out), "{}{{{}}} {}\n", name, Labels(m), value(m));
  }
}

void Histogram(std::string* out, const std::vector<ModelMetricsView>& models, const char* name,
               const char* help, const LatencyHistogram ModelStats::*h) {
  if (models.empty()) return;
  Family(out, name, "histogram", help);
  for (const auto& m : models) {
    const LatencyHistogram& hist = m.stats->*h;
    uint64_t cum = 0;
    for (size_t i = 0; i < LatencyHistogram::kBoundsUs.size(); ++i) {
      cum += hist.bucket(i);
      fmt::format_to(std::back_inserter(*out), "{}_bucket{{{},le=\"{}\"}} {}\n", name, Labels(m),
                     LatencyHistogram::kBoundsUs[i], cum);
    }
    cum += hist.bucket(LatencyHistogram::kBoundsUs.size());
    fmt::format_to(std::back_inserter(*out), "{}_bucket{{{},le=\"+Inf\"}} {}\n", name, Labels(m),
                   cum);
    fmt::format_to(std::back_inserter(*out), "{}_sum{{{}}} {}\n", name, Labels(m), hist.sum_us());
    fmt::format_to(std::back_inserter(*out), "{}_count{{{}}} {}\n", name, Labels(m), hist.count());
  }
}

bool OnPath(const char* exe) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (!dir.empty() && access((dir + "/" + exe).c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace

std::vector<GpuSample> ParseNvidiaSmi(const std::string& csv) {
  std::vector<GpuSample> out;
  std::stringstream lines(csv);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> f;
    std::stringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) {
      size_t b = cell.find_first_not_of(' ');
      size_t e = cell.find_last_not_of(" \r");
      f.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
    }
    if (f.size() < 4 || (f[0].rfind("GPU-", 0) != 0 && f[0].rfind("MIG-", 0) != 0)) continue;
    auto num = [](const std::string& s) { return std::strtod(s.c_str(), nullptr); };
    GpuSample g;
    g.uuid = f[0];
    g.utilization = num(f[1]) / 100.0;
    g.memory_used_bytes = num(f[2]) * 1024 * 1024;
    g.memory_total_bytes = num(f[3]) * 1024 * 1024;
    if (f.size() > 4) g.power_watts = num(f[4]);
    if (f.size() > 5) g.power_limit_watts = num(f[5]);
    out.push_back(std::move(g));
  }
  return out;
}

GpuSampler::GpuSampler(int interval_ms) : interval_ms_(interval_ms) {
  available_ = OnPath("nvidia-smi");
  if (available_) thread_ = std::thread([this] { Loop(); });
}

GpuSampler::~GpuSampler() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<GpuSample> GpuSampler::Latest() const {
  std::lock_guard<std::mutex> lk(mu_);
  return latest_;
}

void GpuSampler::Loop() {
  for (;;) {
    std::string csv;
    if (FILE* p = popen("nvidia-smi --query-gpu=uuid,utilization.gpu,memory.used,memory.total,"
                        "power.draw,power.limit --format=csv,noheader,nounits 2>/dev/null",
                        "r")) {
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof(buf), p)) > 0) csv.append(buf, n);
      pclose(p);
    }
    auto samples = ParseNvidiaSmi(csv);
    std::unique_lock<std::mutex> lk(mu_);
    latest_ = std::move(samples);
    if (cv_.wait_for(lk, std::chrono::milliseconds(interval_ms_), [this] { return stop_; })) {
      return;
    }
  }
}

std::string RenderMetrics(const std::vector<ModelMetricsView>& models,
                          const std::vector<GpuSample>& gpus) {
  std::string out;
  out.reserve(4096 + models.size() * 4096);
  auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  PerModel(&out, models, "nv_inference_request_success", "counter",
           "Number of successful inference requests, all batch sizes",
           [](const ModelMetricsView& m) { return m.stats->success.count.load(); });
  if (!models.empty()) {
    Family(&out, "nv_inference_request_failure", "counter",
           "Number of failed inference requests, all batch sizes");
    static const char* kReasons[] = {"REJECTED", "CANCELED", "BACKEND", "OTHER"};
    for (const auto& m : models) {
      for (size_t r = 0; r < 4; ++r) {
        fmt::format_to(std::back_inserter(out),
                       "nv_inference_request_failure{{{},reason=\"{}\"}} {}\n", Labels(m),
                       kReasons[r], load(m.stats->failures[r]));
      }
    }
  }
  PerModel(&out, models, "nv_inference_count", "counter",
           "Number of inferences performed (does not include cached requests)",
           [&](const ModelMetricsView& m) { return load(m.stats->inference_count); });
  PerModel(&out, models, "nv_inference_exec_count", "counter",
           "Number of model executions performed (does not include cached requests)",
           [&](const ModelMetricsView& m) { return load(m.stats->execution_count); });
  PerModel(&out, models, "nv_inference_pending_request_count", "gauge",
           "Instantaneous number of pending requests awaiting execution per-model.",
           [](const ModelMetricsView& m) { return m.pending; });
  PerModel(&out, models, "nv_inference_request_duration_us", "counter",
           "Cumulative inference request duration in microseconds (includes cached requests)",
           [&](const ModelMetricsView& m) {
             return (load(m.stats->success.ns) + load(m.stats->fail.ns)) / 1000;
           });
  PerModel(&out, models, "nv_inference_queue_duration_us", "counter",
           "Cumulative inference queuing duration in microseconds (includes cached requests)",
           [&](const ModelMetricsView& m) { return load(m.stats->queue.ns) / 1000; });
  PerModel(&out, models, "nv_inference_compute_input_duration_us", "counter",
           "Cumulative compute input duration in microseconds (does not include cached requests)",
           [&](const ModelMetricsView& m) { return load(m.stats->compute_input.ns) / 1000; });
  PerModel(&out, models, "nv_inference_compute_infer_duration_us", "counter",
           "Cumulative compute inference duration in microseconds (does not include cached "
           "requests)",
           [&](const ModelMetricsView& m) { return load(m.stats->compute_infer.ns) / 1000; });
  PerModel(&out, models, "nv_inference_compute_output_duration_us", "counter",
           "Cumulative inference compute output duration in microseconds (does not include "
           "cached requests)",
           [&](const ModelMetricsView& m) { return load(m.stats->compute_output.ns) / 1000; });
  Histogram(&out, models, "nv_inference_request_duration_histogram_us",
            "Inference request duration in microseconds (successful requests)",
            &ModelStats::request_us);
  Histogram(&out, models, "nv_inference_queue_duration_histogram_us",
            "Inference queuing duration in microseconds", &ModelStats::queue_us);
  Histogram(&out, models, "nv_inference_compute_infer_duration_histogram_us",
            "Compute inference duration in microseconds", &ModelStats::compute_infer_us);
  if (!gpus.empty()) {
    auto gpu_family = [&](const char* name, const char* type, const char* help, auto value) {
      Family(&out, name, type, help);
      for (const auto& g : gpus) {
        fmt::format_to(std::back_inserter(out), "{}{{gpu_uuid=\"{}\"}} {}\n", name, Escape(g.uuid),
                       value(g));
      }
    };
    gpu_family("nv_gpu_utilization", "gauge", "GPU utilization rate [0.0 - 1.0)",
               [](const GpuSample& g) { return g.utilization; });
    gpu_family("nv_gpu_memory_total_bytes", "gauge", "GPU total memory, in bytes",
               [](const GpuSample& g) { return g.memory_total_bytes; });
    gpu_family("nv_gpu_memory_used_bytes", "gauge", "GPU used memory, in bytes",
               [](const GpuSample& g) { return g.memory_used_bytes; });
    gpu_family("nv_gpu_power_usage", "gauge", "GPU power usage in watts",
               [](const GpuSample& g) { return g.power_watts; });
    gpu_family("nv_gpu_power_limit", "gauge", "GPU power management limit in watts",
               [](const GpuSample& g) { return g.power_limit_watts; });
  }
  return out;
}

}  // namespace surge::serve
