// Evaluation metrics on hand-made truth and trends with known answers, the matching rule, the
// truth file and malformed input.
#include "stream/eval/eval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "sim_test_util.h"
#include "stream/eval/truth.h"

namespace surge::stream::eval {
namespace {

using testutil::Contains;

constexpr int64_t kMin = 60000;

Truth HandTruth() {
  Truth t;
  t.scenario = "hand";
  t.seed = 1;
  t.start_ms = 0;
  t.end_ms = 12 * kMin;
  t.bucket_ms = kMin;
  t.events.push_back(
      {"e1", "AI推理革命", {"芯片", "发布会", "处理器"}, "科技", {}, 2 * kMin, 3 * kMin, 7 * kMin});
  t.events.push_back(
      {"e2", "国足逆转绝杀", {"比赛", "进球", "球迷"}, "体育", {}, 5 * kMin, 6 * kMin, 10 * kMin});
  t.events.push_back(
      {"e3", "电池召回事件", {"电动车", "车主", "续航"}, "汽车", {}, 200000, 260000, 8 * kMin});
  t.spam.push_back({"s1", "奶茶0元领取", {"优惠券", "私信", "链接"}, "美食", kMin, 400000});
  return t;
}

TrendUpdate Topic(std::string hashtag, std::vector<std::string> terms, int rank, int64_t updated) {
  TrendUpdate u;
  u.topic_id = "t" + hashtag;
  u.hashtag = std::move(hashtag);
  u.terms = std::move(terms);
  u.rank = rank;
  u.heat = 100.0 - rank;
  u.updated_ms = updated;
  return u;
}

// The lists worked out in the comments of HandReport.
std::vector<TrendUpdate> HandUpdates() {
  return {
      Topic("#AI推理革命#", {}, 1, 1 * kMin),                  // stale: before e1's onset
      Topic("#AI推理革命#", {"AI", "推理"}, 1, 3 * kMin),      // e1, delay 0
      Topic("#生活#", {"生活"}, 2, 3 * kMin),                  // noise
      Topic("#奶茶#", {"奶茶", "领取"}, 3, 3 * kMin),          // spam s1 (4/6 of its phrase)
      Topic("#芯片发布会#", {"芯片", "发布会"}, 1, 4 * kMin),  // e1 by key-term majority
      Topic("#推理革命#", {"推理", "革命"}, 2, 4 * kMin),      // e1 again: duplicate
      Topic("#天气#", {"天气"}, 3, 4 * kMin),                  // noise
      Topic("#国足#", {"国足"}, 1, 6 * kMin),                  // noise: 2/6 of e2's phrase
      Topic("#逆转绝杀#", {"逆转", "绝杀"}, 1, 7 * kMin),      // e2, delay 1
      Topic("#AI推理革命#", {}, 2, 7 * kMin),                  // e1, still active
      Topic("#AI推理革命#", {}, 1, 12 * kMin),                 // stale: after e1's end + 2 buckets
      Topic("#国足逆转绝杀#", {}, 2, 12 * kMin),  // e2: its end (10m) + 2 buckets reaches 12m
  };
}

TEST(EvalTest, HandReport) {
  const Truth truth = HandTruth();
  auto r = Evaluate(truth, CutIntoLists(HandUpdates()));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->lists, 6);
  EXPECT_EQ(r->slots, 12);
  EXPECT_EQ(r->event_slots, 5);
  EXPECT_EQ(r->duplicate_slots, 1);
  EXPECT_EQ(r->spam_slots, 1);
  EXPECT_EQ(r->stale_slots, 2);
  EXPECT_EQ(r->noise_slots, 3);
  EXPECT_DOUBLE_EQ(r->precision_at_k, 5.0 / 12);
  EXPECT_DOUBLE_EQ(r->recall, 2.0 / 3);
  EXPECT_DOUBLE_EQ(r->duplicate_rate, 1.0 / 6);
  EXPECT_EQ(r->spam_surfaced, 1);
  ASSERT_EQ(r->event_results.size(), 3u);
  const EventResult& e1 = r->event_results[0];
  EXPECT_TRUE(e1.detected);
  EXPECT_EQ(e1.first_listed_ms, 3 * kMin);
  EXPECT_EQ(e1.delay_buckets, 0);
  EXPECT_EQ(e1.delay_ms, kMin);
  EXPECT_EQ(e1.best_rank, 1);
  EXPECT_EQ(e1.lists, 3);
  const EventResult& e2 = r->event_results[1];
  EXPECT_EQ(e2.delay_buckets, 1);
  EXPECT_EQ(e2.best_rank, 1);
  EXPECT_EQ(e2.lists, 2);
  EXPECT_FALSE(r->event_results[2].detected);
  // Delays 0, 1 and a miss: median 1, p90 is the miss, median of detected 0.5.
  EXPECT_DOUBLE_EQ(r->delay_median_buckets, 1);
  EXPECT_TRUE(std::isinf(r->delay_p90_buckets));
  EXPECT_DOUBLE_EQ(r->delay_median_detected_buckets, 0.5);
  EXPECT_EQ(r->spam_results[0].lists, 1);
  EXPECT_EQ(r->spam_results[0].best_rank, 3);

  const std::string json = ReportToJson(*r);
  EXPECT_TRUE(Contains(json, "\"precision_at_k\":0.4167"));
  EXPECT_TRUE(Contains(json, "\"delay_p90_buckets\":null"));
  EXPECT_TRUE(Contains(json, "\"spam_surfaced\":1"));
  const std::string table = FormatReports({{"hand", *r}});
  EXPECT_TRUE(Contains(table, "precision@10"));
  EXPECT_TRUE(Contains(table, "miss"));
  EXPECT_TRUE(Contains(table, "0 (#1)"));
  EXPECT_TRUE(Contains(table, "1 (#1)"));
}

TEST(EvalTest, OnlyTheFirstKSlotsCount) {
  const Truth truth = HandTruth();
  std::vector<TrendUpdate> u;
  for (int i = 1; i <= 9; ++i)
    u.push_back(Topic("#噪声" + std::to_string(i) + "#", {}, i, 3 * kMin));
  u.push_back(Topic("#AI推理革命#", {}, 10, 3 * kMin));
  u.push_back(Topic("#国足逆转绝杀#", {}, 11, 6 * kMin));
  EvalOptions o;
  o.k = 9;
  auto r = Evaluate(truth, CutIntoLists(u), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->slots, 9 + 1);  // second list holds one topic, rank 11, within its first 9
  EXPECT_FALSE(r->event_results[0].detected);
  EXPECT_TRUE(r->event_results[1].detected);
  o.k = 10;
  r = Evaluate(truth, CutIntoLists(u), o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->event_results[0].detected);
  o.k = 0;
  EXPECT_FALSE(Evaluate(truth, CutIntoLists(u), o).ok());
}

TEST(EvalTest, GraceAndBucketWidthOptions) {
  const Truth truth = HandTruth();
  // Listed 3 buckets after e1's end (7m): stale with the default grace of 2, an event with 3.
  std::vector<TrendUpdate> u{Topic("#AI推理革命#", {}, 1, 11 * kMin)};
  auto r = Evaluate(truth, CutIntoLists(u));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stale_slots, 1);
  EvalOptions o;
  o.grace_buckets = 3;
  r = Evaluate(truth, CutIntoLists(u), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->event_slots, 1);
  EXPECT_EQ(r->event_results[0].delay_buckets, 8);
  o.bucket_ms = 30000;  // delay counted in 30 s buckets; grace 3 x 30 s
  r = Evaluate(truth, CutIntoLists(u), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stale_slots, 1);
}

TEST(MatchTest, PhraseCoverageExamples) {
  auto cov = [](std::string hashtag, std::vector<std::string> terms, int max_terms = 6) {
    return PhraseCoverage(Topic(std::move(hashtag), std::move(terms), 1, 0), "AI推理革命",
                          max_terms);
  };
  EXPECT_DOUBLE_EQ(cov("#AI推理革命#", {}), 1);
  EXPECT_DOUBLE_EQ(cov("#AI推理革命来了#", {}), 1);
  EXPECT_DOUBLE_EQ(cov("#ai 推理革命#", {}), 1);  // case and spaces are ignored
  EXPECT_DOUBLE_EQ(cov("", {"推理", "革命"}), 4.0 / 6);
  EXPECT_DOUBLE_EQ(cov("", {"推理"}), 2.0 / 6);
  EXPECT_DOUBLE_EQ(cov("", {"AI", "革命"}), 4.0 / 6);
  EXPECT_DOUBLE_EQ(cov("#命#", {"推"}), 0);  // single characters never count
  // Only the first max_terms terms count.
  EXPECT_DOUBLE_EQ(cov("", {"a1", "a2", "a3", "a4", "a5", "a6", "AI推理革命"}), 0);
  EXPECT_DOUBLE_EQ(cov("", {"a1", "a2", "a3", "a4", "a5", "a6", "AI推理革命"}, 7), 1);
}

TEST(MatchTest, ActiveTargetsWinAndTermsNeedAMajority) {
  Truth truth = HandTruth();
  // A second event sharing e1's phrase, active later.
  truth.events.push_back({"e4", "AI推理革命", {"芯片"}, "科技", {}, 8 * kMin, 9 * kMin, 11 * kMin});
  const std::vector<bool> none(truth.events.size(), false);
  EvalOptions o;
  TopicMatch m = MatchTopic(Topic("#AI推理革命#", {}, 1, 0), 11 * kMin, truth, o, none);
  EXPECT_EQ(m.kind, SlotKind::kEvent);
  EXPECT_EQ(m.event, 3);  // e1 is over (7m + 2 buckets = 9m < 10m), e4 is active
  m = MatchTopic(Topic("#AI推理革命#", {}, 1, 0), 4 * kMin, truth, o, none);
  EXPECT_EQ(m.event, 0);
  // One key term of e1's three is no majority, but all of e4's one: e4 is not active yet, so the
  // topic is stale rather than noise.
  m = MatchTopic(Topic("#芯片#", {"芯片"}, 1, 0), 4 * kMin, truth, o, none);
  EXPECT_EQ(m.kind, SlotKind::kStale);
  EXPECT_EQ(m.event, 3);
  truth.events.pop_back();
  m = MatchTopic(Topic("#芯片#", {"芯片"}, 1, 0), 4 * kMin, truth, o, none);
  EXPECT_EQ(m.kind, SlotKind::kNoise);
  m = MatchTopic(Topic("#新品#", {"芯片", "处理器"}, 1, 0), 4 * kMin, truth, o, none);
  EXPECT_EQ(m.kind, SlotKind::kEvent);
  EXPECT_EQ(m.event, 0);
  // A key term inside a longer term or the hashtag counts.
  m = MatchTopic(Topic("#芯片发布会现场#", {"处理器性能"}, 1, 0), 4 * kMin, truth, o, none);
  EXPECT_EQ(m.kind, SlotKind::kEvent);
  std::vector<bool> e1_listed(truth.events.size(), false);
  e1_listed[0] = true;
  m = MatchTopic(Topic("#AI推理革命#", {}, 1, 0), 4 * kMin, truth, o, e1_listed);
  EXPECT_EQ(m.kind, SlotKind::kDuplicate);
  m = MatchTopic(Topic("#奶茶0元领取#", {}, 1, 0), 11 * kMin, truth, o, none);
  EXPECT_EQ(m.kind, SlotKind::kSpam);  // spam counts whenever it is listed
}

TEST(MatchTest, SpamMatchesByItsPiecesEventsMustBeNamed) {
  const Truth truth = HandTruth();
  const std::vector<bool> none(truth.events.size(), false);
  const EvalOptions o;
  TopicMatch m = MatchTopic(Topic("#奶茶#", {"奶茶"}, 1, 0), 3 * kMin, truth, o, none);
  EXPECT_EQ(m.kind, SlotKind::kSpam);
  EXPECT_EQ(m.spam, 0);
  m = MatchTopic(Topic("#私信#", {"私信", "生活"}, 1, 0), 3 * kMin, truth, o, none);
  EXPECT_EQ(m.kind, SlotKind::kSpam);  // half of its surfaces hold a key term
  m = MatchTopic(Topic("#生活#", {"生活", "天气", "私信"}, 1, 0), 3 * kMin, truth, o, none);
  EXPECT_EQ(m.kind, SlotKind::kNoise);
  m = MatchTopic(Topic("#推理#", {"推理"}, 1, 0), 3 * kMin, truth, o, none);
  EXPECT_EQ(m.kind, SlotKind::kNoise);  // a third of "AI推理革命" does not name the event
}

TEST(TrendsTest, CutsIntoListsByUpdatedOrderedByRank) {
  std::vector<TrendUpdate> u{Topic("#b#", {}, 2, 2 * kMin), Topic("#x#", {}, 1, 1 * kMin),
                             Topic("#a#", {}, 1, 2 * kMin), Topic("#c#", {}, 2, 2 * kMin)};
  u[3].heat = 1000;  // same rank as #b#: more heat first
  const auto lists = CutIntoLists(u);
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[0].updated_ms, kMin);
  ASSERT_EQ(lists[1].topics.size(), 3u);
  EXPECT_EQ(lists[1].topics[0].hashtag, "#a#");
  EXPECT_EQ(lists[1].topics[1].hashtag, "#c#");
  EXPECT_EQ(lists[1].topics[2].hashtag, "#b#");
}

std::string HandTrendsText() {
  std::string s;
  for (const auto& t : HandUpdates()) s += TrendToJson(t) + "\n";
  return s;
}

TEST(TrendsTest, ReadsJsonlAndGivesTheSameReport) {
  std::istringstream in("\n" + HandTrendsText() + "  \n");
  auto f = ReadTrends(in, "hand.jsonl");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->lines, 12);
  EXPECT_EQ(f->skipped_lines, 0);
  auto r = Evaluate(HandTruth(), f->lists);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->precision_at_k, 5.0 / 12);
}

TEST(TrendsTest, MalformedLineFailsWithItsNumberOrIsSkipped) {
  std::string text = HandTrendsText();
  // Line 3 becomes invalid JSON, line 5 lacks a required field's type.
  std::vector<std::string> lines;
  std::istringstream split(text);
  for (std::string l; std::getline(split, l);) lines.push_back(l);
  lines[2] = "{\"topic_id\": \"broken\"";
  lines[4] = R"({"topic_id":"t","hashtag":"#x#","rank":"first","heat":1,"terms":[],"updated":1})";
  std::string bad;
  for (const auto& l : lines) bad += l + "\n";
  {
    std::istringstream in(bad);
    auto f = ReadTrends(in, "trends.jsonl");
    ASSERT_FALSE(f.ok());
    EXPECT_TRUE(Contains(f.status().message(), "trends.jsonl:3: "));
    EXPECT_TRUE(Contains(f.status().message(), "--skip-bad"));
  }
  std::istringstream in(bad);
  TrendsReadOptions o;
  o.skip_bad = true;
  auto f = ReadTrends(in, "trends.jsonl", o);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->lines, 12);
  EXPECT_EQ(f->skipped_lines, 2);
  ASSERT_EQ(f->first_errors.size(), 2u);
  EXPECT_TRUE(Contains(f->first_errors[0], "trends.jsonl:3: "));
  EXPECT_TRUE(Contains(f->first_errors[1], "trends.jsonl:5: "));
  size_t topics = 0;
  for (const auto& l : f->lists) topics += l.topics.size();
  EXPECT_EQ(topics, 10u);  // nothing else was lost
}

TEST(TrendsTest, MissingFileIsNotFound) {
  auto f = LoadTrends("/nonexistent/trends.jsonl");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
}

TEST(TruthTest, RoundTrips) {
  Truth t = HandTruth();
  t.events[0].sentiment = {0.6, 0.3, 0.1};
  t.events[0].posts = 1234;
  t.events[0].expected_posts = 1200.5;
  t.spam[0].bots = 300;
  const std::string json = TruthToJson(t);
  EXPECT_TRUE(Contains(json, "\"format\": \"surge.sim.truth/1\""));
  auto back = ParseTruth(json, "t.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->scenario, "hand");
  EXPECT_EQ(back->bucket_ms, kMin);
  ASSERT_EQ(back->events.size(), 3u);
  EXPECT_EQ(back->events[0].phrase, "AI推理革命");
  EXPECT_EQ(back->events[0].terms, t.events[0].terms);
  EXPECT_EQ(back->events[0].posts, 1234);
  EXPECT_DOUBLE_EQ(back->events[0].expected_posts, 1200.5);
  EXPECT_DOUBLE_EQ(back->events[0].sentiment.pos, 0.6);
  EXPECT_EQ(back->events[1].onset_ms, 5 * kMin);
  ASSERT_EQ(back->spam.size(), 1u);
  EXPECT_EQ(back->spam[0].bots, 300);
  EXPECT_EQ(back->spam[0].end_ms, 400000);
}

TEST(TruthTest, BadFilesNameTheField) {
  struct Case {
    std::string json;
    const char* want;
  };
  const std::string ok_head =
      R"({"format":"surge.sim.truth/1","start_ms":0,"end_ms":1,"bucket_ms":60000,)";
  const Case cases[] = {
      {"{not json", "not valid JSON"},
      {"[1,2]", "must hold one JSON object"},
      {R"({"format":"other/2"})", "unsupported format 'other/2'"},
      {R"({"format":"surge.sim.truth/1","end_ms":1,"bucket_ms":1,"events":[],"spam":[]})",
       "field 'start_ms': required field is missing"},
      {ok_head + R"("bucket_ms2":1,"events":[],"spam":{}})", "field 'spam': expected a list"},
      {ok_head + R"("events":[{"id":"e","phrase":"p","terms":["t"],"onset_ms":"soon",)"
                 R"("peak_ms":1,"end_ms":2}],"spam":[]})",
       "field 'events[0].onset_ms': expected an integer"},
      {ok_head + R"("events":[{"id":"e","phrase":"p","terms":[1],"onset_ms":0,"peak_ms":1,)"
                 R"("end_ms":2}],"spam":[]})",
       "field 'events[0].terms': expected a list of non-empty strings"},
      {ok_head + R"("events":[{"id":"e","phrase":"p","terms":[],"onset_ms":5,"peak_ms":5,)"
                 R"("end_ms":2}],"spam":[]})",
       "end_ms is before onset_ms"},
  };
  for (const auto& c : cases) {
    auto t = ParseTruth(c.json, "t.json");
    ASSERT_FALSE(t.ok()) << c.json;
    EXPECT_TRUE(Contains(t.status().message(), c.want)) << c.json;
    EXPECT_TRUE(Contains(t.status().message(), "t.json"));
  }
  auto missing = LoadTruth("/nonexistent/truth.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace surge::stream::eval
