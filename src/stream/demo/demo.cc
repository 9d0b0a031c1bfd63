#include "stream/demo/demo.h"

#include <algorithm>
#include <thread>

#include "text/utf8.h"

namespace surge::stream::demo {
namespace {

// A model's name for display: the folder's last component ("demo" for .../models/demo).
std::string ModelLabel(const std::string& dir) {
  std::string_view d = dir;
  while (d.size() > 1 && d.back() == '/') d.remove_suffix(1);
  size_t slash = d.rfind('/');
  return std::string(slash == std::string_view::npos ? d : d.substr(slash + 1));
}

}  // namespace

PacedSimGenerator::PacedSimGenerator(std::unique_ptr<sim::Generator> generator, double speed)
    : gen_(std::move(generator)), speed_(speed) {
  const sim::Scenario& s = gen_->scenario();
  progress_.start_ms = s.start_ms;
  progress_.end_ms = s.start_ms + s.duration_ms;
  progress_.now_ms = s.start_ms;
}

Result<size_t> PacedSimGenerator::Next(std::vector<Post>* out, size_t max) {
  if (!started_) {
    started_ = true;
    wall0_ = std::chrono::steady_clock::now();
  }
  size_t n = 0;
  while (n < max && !stop_.load()) {
    if (next_ == batch_.size()) {
      if (done_) break;
      batch_.clear();
      next_ = 0;
      bool more;
      {
        std::lock_guard<std::mutex> lock(mu_);
        more = gen_->NextBatch(&batch_);
      }
      done_ = !more;
      continue;
    }
    const Post& p = batch_[next_].post;
    if (speed_ > 0) {
      // Hand out nothing the wall clock has not reached yet; return what we have first so the
      // pipeline is never held up by posts that are already due.
      auto due = wall0_ + std::chrono::microseconds(static_cast<int64_t>(
                              1000.0 * static_cast<double>(p.ts_ms - progress_.start_ms) / speed_));
      if (due > std::chrono::steady_clock::now()) {
        if (n > 0) break;
        std::this_thread::sleep_until(
            std::min(due, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
        continue;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      progress_.now_ms = std::max(progress_.now_ms, p.ts_ms);
      ++progress_.posts;
    }
    out->push_back(std::move(batch_[next_++].post));
    ++n;
  }
  if (n == 0) {
    std::lock_guard<std::mutex> lock(mu_);
    progress_.done = true;
  }
  return n;
}

SimProgress PacedSimGenerator::progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  return progress_;
}

eval::Truth PacedSimGenerator::truth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gen_->truth();
}

DemoSink::DemoSink(web::TrendStore* store, std::string source_name)
    : store_(store), source_name_(std::move(source_name)) {}

Status DemoSink::OnHotList(const HotList& list) {
  if (store_ != nullptr) {
    for (size_t i = 0; i < list.updates.size() && i < list.samples.size(); ++i) {
      std::vector<web::SamplePost> posts;
      for (const Sample& s : list.samples[i]) posts.push_back({s.post_id, s.text, s.user, s.ts_ms});
      if (!posts.empty())
        SURGE_RETURN_IF_ERROR(store_->AddSamplePosts(list.updates[i].topic_id, std::move(posts)));
    }
    SURGE_RETURN_IF_ERROR(store_->Publish(list.bucket_end_ms, list.updates));
  }
  std::lock_guard<std::mutex> lock(mu_);
  latest_ = list;
  lists_.push_back({list.bucket_end_ms, list.updates});
  return Status::Ok();
}

void DemoSink::OnHealth(const PipelineHealth& h) {
  if (store_ != nullptr) {
    web::PipelineHealth w;
    w.posts_per_s = h.posts_per_second;
    w.lag_ms = lag_ ? lag_(h) : h.lag_ms;
    w.inference_p99_ms = h.inference_p99_ms;
    w.dead_letters = h.dead_letters;
    for (const auto& [k, n] : h.dead_letters_by_kind) w.dead_letter_kinds[k] = n;
    w.buckets = h.buckets;
    w.posts_total = h.posts;
    w.model = h.model ? ModelLabel(h.model_name) : "lexical only";
    w.backend = h.backend;
    w.source = source_name_;
    // Health reporting must never stop the stream; a refused update only leaves the old one.
    (void)store_->UpdateHealth(std::move(w));
  }
  std::lock_guard<std::mutex> lock(mu_);
  health_ = h;
}

HotList DemoSink::latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

PipelineHealth DemoSink::health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return health_;
}

std::vector<eval::HotList> DemoSink::eval_lists() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lists_;
}

namespace {

// Columns a string takes on a terminal: East Asian wide and full-width characters take two.
int DisplayWidth(std::string_view s) {
  int w = 0;
  for (size_t i = 0; i < s.size();) {
    text::DecodedChar d = text::DecodeUtf8At(s, i);
    i += d.length;
    char32_t c = d.cp;
    bool wide = (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF) ||
                (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
                (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
                (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1FAFF) ||
                (c >= 0x20000 && c <= 0x3FFFD);
    w += wide ? 2 : 1;
  }
  return w;
}

std::string PadRight(std::string_view s, int width) {
  std::string out(s);
  for (int w = DisplayWidth(s); w < width; ++w) out.push_back(' ');
  return out;
}

std::string Move(const TrendUpdate& t) {
  if (!t.prev_rank) return "new";
  int d = *t.prev_rank - t.rank;
  if (d > 0) return fmt::format("↑{}", d);
  if (d < 0) return fmt::format("↓{}", -d);
  return "–";
}

}  // namespace

std::string ClockTime(int64_t ms, int offset_minutes) {
  int64_t s = (ms / 1000 + static_cast<int64_t>(offset_minutes) * 60) % 86400;
  if (s < 0) s += 86400;
  return fmt::format("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

TerminalView::TerminalView(std::FILE* out, bool interactive, std::string dashboard_url)
    : out_(out), interactive_(interactive), url_(std::move(dashboard_url)) {}

void TerminalView::Draw(const HotList& list, const PipelineHealth& h, const SimProgress* p) {
  const int offset = 480;  // the simulator's default local time (UTC+8); display only
  std::string progress;
  if (p != nullptr) {
    double total = static_cast<double>(std::max<int64_t>(1, p->end_ms - p->start_ms));
    double done = 100.0 * static_cast<double>(p->now_ms - p->start_ms) / total;
    double lag_s = list.bucket_end_ms > 0
                       ? std::max(0.0, static_cast<double>(p->now_ms - list.bucket_end_ms) / 1000)
                       : 0.0;
    progress = fmt::format("sim {} ({:.0f} %)  posts {}  {:.0f} posts/s  lag {:.0f} s sim",
                           ClockTime(p->now_ms, offset), std::min(100.0, done), h.posts,
                           h.posts_per_second, lag_s);
  } else {
    progress = fmt::format("posts {}  {:.0f} posts/s", h.posts, h.posts_per_second);
  }
  progress += fmt::format(
      "  buckets {}  hot-list p99 {:.0f} ms  {}", h.buckets, h.latency_p99_ms,
      h.model
          ? "model " + ModelLabel(h.model_name) +
                (h.inference_p99_ms > 0 ? fmt::format(" (p99 {:.0f} ms)", h.inference_p99_ms) : "")
          : "lexical only");
  if (h.dead_letters) progress += fmt::format("  dead letters {}", h.dead_letters);
  if (interactive_) {
    std::string s = "\x1b[H\x1b[J";
    s += fmt::format("Surge demo — hot topics{}\n",
                     url_.empty() ? "" : "  (live dashboard: " + url_ + ")");
    s += fmt::format("bucket ending {}\n\n",
                     list.bucket_end_ms ? ClockTime(list.bucket_end_ms, offset) : "—");
    s += fmt::format(" {:>2}  {:<4}  {}  {:>9}  {}  {}  {:>6}\n", "#", "move",
                     PadRight("hashtag", 28), "heat", PadRight("category", 8), "pos/neu/neg",
                     "posts");
    for (const TrendUpdate& t : list.updates) {
      if (t.rank > 10) break;
      s += fmt::format(" {:>2}  {}  {}  {:>9.1f}  {}  {:>3.0f}/{:>3.0f}/{:>3.0f}  {:>6}\n", t.rank,
                       PadRight(Move(t), 4), PadRight(t.hashtag, 28), t.heat,
                       PadRight(t.category, 8), 100 * t.sentiment.pos, 100 * t.sentiment.neu,
                       100 * t.sentiment.neg, t.posts);
    }
    for (size_t i = list.updates.size(); i < 10; ++i) s += "\n";
    s += "\n" + progress + "\n";
    std::fputs(s.c_str(), out_);
  } else if (list.bucket_end_ms != last_bucket_) {
    last_bucket_ = list.bucket_end_ms;
    std::string top;
    for (const TrendUpdate& t : list.updates) {
      if (t.rank > 5) break;
      top += fmt::format(" {}.{}", t.rank, t.hashtag);
    }
    std::fputs(fmt::format("[{}] top:{}\n  {}\n", ClockTime(list.bucket_end_ms, offset),
                           top.empty() ? " (none yet)" : top, progress)
                   .c_str(),
               out_);
  }
  std::fflush(out_);
}

}  // namespace surge::stream::demo
