// The trend update: one ranked topic at the end of one bucket (DESIGN.md §5), the record that goes
// to Kafka `surge.trends`, JSONL, the HTTP API and SSE:
//
//   {"topic_id":"t42","hashtag":"#AI推理革命#","rank":1,"prev_rank":7,"heat":12345.6,
//    "terms":["AI","推理","革命"],"category":"科技","sentiment":{"pos":0.61,"neu":0.30,"neg":0.09},
//    "posts":5120,"authors":4377,"first_seen":1764669600000,"updated":1764670200000,
//    "samples":["p17","p93"]}
//
// prev_rank is null for a topic new to the list. `updated` is the end of the bucket (ms) the
// update belongs to: every update of one bucket carries the same `updated`, so a reader can cut
// the stream into hot lists.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace surge::stream {

struct Sentiment {
  double pos = 0;
  double neu = 1;
  double neg = 0;
};

struct TrendUpdate {
  std::string topic_id;
  std::string hashtag;
  int rank = 0;                  // 1-based
  std::optional<int> prev_rank;  // rank in the previous bucket's list, if it was on it
  double heat = 0;
  std::vector<std::string> terms;
  std::string category;
  Sentiment sentiment;
  int64_t posts = 0;    // posts attributed to the topic so far
  int64_t authors = 0;  // distinct authors (estimate)
  int64_t first_seen_ms = 0;
  int64_t updated_ms = 0;
  std::vector<std::string> samples;  // post ids
};

void AppendTrendJson(const TrendUpdate& t, std::string* out);
std::string TrendToJson(const TrendUpdate& t);
// Parses one update; errors name the field.
Result<TrendUpdate> ParseTrend(std::string_view json);

}  // namespace surge::stream
