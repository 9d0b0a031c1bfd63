// Evaluation of a trend detector against a simulator's ground truth (`surge eval`).
//
// ## Ground-truth file (truth.json, written by `surge simulate --truth`)
//
//   {"format":"surge.sim.truth/1","scenario":"default","seed":42,
//    "start_ms":1764676800000,"end_ms":1764678600000,"bucket_ms":60000,"posts":331245,
//    "events":[{"id":"e01","phrase":"AI推理革命","terms":["芯片","算力","发布会"],
//               "category":"科技","sentiment":{"pos":0.6,"neu":0.3,"neg":0.1},
//               "onset_ms":…,"peak_ms":…,"end_ms":…,"peak_per_min":600.0,
//               "expected_posts":9000.0,"posts":8950,"authors":8012}],
//    "spam":[{"id":"s01","phrase":"限时秒杀名牌包","terms":["代购","优惠券"],"category":"美食",
//             "start_ms":…,"end_ms":…,"expected_posts":…,"posts":…,"bots":300}]}
//
// * phrase: the event's new phrase. jieba does not know it as one word (it cuts it into pieces).
// * terms: related key terms (dictionary words) that the event's posts use often; the phrase is
//   not repeated in them.
// * onset_ms: first moment the event can post; peak_ms: its rate maximum; end_ms: the moment
//   its rate falls below the scenario's end fraction (default 5 %) of the peak, or the end of
//   the simulation, whichever comes first. Spam: start_ms/end_ms bound its posting.
// * expected_posts: integral of the configured rate; posts/authors: what was generated.
// * bucket_ms: the bucket width the scenario suggests (the eval default).
// Unknown fields are ignored; the fields above are required (posts/authors/expected_posts,
// sentiment and category are optional for eval).
//
// ## Hot lists
//
// The trends file holds TrendUpdate lines (stream/trend.h). Updates are grouped by `updated`
// (the end of their bucket, ms); each group is one hot list, ordered by `rank` (ties: higher
// heat first, then file order) and cut to its first k topics. A bucket with no updates has an
// empty list. A list with end U covers the bucket [U - bucket_ms, U).
// Malformed lines: by default the whole run fails with "FILE:LINE: reason" (a partial
// evaluation would look like a real one); with skip_bad they are counted (reported as
// skipped_lines) and left out, and the first few errors are kept for the report.
//
// ## Matching a listed topic to a target (event or spam campaign)
//
// norm(s): `s` without '#' characters and white space, ASCII letters lower-cased.
// Surfaces of a topic: norm(hashtag) and norm(t) for its first `max_terms` terms (default 6;
// later terms are ignored so that a topic cannot match everything by listing every word);
// surfaces shorter than 2 code points are dropped.
// A topic matches target X (phrase P, key terms K) when either
//   (a) phrase coverage >= 0.5: the share of P's code points that lie inside an occurrence in
//       norm(P) of some surface, or P itself occurs inside a surface (coverage 1). E.g. for P =
//       "AI推理革命": "#AI推理革命#" or "#AI推理革命来了#" -> 1; terms ["推理","革命"] -> 4/6;
//       "推理" alone -> 2/6, no match; or
//   (b) key-term majority: more than half of K are covered, a key term being covered when it
//       occurs inside some surface (equal to a term, or part of the hashtag or of a longer term).
// score = phrase coverage + (covered key terms / |K|). A topic is assigned to one target: the
// best-scoring matching target among those ACTIVE at the list's bucket; if none is active, the
// best-scoring matching target overall (ties: earlier onset, then id).
//
// Active: a target is active for the list with end U when the bucket [U - b, U) overlaps
// [onset_ms, end_ms + grace], grace = grace_buckets (default 2) x b, b = bucket_ms. For spam the
// interval is [start_ms, end_ms + grace].
//
// ## Slot kinds (each of the first k topics of a list is one slot)
//   event      matches an active event not matched by a higher-ranked slot of the same list
//   duplicate  matches an active event already matched higher in the same list
//   spam       assigned to a spam campaign (active or not)
//   stale      assigned to an event that is not active (listed before onset or after end+grace)
//   noise      matches nothing
//
// ## Metrics
//   precision@k   event slots / all slots, over all lists (empty lists add nothing). A list may
//                 be shorter than k; duplicates, spam, stale and noise all count against it.
//   recall        events with at least one event slot at any bucket / all events in the truth.
//   delay         for each detected event, the first list U in which it holds an event slot:
//                 delay_buckets = max(0, ceil((U - onset_ms) / b) - 1), i.e. 0 when it is listed
//                 at the end of the bucket in which it began; median and p90 (nearest rank)
//                 over detected events; undetected events are counted by recall only.
//   spam surfaced number of campaigns holding at least one spam slot in some list's top k.
//   duplicate rate duplicate slots / all slots.
//
// Thread safety: everything here is a pure function of its inputs.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "stream/eval/truth.h"
#include "stream/trend.h"

namespace surge::stream::eval {

// One bucket's hot list, ordered by rank.
struct HotList {
  int64_t updated_ms = 0;
  std::vector<TrendUpdate> topics;
};

struct TrendsReadOptions {
  bool skip_bad = false;  // count and skip malformed lines instead of failing
};

struct TrendsFile {
  std::vector<HotList> lists;  // ascending `updated`
  int64_t lines = 0;           // non-blank lines read
  int64_t skipped_lines = 0;
  std::vector<std::string> first_errors;  // up to 5 "SOURCE:LINE: reason"
};

// Reads TrendUpdate lines (blank lines are ignored) and cuts them into hot lists.
Result<TrendsFile> ReadTrends(std::istream& in, std::string_view source,
                              const TrendsReadOptions& options = {});
Result<TrendsFile> LoadTrends(const std::string& path, const TrendsReadOptions& options = {});
// Groups updates by `updated` and orders each group as described above.
std::vector<HotList> CutIntoLists(std::vector<TrendUpdate> updates);

struct EvalOptions {
  int k = 10;
  int grace_buckets = 2;
  int max_terms = 6;
  int64_t bucket_ms = 0;  // 0: the truth's bucket_ms
};

enum class SlotKind { kEvent, kDuplicate, kSpam, kStale, kNoise };
std::string_view SlotKindName(SlotKind kind);

// What one listed topic was matched to.
struct TopicMatch {
  SlotKind kind = SlotKind::kNoise;
  int event = -1;  // index into truth.events (event, duplicate, stale)
  int spam = -1;   // index into truth.spam (spam)
};

struct EventResult {
  std::string id;
  bool detected = false;
  int64_t first_listed_ms = 0;  // `updated` of the first list with an event slot for it
  int64_t delay_buckets = 0;
  int64_t delay_ms = 0;  // first_listed_ms - onset_ms
  int best_rank = 0;     // best (lowest) rank among its event slots
  int64_t lists = 0;     // lists in which it holds an event slot
};

struct SpamResult {
  std::string id;
  int64_t lists = 0;  // lists in whose top k it holds a spam slot
  int best_rank = 0;
};

struct EvalReport {
  int k = 10;
  int64_t bucket_ms = 0;
  int64_t lists = 0;  // non-empty lists
  int64_t slots = 0;
  int64_t event_slots = 0;
  int64_t duplicate_slots = 0;
  int64_t spam_slots = 0;
  int64_t stale_slots = 0;
  int64_t noise_slots = 0;
  double precision_at_k = 0;
  double recall = 0;
  int64_t events = 0;
  int64_t detected = 0;
  double delay_median_buckets = 0;  // NaN when nothing was detected
  double delay_p90_buckets = 0;
  int64_t spam_surfaced = 0;
  double duplicate_rate = 0;
  std::vector<EventResult> event_results;
  std::vector<SpamResult> spam_results;
};

// Matches one topic of the list ending at `updated_ms`; `already_matched[i]` says whether event
// i already holds a slot higher in the same list (sized truth.events.size()).
TopicMatch MatchTopic(const TrendUpdate& topic, int64_t updated_ms, const Truth& truth,
                      const EvalOptions& options, const std::vector<bool>& already_matched);

// Phrase coverage (0..1) of `phrase` by the topic's surfaces, as defined above.
double PhraseCoverage(const TrendUpdate& topic, std::string_view phrase, int max_terms);

Result<EvalReport> Evaluate(const Truth& truth, const std::vector<HotList>& lists,
                            const EvalOptions& options = {});

// The report as JSON (one object).
std::string ReportToJson(const EvalReport& report);
// A readable table, one column per named report (the first line names the columns).
std::string FormatReports(const std::vector<std::pair<std::string, EvalReport>>& reports);

}  // namespace surge::stream::eval
