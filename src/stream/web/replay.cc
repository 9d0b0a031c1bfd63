#include "stream/web/replay.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include "core/logging.h"
#include "stream/post.h"

namespace surge::stream::web {
namespace {

constexpr size_t kKeptErrors = 10;

void Note(TrendFile* f, int64_t line, const std::string& reason) {
  ++f->bad_lines;
  if (f->errors.size() < kKeptErrors) f->errors.push_back(fmt::format("line {}: {}", line, reason));
}

bool Blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}

// Sleeps up to `ms`, returning early (false) when `stop` is set.
bool Wait(double ms, const std::atomic<bool>* stop) {
  auto until =
      std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
  while (std::chrono::steady_clock::now() < until) {
    if (stop && stop->load()) return false;
    auto left = until - std::chrono::steady_clock::now();
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(50)));
  }
  return !(stop && stop->load());
}

}  // namespace

Result<TrendFile> ReadTrendFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("trends file '{}': cannot open", path);
  TrendFile f;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (Blank(line)) continue;
    ++f.lines;
    auto t = ParseTrend(line);
    if (!t.ok()) {
      Note(&f, n, t.status().message());
      continue;
    }
    if (!f.buckets.empty() && t->updated_ms < f.buckets.back().bucket_ms) {
      Note(&f, n,
           fmt::format("updated {} is before the bucket being read ({}); a trends file lists "
                       "buckets in time order",
                       t->updated_ms, f.buckets.back().bucket_ms));
      continue;
    }
    if (f.buckets.empty() || t->updated_ms > f.buckets.back().bucket_ms) {
      f.buckets.push_back({t->updated_ms, {}});
    }
    f.buckets.back().trends.push_back(std::move(*t));
  }
  if (f.buckets.empty()) {
    return InvalidArgumentError(
        "trends file '{}': no usable trend update in {} lines{}{}", path, f.lines,
        f.errors.empty() ? "" : "; first error: ", f.errors.empty() ? "" : f.errors.front());
  }
  return f;
}

Result<std::unordered_map<std::string, SamplePost>> ReadSamplePosts(
    const std::string& path, const std::unordered_set<std::string>& ids, int64_t* bad_lines) {
  std::ifstream in(path);
  if (!in) return NotFoundError("posts file '{}': cannot open", path);
  std::unordered_map<std::string, SamplePost> out;
  PostParser parser;
  Post post;
  std::string line;
  int64_t bad = 0;
  while (std::getline(in, line)) {
    if (Blank(line)) continue;
    if (!parser.ParseInto(line, &post).ok()) {
      ++bad;
      continue;
    }
    if (!ids.contains(post.id)) continue;
    out[post.id] = SamplePost{post.id, post.text, post.user.id, post.ts_ms};
  }
  if (bad_lines) *bad_lines = bad;
  return out;
}

Result<int64_t> Replay(const TrendFile& file,
                       const std::unordered_map<std::string, SamplePost>& posts,
                       const ReplayOptions& options, TrendStore* store,
                       const std::atomic<bool>* stop) {
  if (file.buckets.empty()) return InvalidArgumentError("replay: no buckets");
  if (!(options.speed >= 0)) {
    return InvalidArgumentError("replay: speed {} must be >= 0", options.speed);
  }
  const int64_t first = file.buckets.front().bucket_ms;
  const int64_t last = file.buckets.back().bucket_ms;
  const int64_t n = static_cast<int64_t>(file.buckets.size());
  // One lap later, every bucket moves on by the file's span plus one typical gap.
  const int64_t lap = (last - first) + (n > 1 ? (last - first) / (n - 1) : 60000);
  int64_t refused = 0, published = 0, offset = 0;
  int64_t prev_ms = 0;
  for (;;) {
    for (const TrendBucket& b : file.buckets) {
      if (stop && stop->load()) return refused;
      const int64_t bucket_ms = b.bucket_ms + offset;
      if (published > 0 && options.speed > 0) {
        if (!Wait(static_cast<double>(bucket_ms - prev_ms) / options.speed, stop)) return refused;
      }
      prev_ms = bucket_ms;
      std::vector<TrendUpdate> list = b.trends;
      for (auto& t : list) {
        t.updated_ms = bucket_ms;
        if (t.first_seen_ms) t.first_seen_ms += offset;
        std::vector<SamplePost> samples;
        for (const auto& id : t.samples) {
          if (auto it = posts.find(id); it != posts.end()) samples.push_back(it->second);
        }
        if (!samples.empty()) {
          if (Status s = store->AddSamplePosts(t.topic_id, std::move(samples)); !s.ok()) {
            SURGE_LOG_WARN("replay: {}", s.message());
          }
        }
      }
      if (Status s = store->Publish(bucket_ms, std::move(list)); !s.ok()) {
        ++refused;
        SURGE_LOG_WARN("replay: bucket {} skipped: {}", bucket_ms, s.message());
        continue;
      }
      ++published;
      PipelineHealth h;
      h.live = false;
      h.model = "none (replayed file)";
      h.source = options.source;
      h.buckets = published;
      h.dead_letters = file.bad_lines;
      if (file.bad_lines) h.dead_letter_kinds["bad_line"] = file.bad_lines;
      if (Status s = store->UpdateHealth(std::move(h)); !s.ok()) {
        SURGE_LOG_WARN("replay: {}", s.message());
      }
    }
    if (!options.loop) return refused;
    offset += lap;
  }
}

}  // namespace surge::stream::web
