// The pieces `surge demo` puts together around the embedded pipeline (pipeline.h): a simulator
// source paced against the wall clock, a trend sink that feeds the dashboard's TrendStore and
// keeps the hot lists for the evaluation at the end, and a terminal view of the hot list.
//
//   simulator ─► PacedSimGenerator ─► Pipeline ─► DemoSink ─► TrendStore ─► TrendServer (page)
//                                                   └──────► TerminalView (top 10, progress)
//
// Thread safety: PacedSimGenerator runs on the pipeline's reader thread; its progress() and the
// DemoSink's accessors may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "stream/eval/eval.h"
#include "stream/eval/truth.h"
#include "stream/sim/generator.h"
#include "stream/sink.h"
#include "stream/source.h"
#include "stream/web/trend_store.h"

namespace surge::stream::demo {

// Where the simulated clock stands (for the progress line).
struct SimProgress {
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  int64_t now_ms = 0;  // simulated time of the newest post handed out
  int64_t posts = 0;
  bool done = false;
};

// Yields the generator's posts in timestamp order, never ahead of the wall clock times `speed`
// (simulated seconds per wall second) since the first call; speed <= 0 runs unpaced. The ground
// truth is final once done.
class PacedSimGenerator final : public PostGenerator {
 public:
  PacedSimGenerator(std::unique_ptr<sim::Generator> generator, double speed);
  Result<size_t> Next(std::vector<Post>* out, size_t max) override;
  SimProgress progress() const;
  eval::Truth truth() const;
  double speed() const { return speed_; }
  // Makes Next() return 0 (end of input) from its next call on (Ctrl-C).
  void Stop() { stop_.store(true); }

 private:
  std::unique_ptr<sim::Generator> gen_;
  double speed_;
  std::vector<sim::SimPost> batch_;
  size_t next_ = 0;
  bool done_ = false;
  bool started_ = false;
  std::chrono::steady_clock::time_point wall0_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;  // guards progress_ and gen_->truth()
  SimProgress progress_;
};

// A TrendSink that publishes every hot list (with its sample posts) and the pipeline's health
// to a TrendStore (optional), and keeps the lists for the evaluation.
class DemoSink final : public TrendSink {
 public:
  // `store` may be null (no dashboard); it must outlive the sink.
  DemoSink(web::TrendStore* store, std::string source_name);
  // Replaces the health's lag for the dashboard (a simulated stream's posts carry simulated
  // times, so wall clock minus post time says nothing there).
  void set_lag(std::function<double(const PipelineHealth&)> lag) { lag_ = std::move(lag); }
  Status OnHotList(const HotList& list) override;
  void OnHealth(const PipelineHealth& health) override;

  // The newest hot list and health (copies).
  HotList latest() const;
  PipelineHealth health() const;
  // Every list so far, in the evaluator's form.
  std::vector<eval::HotList> eval_lists() const;

 private:
  web::TrendStore* store_;
  std::string source_name_;
  std::function<double(const PipelineHealth&)> lag_;
  mutable std::mutex mu_;
  HotList latest_;
  PipelineHealth health_;
  std::vector<eval::HotList> lists_;
};

// Renders the hot list and a progress line. On a terminal it redraws the screen in place; on a
// pipe or file it prints a line per bucket instead (so logs and tests stay readable).
class TerminalView {
 public:
  TerminalView(std::FILE* out, bool interactive, std::string dashboard_url);
  // Draws the current state; `progress` may be null (a source without a simulated clock).
  void Draw(const HotList& list, const PipelineHealth& health, const SimProgress* progress);

 private:
  std::FILE* out_;
  bool interactive_;
  std::string url_;
  int64_t last_bucket_ = -1;
};

// "20:05:00" in the scenario's local time (UTC+offset minutes).
std::string ClockTime(int64_t ms, int offset_minutes);

}  // namespace surge::stream::demo
