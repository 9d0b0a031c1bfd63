// Simulator scenarios: what `surge simulate` generates, read from YAML or JSON (JSON is read as
// YAML, through yaml-cpp). docs/stream-sim.md lists every field with its meaning and default.
//
// A scenario file is read on top of the built-in default scenario (DefaultScenarioYaml()):
// every top-level key the file sets replaces the default's key as a whole; keys it leaves out
// keep the default's value. So a file with only `seed: 7` is the default with another seed, and
// `events: []` removes the default's events.
//
// Units: durations are a number of seconds or a string with units ("90s", "5m", "1h30m",
// "250ms", "1.5m"); `start` is an ISO 8601 time with an offset ("2026-12-02T20:00:00+08:00")
// or an integer of ms since the epoch; clock times of day are "HH:MM" local time (the offset of
// `start`). Event and spam times are offsets from `start`. Rates are posts per minute.
//
// Errors are InvalidArgument (NotFound for a missing file) and read
// "FILE:LINE:COLUMN: field 'events[2].rise': expected a duration (…), got 'fast'"; unknown
// fields are errors too (they are usually typos).
//
// Thread safety: the functions are pure; a Scenario is a plain value.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "stream/trend.h"

namespace surge::stream::sim {

struct FollowerModel {
  double median = 150;          // log-normal median of ordinary accounts
  double sigma = 1.9;           // log-normal sigma (heavy tail)
  int64_t max = 100'000'000;    // cap
  double verified_factor = 40;  // verified accounts have this many times more followers
};

struct AgeModel {
  double median_days = 1400;  // log-normal median account age at `start`
  double sigma = 0.7;
  double min_days = 30;
};

struct UserModel {
  int64_t count = 200'000;
  FollowerModel followers;
  double verified_share = 0.02;
  AgeModel age;
  double activity_sigma = 1.2;  // log-normal sigma of how often an account posts
};

struct CategorySpec {
  std::string name;
  double weight = 1;  // share of background posts (normalised over categories)
  Sentiment sentiment{0.3, 0.5, 0.2};
  std::vector<std::string> seed_words;  // the category's own words, most typical first
  // Dictionary nouns containing one of these characters (and dictionary words containing a seed
  // word) join the category's vocabulary, up to `dict_words` of them by jieba frequency.
  std::string dict_chars;
  int dict_words = 120;
};

struct EvergreenSpec {
  double share = 0.45;  // share of background posts with an evergreen clause
  std::vector<std::string> words;
  double zipf = 1.0;  // Zipf exponent over `words`
};

// A daily-cycle bump: words whose share rises and falls around a time of day (not an event).
struct BumpSpec {
  std::vector<std::string> words;
  int64_t peak_clock_ms = 0;      // local time of day of the maximum
  int64_t width_ms = 15 * 60000;  // Gaussian sigma
  double amplitude = 0.6;         // relative rise at the maximum (0.6 = 1.6x)
  double share = 0.01;            // share of background posts with the bump outside the bump
};

enum class RiseShape { kGamma, kLogNormal };

struct EventSpec {
  std::string id;
  std::string phrase;              // new phrase (not one jieba word)
  std::vector<std::string> terms;  // related key terms
  std::string category;
  int64_t onset_ms = 0;            // offset from start
  int64_t rise_ms = 300'000;       // onset to peak
  int64_t half_life_ms = 240'000;  // exponential decay after the peak
  double peak_per_min = 300;       // posts per minute at the peak
  RiseShape shape = RiseShape::kGamma;
  double shape_param = 2.0;  // gamma: shape k; log-normal: sigma
  Sentiment sentiment{0.3, 0.5, 0.2};
  double repost_share = 0.35;
  double hashtag_share = 0.3;  // posts that start with #phrase#
  double phrase_share = 0.75;  // {phrase} slots that get the phrase (else a term)
};

struct SpamSpec {
  std::string id;
  std::string phrase;
  std::vector<std::string> terms;
  std::string category;  // the category its posts pretend to be in (labels)
  int64_t start_ms = 0;  // offsets from start
  int64_t end_ms = 0;
  int64_t bots = 300;        // size of the bot ring
  double per_min = 1000;     // rate while a burst is on
  int64_t on_ms = 60'000;    // burst length
  int64_t off_ms = 120'000;  // pause between bursts
  double hashtag_share = 0.8;
  double repost_share = 0.3;
  double max_age_days = 30;            // bots are younger than this
  int64_t max_followers = 60;          // and have at most this many followers
  std::vector<std::string> templates;  // empty: the scenario's templates.spam
};

struct Lexicon {
  std::vector<std::string> pos;  // sentiment words; every pos post holds one, no neg word
  std::vector<std::string> neg;
  std::vector<std::string> neu;         // neutral fillers for {sentiment} in neutral posts
  std::vector<std::string> adjectives;  // neutral adjectives for {adj}
  std::vector<std::string> emoji;       // neutral emoticons for {emoji}
  std::vector<std::string> exclude;     // dictionary words never used
};

// Post templates: literal text with {slot}s. Slots: noun (category word), general (any noun),
// verb, adv, adj, evergreen, bump, sentiment, phrase, term, emoji, user (an @mention), num,
// rand (a short random tag, spam only).
struct Templates {
  std::vector<std::string> background;
  std::vector<std::string> event;
  std::vector<std::string> spam;
  std::vector<std::string> repost;     // repost comments, before "//@user:original"
  std::vector<std::string> evergreen;  // clauses appended to background posts
  std::vector<std::string> bump;       // clauses with a bump word
};

struct Scenario {
  std::string name = "custom";
  uint64_t seed = 42;
  int64_t start_ms = 0;
  int utc_offset_minutes = 480;
  int64_t duration_ms = 30 * 60000;
  int64_t bucket_ms = 60000;         // suggested bucket width (written to the truth)
  double rate_per_min = 10000;       // background posts per minute at diurnal multiplier 1
  double noise = 0.06;               // per-minute log-normal jitter of rate and category shares
  std::array<double, 24> diurnal{};  // multiplier at the start of each local hour
  double repost_share = 0.2;         // background posts that repost a recent post
  double end_fraction = 0.05;        // an event ends when its rate falls below this x peak
  std::string dict_path;             // jieba dictionary; empty = Debian's
  UserModel users;
  std::vector<CategorySpec> categories;
  EvergreenSpec evergreen;
  std::vector<BumpSpec> bumps;
  Lexicon lexicon;
  Templates templates;
  std::vector<EventSpec> events;
  std::vector<SpamSpec> spam;
};

// The built-in default scenario (YAML text).
std::string_view DefaultScenarioYaml();
Result<Scenario> DefaultScenario();

// Parses `text` (YAML or JSON) on top of the default scenario; `source` names it in errors.
Result<Scenario> ParseScenario(std::string_view text, std::string_view source);
// Reads and parses a scenario file.
Result<Scenario> LoadScenario(const std::string& path);

// Command-line overrides of a loaded scenario.
struct ScenarioOverrides {
  std::optional<uint64_t> seed;
  std::optional<int64_t> duration_ms;  // events and campaigns starting at or after it are dropped
  std::optional<double> rate_per_min;
};
// Applies the overrides; InvalidArgument for a non-positive duration or a negative rate.
// Returns the ids of the events and campaigns dropped by a shorter duration.
Result<std::vector<std::string>> ApplyOverrides(const ScenarioOverrides& o, Scenario* s);

// "90s", "5m", "1h30m", "250ms", "1.5m" or a plain number of seconds -> ms.
Result<int64_t> ParseDuration(std::string_view text);
// "2026-12-02T20:00:00+08:00" (also "Z", fractional seconds, or no offset = UTC) -> ms since
// the epoch and the offset in minutes.
Result<std::pair<int64_t, int>> ParseTimestamp(std::string_view text);

}  // namespace surge::stream::sim
