// Scenario files: the default, overlays, units, and every kind of bad file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sim_test_util.h"
#include "stream/sim/post_template.h"
#include "stream/sim/scenario.h"

namespace surge::stream::sim {
namespace {

using testutil::Contains;

Status ParseError(std::string_view text) {
  auto s = ParseScenario(text, "bad.yaml");
  return s.ok() ? Status::Ok() : s.status();
}

TEST(ScenarioTest, DefaultScenarioParses) {
  auto s = DefaultScenario();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->name, "default");
  EXPECT_EQ(s->seed, 42u);
  EXPECT_EQ(s->duration_ms, 30 * 60000);
  EXPECT_EQ(s->bucket_ms, 60000);
  EXPECT_EQ(s->utc_offset_minutes, 480);
  // 2026-12-02T20:00:00+08:00 = 12:00 UTC.
  EXPECT_EQ(s->start_ms, 1796212800000);
  EXPECT_GE(s->categories.size(), 8u);
  EXPECT_GE(s->events.size(), 10u);
  EXPECT_LE(s->events.size(), 20u);
  EXPECT_GE(s->spam.size(), 2u);
  EXPECT_LE(s->spam.size(), 4u);
  EXPECT_GE(s->bumps.size(), 1u);
  const EventSpec& e = s->events.front();
  EXPECT_EQ(e.id, "e01");
  EXPECT_EQ(e.phrase, "AI推理革命");
  EXPECT_EQ(e.onset_ms, 3 * 60000);
  EXPECT_EQ(e.rise_ms, 6 * 60000);
  EXPECT_NEAR(e.sentiment.pos + e.sentiment.neu + e.sentiment.neg, 1.0, 1e-12);
  EXPECT_EQ(s->diurnal[21], 1.0);
}

TEST(ScenarioTest, FileKeysReplaceDefaultKeysWholesale) {
  auto s = ParseScenario("seed: 7\nevents: []\nrate_per_minute: 500\n", "mine.yaml");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->seed, 7u);
  EXPECT_TRUE(s->events.empty());
  EXPECT_EQ(s->rate_per_min, 500);
  EXPECT_FALSE(s->spam.empty());  // kept from the default
  EXPECT_EQ(s->name, "default");
}

TEST(ScenarioTest, InheritedEventsAfterAShorterEndAreLeftOut) {
  auto s = ParseScenario("duration: 6m\n", "short.yaml");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_FALSE(s->events.empty());
  for (const auto& e : s->events) EXPECT_LT(e.onset_ms, 6 * 60000) << e.id;
  for (const auto& c : s->spam) EXPECT_LT(c.start_ms, 6 * 60000) << c.id;
}

TEST(ScenarioTest, JsonIsReadToo) {
  auto s = ParseScenario(
      R"({"name":"j","duration":"10m","events":[{"id":"x","phrase":"新词测试事件",)"
      R"("terms":["比赛"],"category":"体育","onset":"2m","peak_per_minute":50,"rise":90}]})",
      "s.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->name, "j");
  ASSERT_EQ(s->events.size(), 1u);
  EXPECT_EQ(s->events[0].rise_ms, 90000);
  EXPECT_EQ(s->events[0].half_life_ms, EventSpec{}.half_life_ms);
}

TEST(ScenarioTest, Durations) {
  EXPECT_EQ(*ParseDuration("90s"), 90000);
  EXPECT_EQ(*ParseDuration("5m"), 300000);
  EXPECT_EQ(*ParseDuration("1h30m"), 5400000);
  EXPECT_EQ(*ParseDuration("250ms"), 250);
  EXPECT_EQ(*ParseDuration("1.5m"), 90000);
  EXPECT_EQ(*ParseDuration("12"), 12000);
  for (const char* bad : {"", "m", "5x", "-3", "5 m", "1h-2m", "abc"}) {
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
}

TEST(ScenarioTest, Timestamps) {
  EXPECT_EQ(ParseTimestamp("1970-01-01T00:00:00Z")->first, 0);
  EXPECT_EQ(ParseTimestamp("2026-12-02T20:00:00+08:00")->first, 1796212800000);
  EXPECT_EQ(ParseTimestamp("2026-12-02T20:00:00+08:00")->second, 480);
  EXPECT_EQ(ParseTimestamp("2026-12-02 12:00:00.5")->first, 1796212800500);
  EXPECT_EQ(ParseTimestamp("2026-12-02T07:00-0500")->first, 1796212800000);
  EXPECT_EQ(ParseTimestamp("2024-02-29T00:00:00Z")->first, 1709164800000);
  for (const char* bad : {"2026-13-01T00:00:00Z", "2026-12-02", "yesterday",
                          "2026-12-02T20:00:00+8", "2026-12-02T25:00:00Z"}) {
    EXPECT_FALSE(ParseTimestamp(bad).ok()) << bad;
  }
}

TEST(ScenarioTest, SyntaxErrorNamesFileAndLine) {
  Status st = ParseError("seed: 1\nevents: [\n  {id: x\n");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "bad.yaml:"));
  EXPECT_TRUE(Contains(st.message(), "not valid YAML/JSON"));
}

TEST(ScenarioTest, UnknownFieldNamesLineColumnAndPath) {
  Status st = ParseError(
      "seed: 1\n"
      "events:\n"
      "  - id: a\n"
      "    phrase: 新词测试事件\n"
      "    terms: [比赛]\n"
      "    category: 体育\n"
      "    onset: 1m\n"
      "    peak_per_minute: 10\n"
      "    onsett: 2m\n");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "bad.yaml:9:5"));
  EXPECT_TRUE(Contains(st.message(), "unknown field 'events[0].onsett'"));
  EXPECT_TRUE(Contains(st.message(), "known: id, phrase"));
}

TEST(ScenarioTest, UnknownTopLevelField) {
  Status st = ParseError("seeed: 3\n");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "bad.yaml:1:1: unknown field 'seeed'"));
}

TEST(ScenarioTest, WrongTypesAndRanges) {
  struct Case {
    const char* yaml;
    const char* want;
  };
  const Case cases[] = {
      {"seed: lots\n", "bad.yaml:1:7: field 'seed': expected an integer, got 'lots'"},
      {"duration: fast\n", "field 'duration': expected a duration"},
      {"rate_per_minute: -5\n", "field 'rate_per_minute': -5 is out of range"},
      {"start: tomorrow\n", "field 'start': expected an ISO 8601 time"},
      {"diurnal: [1, 2]\n", "field 'diurnal': expected a list of 24 multipliers"},
      {"users: {count: many}\n", "field 'users.count': expected an integer"},
      {"users: 5\n", "field 'users': expected a mapping"},
      {"categories: []\n", "at least one category is needed"},
      {"bumps: [{words: [夜宵], peak: '25:00'}]\n", "field 'bumps[0].peak': expected a local time"},
      {"lexicon: {pos: [好], neg: [好], neu: [x], adjectives: [y], emoji: [z]}\n",
       "'好' is both a positive and a negative word"},
      {"templates: {background: ['{nope}'], event: [a], spam: [a], repost: [a], evergreen: [a], "
       "bump: [a]}\n",
       "field 'templates.background[0]': template \"{nope}\": unknown slot '{nope}'"},
  };
  for (const auto& c : cases) {
    Status st = ParseError(c.yaml);
    ASSERT_FALSE(st.ok()) << c.yaml;
    EXPECT_TRUE(Contains(st.message(), c.want)) << c.yaml;
  }
}

TEST(ScenarioTest, EventErrors) {
  const std::string head = "events:\n  - {id: a, phrase: 新词测试事件, terms: [比赛], ";
  struct Case {
    std::string yaml;
    const char* want;
  };
  const Case cases[] = {
      {head + "category: 体育, peak_per_minute: 10}\n", "field 'events[0].onset': required"},
      {head + "category: 天气, onset: 1m, peak_per_minute: 10}\n",
       "field 'events[0].category': unknown category '天气' (categories: 科技"},
      {head + "category: 体育, onset: 31m, peak_per_minute: 10}\n",
       "is not before the end of the scenario"},
      {head + "category: 体育, onset: 1m, peak_per_minute: 10, shape: square}\n",
       "expected gamma or lognormal, got 'square'"},
      {head + "category: 体育, onset: 1m, peak_per_minute: 10}\n" +
           "  - {id: a, phrase: 另一个新事件, terms: [比赛], category: 体育, onset: 1m, "
           "peak_per_minute: 5}\n",
       "event id 'a' is used twice"},
      {head + "category: 体育, onset: 1m, peak_per_minute: 10, terms: []}\n",
       "bad.yaml:2:88: field 'events[0].terms' is given twice"},
      {head + "category: 体育, onset: 1m}\n", "give exactly one of peak_per_minute"},
      {head + "category: 体育, onset: 1m, peak_per_minute: 5, peak_share: 0.1}\n",
       "give exactly one of peak_per_minute"},
      {head + "category: 体育, onset: 1m, peak_share: 0}\n",
       "field 'events[0].peak_share': 0 is out of range"},
  };
  for (const auto& c : cases) {
    Status st = ParseError(c.yaml);
    ASSERT_FALSE(st.ok()) << c.yaml;
    EXPECT_TRUE(Contains(st.message(), c.want)) << c.yaml;
  }
}

TEST(ScenarioTest, SpamErrors) {
  Status st = ParseError(
      "spam:\n  - {id: s, phrase: 刷量口号测试, terms: [投票], category: 娱乐, start: 5m, end: 2m, "
      "per_minute: 10}\n");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "bad.yaml:2:"));
  EXPECT_TRUE(Contains(st.message(), "field 'spam[0].end': a campaign must end after it starts"));
  st = ParseError(
      "spam:\n  - {id: e01, phrase: 刷量口号测试, terms: [投票], category: 娱乐, start: 1m, "
      "end: 2m, per_minute: 10}\n");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "'e01' is already used"));
}

TEST(ScenarioTest, MissingFileIsNotFound) {
  auto s = LoadScenario("/nonexistent/dir/scenario.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(s.status().message(), "/nonexistent/dir/scenario.yaml"));
}

TEST(ScenarioTest, NonMappingFile) {
  Status st = ParseError("- just\n- a list\n");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "a scenario must be a mapping"));
}

TEST(ScenarioTest, ExampleScenarioFilesParse) {
  const std::filesystem::path dir =
      std::filesystem::path(SURGE_SOURCE_DIR) / "src/stream/sim/scenarios";
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    auto s = LoadScenario(entry.path().string());
    EXPECT_TRUE(s.ok()) << entry.path() << ": " << s.status().ToString();
    ++n;
  }
  EXPECT_GE(n, 2u);
}

TEST(ScenarioTest, OverridesDropWhatStartsAfterTheEnd) {
  auto s = DefaultScenario();
  ASSERT_TRUE(s.ok());
  ScenarioOverrides o;
  o.seed = 9;
  o.duration_ms = 6 * 60000;
  o.rate_per_min = 100;
  auto dropped = ApplyOverrides(o, &*s);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(s->seed, 9u);
  EXPECT_EQ(s->duration_ms, 6 * 60000);
  EXPECT_EQ(s->rate_per_min, 100);
  for (const auto& e : s->events) EXPECT_LT(e.onset_ms, s->duration_ms) << e.id;
  EXPECT_FALSE(dropped->empty());
  o = {};
  o.duration_ms = 10;
  EXPECT_FALSE(ApplyOverrides(o, &*s).ok());
}

TEST(PostTemplateTest, CompilesSlotsAndBraces) {
  auto t = CompileTemplate("{phrase}，{{x}}{term}!");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->pieces.size(), 4u);
  EXPECT_EQ(t->pieces[0].slot, Slot::kPhrase);
  EXPECT_EQ(t->pieces[1].text, "，{x}");
  EXPECT_EQ(t->pieces[2].slot, Slot::kTerm);
  EXPECT_TRUE(t->HasSlot(Slot::kTerm));
  EXPECT_FALSE(t->HasSlot(Slot::kNoun));
  EXPECT_FALSE(CompileTemplate("{open").ok());
  EXPECT_FALSE(CompileTemplate("close}").ok());
  EXPECT_FALSE(CompileTemplate("").ok());
  EXPECT_TRUE(Contains(CompileTemplate("{Noun}").status().message(), "known: noun, general"));
}

}  // namespace
}  // namespace surge::stream::sim
