// The simulator's ground truth: the events and spam campaigns of one run, as `surge simulate
// --truth` writes them and `surge eval` reads them. The file format is documented at the top of
// stream/eval/eval.h and in docs/stream-sim.md.
//
// Thread safety: pure functions over plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "stream/trend.h"

namespace surge::stream::eval {

inline constexpr std::string_view kTruthFormat = "surge.sim.truth/1";

struct TruthEvent {
  std::string id;
  std::string phrase;
  std::vector<std::string> terms;
  std::string category;
  Sentiment sentiment;
  int64_t onset_ms = 0;
  int64_t peak_ms = 0;
  int64_t end_ms = 0;
  double peak_per_min = 0;
  double expected_posts = 0;
  int64_t posts = 0;
  int64_t authors = 0;
};

struct TruthSpam {
  std::string id;
  std::string phrase;
  std::vector<std::string> terms;
  std::string category;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  double expected_posts = 0;
  int64_t posts = 0;
  int64_t bots = 0;
};

struct Truth {
  std::string scenario;
  uint64_t seed = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  int64_t bucket_ms = 60000;
  int64_t posts = 0;
  std::vector<TruthEvent> events;
  std::vector<TruthSpam> spam;
};

// Parses a truth file's text; errors name `source`, the field and what was expected.
Result<Truth> ParseTruth(std::string_view json, std::string_view source);
Result<Truth> LoadTruth(const std::string& path);
// The truth file's JSON (one object, pretty-printed, trailing newline).
std::string TruthToJson(const Truth& truth);

}  // namespace surge::stream::eval
