// Replaying a trends JSONL file (the output of `surge trends`: one TrendUpdate per line, every
// update of one bucket carrying the same `updated`) into a TrendStore, for trying the dashboard
// without the pipeline (`surge dashboard`).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "stream/trend.h"
#include "stream/web/trend_store.h"

namespace surge::stream::web {

struct TrendBucket {
  int64_t bucket_ms = 0;
  std::vector<TrendUpdate> trends;
};

struct TrendFile {
  std::vector<TrendBucket> buckets;  // in file order, bucket ends increasing
  int64_t lines = 0;                 // non-empty lines read
  int64_t bad_lines = 0;             // lines skipped (see errors)
  std::vector<std::string> errors;   // the first few reasons, "line N: ..."
};

// Reads the file. Consecutive lines with the same `updated` form one bucket. A line that does not
// parse, or whose `updated` is before the bucket being read, is skipped and counted (its reason
// kept in `errors`); the other lines are kept. NotFound if the file cannot be opened;
// InvalidArgument if no line could be used.
Result<TrendFile> ReadTrendFile(const std::string& path);

// Reads the posts (JSONL, DESIGN.md §5 format) whose ids are in `ids`, as sample posts. Lines that
// do not parse are skipped (counted in *bad_lines when given). NotFound if the file cannot be
// opened.
Result<std::unordered_map<std::string, SamplePost>> ReadSamplePosts(
    const std::string& path, const std::unordered_set<std::string>& ids,
    int64_t* bad_lines = nullptr);

struct ReplayOptions {
  double speed =
      1;  // 1: real time (bucket gaps as in the file); 60: a minute a second; 0: no waits
  bool loop = false;   // start again at the end, bucket times moved on past the last one
  std::string source;  // shown as the health's source
};

// Publishes the buckets into `store` in order, waiting between them according to `speed`, adding
// the sample posts each update names (from `posts`) and a health record per bucket. Returns when
// done (never with loop, unless `stop` is set; `stop` is checked between buckets and during
// waits). A bucket the store refuses is logged and skipped; the count is returned.
Result<int64_t> Replay(const TrendFile& file,
                       const std::unordered_map<std::string, SamplePost>& posts,
                       const ReplayOptions& options, TrendStore* store,
                       const std::atomic<bool>* stop);

}  // namespace surge::stream::web
