// The generator: determinism, order, the wire format, and the statistical shape of what it makes
// (bursts, spam rings, the diurnal cycle, bumps, labels that agree with the text).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <unordered_set>

#include "sim_test_util.h"
#include "stream/post.h"
#include "stream/sim/generator.h"
#include "text/segmenter.h"

namespace surge::stream::sim {
namespace {

using testutil::Contains;

const std::string kScenarios = std::string(SURGE_SOURCE_DIR) + "/src/stream/sim/scenarios/";

Scenario Load(const std::string& name) {
  auto s = LoadScenario(kScenarios + name);
  SURGE_CHECK(s.ok(), "{}", s.status().ToString());
  return *s;
}

std::vector<SimPost> GenerateAll(const Scenario& s) {
  auto g = Generator::Create(s);
  SURGE_CHECK(g.ok(), "{}", g.status().ToString());
  std::vector<SimPost> all;
  SimPost p;
  while ((*g)->Next(&p)) all.push_back(std::move(p));
  return all;
}

// One small scenario generated once for the tests that only read it.
class SmallStream : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scenario_ = new Scenario(Load("small.yaml"));
    auto g = Generator::Create(*scenario_);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    posts_ = new std::vector<SimPost>();
    SimPost p;
    while ((*g)->Next(&p)) posts_->push_back(std::move(p));
    truth_ = new eval::Truth((*g)->truth());
    generator_ = g->release();
  }
  static void TearDownTestSuite() {
    delete posts_;
    delete truth_;
    delete generator_;
    delete scenario_;
  }
  static Scenario* scenario_;
  static std::vector<SimPost>* posts_;
  static eval::Truth* truth_;
  static Generator* generator_;
};
Scenario* SmallStream::scenario_ = nullptr;
std::vector<SimPost>* SmallStream::posts_ = nullptr;
eval::Truth* SmallStream::truth_ = nullptr;
Generator* SmallStream::generator_ = nullptr;

TEST_F(SmallStream, TimestampsOrderedIdsSequentialRepostsPointBack) {
  ASSERT_GT(posts_->size(), 10000u);
  std::unordered_set<std::string> seen;
  int64_t prev = scenario_->start_ms;
  int64_t reposts = 0;
  for (size_t i = 0; i < posts_->size(); ++i) {
    const Post& p = (*posts_)[i].post;
    ASSERT_GE(p.ts_ms, prev);
    ASSERT_LT(p.ts_ms, scenario_->start_ms + scenario_->duration_ms);
    prev = p.ts_ms;
    ASSERT_EQ(p.id, "p" + std::to_string(i + 1));
    if (p.repost_of) {
      ++reposts;
      ASSERT_TRUE(seen.count(*p.repost_of)) << p.id << " reposts unseen " << *p.repost_of;
      ASSERT_TRUE(Contains(p.text, "//@用户"));
    }
    seen.insert(p.id);
  }
  EXPECT_GT(reposts, static_cast<int64_t>(posts_->size() / 10));
  EXPECT_EQ(truth_->posts, static_cast<int64_t>(posts_->size()));
}

TEST_F(SmallStream, PostsRoundTripThroughTheWireFormat) {
  PostParser parser;
  for (size_t i = 0; i < posts_->size(); i += 7) {
    const Post& p = (*posts_)[i].post;
    auto back = parser.Parse(PostToJson(p));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->id, p.id);
    EXPECT_EQ(back->ts_ms, p.ts_ms);
    EXPECT_EQ(back->text, p.text);
    EXPECT_EQ(back->user.id, p.user.id);
    EXPECT_EQ(back->user.followers, p.user.followers);
    EXPECT_EQ(back->user.verified, p.user.verified);
    EXPECT_EQ(back->user.created_ms, p.user.created_ms);
    EXPECT_EQ(back->repost_of, p.repost_of);
    EXPECT_EQ(back->likes, p.likes);
    EXPECT_GE(p.user.created_ms, 0);
    EXPECT_LT(p.user.created_ms, p.ts_ms);
  }
}

TEST(GeneratorTest, DeterministicForASeed) {
  Scenario s = Load("small.yaml");
  s.duration_ms = 3 * 60000;
  const auto a = GenerateAll(s);
  const auto b = GenerateAll(s);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(PostToJson(a[i].post), PostToJson(b[i].post));
  s.seed += 1;
  const auto c = GenerateAll(s);
  size_t same = 0;
  for (size_t i = 0; i < std::min(a.size(), c.size()); ++i) {
    same += PostToJson(a[i].post) == PostToJson(c[i].post);
  }
  EXPECT_LT(same, a.size() / 100);
}

TEST(GeneratorTest, NextBatchGivesTheSameStreamAsNext) {
  Scenario s = Load("small.yaml");
  s.duration_ms = 2 * 60000;
  const auto a = GenerateAll(s);
  auto g = Generator::Create(s);
  ASSERT_TRUE(g.ok());
  std::vector<SimPost> batch, b;
  int64_t batches = 0;
  while ((*g)->NextBatch(&batch)) {
    ++batches;
    for (auto& p : batch) b.push_back(std::move(p));
  }
  EXPECT_EQ(batches, 120);  // one per simulated second
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(PostToJson(a[i].post), PostToJson(b[i].post));
}

TEST_F(SmallStream, EventPostsRiseAndFallAsConfigured) {
  // e1: onset 2m, rise 2m (peak at 4m), half-life 2m, 200 posts/minute at the peak.
  const size_t e = 0;
  const auto& spec = scenario_->events[e];
  const int64_t start = scenario_->start_ms;
  EXPECT_DOUBLE_EQ(generator_->EventRate(e, start + spec.onset_ms), 0);
  EXPECT_NEAR(generator_->EventRate(e, start + 4 * 60000), 200, 1e-9);
  EXPECT_NEAR(generator_->EventRate(e, start + 6 * 60000), 100, 1e-9);
  EXPECT_GT(generator_->EventRate(e, start + 3 * 60000), generator_->EventRate(e, start + 150000));
  std::vector<int64_t> per_half_minute(16, 0);
  for (const auto& p : *posts_) {
    if (p.label.event != 0) continue;
    ASSERT_GE(p.post.ts_ms, start + spec.onset_ms);
    ++per_half_minute[(p.post.ts_ms - start) / 30000];
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(per_half_minute[i], 0) << "before onset, slot " << i;
  const auto peak_slot =
      std::max_element(per_half_minute.begin(), per_half_minute.end()) - per_half_minute.begin();
  EXPECT_GE(peak_slot, 6);  // 3:00 .. 4:59
  EXPECT_LE(peak_slot, 9);
  EXPECT_LT(per_half_minute[4], per_half_minute[7] / 2);     // rising
  EXPECT_LT(per_half_minute[15], per_half_minute[8] * 0.6);  // decaying
  // Generated counts follow the configured integral.
  for (const auto& te : truth_->events) {
    EXPECT_NEAR(static_cast<double>(te.posts), te.expected_posts,
                4 * std::sqrt(te.expected_posts) + 5)
        << te.id;
    EXPECT_GT(te.authors, te.posts * 0.8) << te.id << ": event authors should be diverse";
  }
  EXPECT_EQ(truth_->events[0].peak_ms - truth_->events[0].onset_ms, 2 * 60000);
}

TEST_F(SmallStream, SpamComesFromYoungLowFollowerUnverifiedBotsInBursts) {
  const auto& spec = scenario_->spam[0];
  const int64_t start = scenario_->start_ms;
  std::unordered_set<std::string> bots, ordinary;
  int64_t spam_posts = 0;
  std::vector<int64_t> per_minute(8, 0);
  double ordinary_age_days = 0;
  int64_t ordinary_n = 0;
  for (const auto& p : *posts_) {
    const double age_days = static_cast<double>(p.post.ts_ms - p.post.user.created_ms) / 86400000;
    if (p.label.spam < 0) {
      ordinary.insert(p.post.user.id);
      ordinary_age_days += age_days;
      ++ordinary_n;
      continue;
    }
    ++spam_posts;
    ++per_minute[(p.post.ts_ms - start) / 60000];
    bots.insert(p.post.user.id);
    EXPECT_FALSE(p.post.user.verified);
    EXPECT_LE(p.post.user.followers, spec.max_followers);
    EXPECT_LE(age_days, spec.max_age_days + 0.01);
    EXPECT_TRUE(Contains(p.post.text, spec.phrase));
  }
  EXPECT_GT(spam_posts, 500);
  EXPECT_LE(static_cast<int64_t>(bots.size()), spec.bots);
  EXPECT_GT(static_cast<double>(spam_posts) / static_cast<double>(bots.size()), 3.0);
  for (const auto& b : bots) EXPECT_FALSE(ordinary.count(b)) << b;
  EXPECT_GT(ordinary_age_days / static_cast<double>(ordinary_n), 365);
  // on 1m, off 1m from 1m to 7m: minutes 1, 3, 5 on; 0, 2, 4, 6, 7 off.
  for (int m : {0, 2, 4, 6, 7}) EXPECT_EQ(per_minute[m], 0) << "minute " << m;
  for (int m : {1, 3, 5}) EXPECT_GT(per_minute[m], 200) << "minute " << m;
  EXPECT_EQ(truth_->spam[0].posts, spam_posts);
}

TEST_F(SmallStream, LabelsAgreeWithTheText) {
  const Lexicon& lex = scenario_->lexicon;
  auto has_any = [](const std::string& text, const std::vector<std::string>& words) {
    return std::any_of(words.begin(), words.end(),
                       [&](const std::string& w) { return text.find(w) != std::string::npos; });
  };
  std::map<int, int64_t> event_posts;
  for (const auto& sp : *posts_) {
    const std::string& text = sp.post.text;
    const PostLabel& l = sp.label;
    switch (l.sentiment) {
      case SentimentLabel::kPos:
        ASSERT_TRUE(has_any(text, lex.pos)) << text;
        ASSERT_FALSE(has_any(text, lex.neg)) << text;
        break;
      case SentimentLabel::kNeg:
        ASSERT_TRUE(has_any(text, lex.neg)) << text;
        ASSERT_FALSE(has_any(text, lex.pos)) << text;
        break;
      case SentimentLabel::kNeu:
        ASSERT_FALSE(has_any(text, lex.pos)) << text;
        ASSERT_FALSE(has_any(text, lex.neg)) << text;
        break;
    }
    bool has_topic_word = false;
    for (const auto& k : l.keywords) {
      ASSERT_LE(k.end, text.size());
      ASSERT_LT(k.begin, k.end);
      const std::string span = text.substr(k.begin, k.end - k.begin);
      if (k.kind == KeywordKind::kTopic) has_topic_word = true;
      if (k.kind == KeywordKind::kPhrase) {
        ASSERT_TRUE(l.event >= 0 || l.spam >= 0);
        ASSERT_EQ(span, l.event >= 0 ? scenario_->events[l.event].phrase
                                     : scenario_->spam[l.spam].phrase);
      }
      if (k.kind == KeywordKind::kTerm) {
        const auto& terms =
            l.event >= 0 ? scenario_->events[l.event].terms : scenario_->spam[l.spam].terms;
        ASSERT_NE(std::find(terms.begin(), terms.end(), span), terms.end()) << span;
      }
    }
    if (l.event >= 0) {
      ++event_posts[l.event];
      const auto& e = scenario_->events[l.event];
      ASSERT_TRUE(text.find(e.phrase) != std::string::npos || has_any(text, e.terms)) << text;
      ASSERT_EQ(scenario_->categories[l.category].name, e.category);
    } else if (l.spam < 0 && !l.repost) {
      ASSERT_TRUE(has_topic_word) << "background post without a category word: " << text;
    }
    ASSERT_EQ(l.repost, sp.post.repost_of.has_value());
  }
  for (size_t e = 0; e < truth_->events.size(); ++e) {
    EXPECT_EQ(event_posts[static_cast<int>(e)], truth_->events[e].posts);
  }
}

TEST_F(SmallStream, EventCopiesAreEarlierTextsWithASmallEdit) {
  std::unordered_set<std::string> originals;
  std::vector<std::string> edits = scenario_->lexicon.emoji;
  edits.insert(edits.end(), scenario_->lexicon.pos.begin(), scenario_->lexicon.pos.end());
  edits.insert(edits.end(), scenario_->lexicon.neg.begin(), scenario_->lexicon.neg.end());
  int64_t copies = 0;
  for (const auto& p : *posts_) {
    if (p.label.event < 0 || p.label.repost) continue;
    if (!p.label.copy) {
      originals.insert(p.post.text);
      continue;
    }
    ++copies;
    EXPECT_FALSE(p.post.repost_of.has_value());
    bool found = originals.count(p.post.text) > 0;  // the edit may have been dropped
    for (const auto& e : edits) {
      const std::string& t = p.post.text;
      if (t.size() > e.size() && t.compare(t.size() - e.size(), e.size(), e) == 0) {
        found = found || originals.count(t.substr(0, t.size() - e.size())) > 0;
      }
    }
    EXPECT_TRUE(found) << p.post.text;
  }
  EXPECT_GT(copies, 20);
}

TEST_F(SmallStream, EngagementGrowsWithFollowers) {
  double small_likes = 0, big_likes = 0;
  int64_t small_n = 0, big_n = 0;
  for (const auto& p : *posts_) {
    if (p.post.user.followers < 100) {
      small_likes += static_cast<double>(p.post.likes);
      ++small_n;
    } else if (p.post.user.followers > 10000) {
      big_likes += static_cast<double>(p.post.likes);
      ++big_n;
    }
  }
  ASSERT_GT(small_n, 100);
  ASSERT_GT(big_n, 20);
  EXPECT_GT(big_likes / big_n, 10 * small_likes / small_n);
}

TEST_F(SmallStream, LabelLinesAreJson) {
  std::string line;
  const SimPost* event_post = nullptr;
  for (const auto& p : *posts_) {
    if (p.label.event >= 0 && !p.label.keywords.empty()) {
      event_post = &p;
      break;
    }
  }
  ASSERT_NE(event_post, nullptr);
  AppendLabelJson(*event_post, *scenario_, &line);
  EXPECT_TRUE(Contains(line, "{\"id\":\"" + event_post->post.id + "\",\"category\":\""));
  EXPECT_TRUE(Contains(line, "\"event\":\"" + scenario_->events[event_post->label.event].id));
  EXPECT_TRUE(Contains(line, "\"keywords\":[{\"start\":"));
}

TEST(GeneratorTest, DiurnalCycleAndDailyBumps) {
  Scenario s = Load("day.yaml");
  s.rate_per_min = 150;
  auto g = Generator::Create(s);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::vector<double> per_hour(24, 0);
  double evening = 0, evening_hits = 0, day = 0, day_hits = 0;
  std::vector<SimPost> batch;
  while ((*g)->NextBatch(&batch)) {
    for (const auto& p : batch) {
      const int64_t minute = (p.post.ts_ms - s.start_ms) / 60000;  // day.yaml starts at 00:00
      per_hour[minute / 60] += 1;
      const bool hit = p.post.text.find("夜宵") != std::string::npos ||
                       p.post.text.find("烤串") != std::string::npos;
      if (minute >= 20 * 60 + 35 && minute < 21 * 60 + 25) {
        evening += 1;
        evening_hits += hit;
      } else if (minute >= 10 * 60 && minute < 14 * 60) {
        day += 1;
        day_hits += hit;
      }
    }
  }
  // Each hour's expected share: the mean of the linear interpolation over the hour.
  std::vector<double> want(24);
  for (size_t h = 0; h < 24; ++h) want[h] = (s.diurnal[h] + s.diurnal[(h + 1) % 24]) / 2;
  const double mean_got = std::accumulate(per_hour.begin(), per_hour.end(), 0.0) / 24;
  const double mean_want = std::accumulate(want.begin(), want.end(), 0.0) / 24;
  double cov = 0, vg = 0, vw = 0;
  for (size_t h = 0; h < 24; ++h) {
    cov += (per_hour[h] - mean_got) * (want[h] - mean_want);
    vg += (per_hour[h] - mean_got) * (per_hour[h] - mean_got);
    vw += (want[h] - mean_want) * (want[h] - mean_want);
  }
  EXPECT_GT(cov / std::sqrt(vg * vw), 0.98);
  EXPECT_GT(per_hour[21], 4 * per_hour[4]);
  // The 21:00 bump (x1.8 at its peak, about x1.6 over 20:35-21:25) lifts its words' share
  // against the middle of the day.
  ASSERT_GT(day_hits, 100);
  EXPECT_GT(evening_hits / evening, 1.3 * day_hits / day);
}

TEST(GeneratorTest, EventPhrasesAreNotOneJiebaWord) {
  auto seg = text::Segmenter::Create();
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  auto s = DefaultScenario();
  ASSERT_TRUE(s.ok());
  for (const auto& e : s->events) {
    EXPECT_GE((*seg)->LCut(e.phrase).size(), 2u) << e.phrase;
    for (const auto& t : e.terms) EXPECT_EQ(e.phrase.find(t), std::string::npos) << t;
  }
}

TEST(GeneratorTest, PeakShareScalesWithTheBackgroundRate) {
  Scenario s = Load("small.yaml");
  s.events[0].peak_share = 0.05;
  for (double rate : {2000.0, 8000.0}) {
    s.rate_per_min = rate;
    auto g = Generator::Create(s);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const int64_t peak = s.start_ms + s.events[0].onset_ms + s.events[0].rise_ms;
    const double want = 0.05 * (*g)->BackgroundRate(peak);
    EXPECT_NEAR((*g)->EventRate(0, peak), want, 1e-9);
    EXPECT_NEAR((*g)->truth().events[0].peak_per_min, want, 1e-9);
    EXPECT_NEAR(want, 0.05 * rate * 0.97, 0.05 * rate * 0.02);  // diurnal ~0.97 at 20:04
  }
}

TEST(GeneratorTest, RejectsADictionaryWordAsEventPhrase) {
  Scenario s = Load("small.yaml");
  s.events[0].phrase = "比赛";
  auto g = Generator::Create(s);
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(Contains(g.status().message(), "phrase '比赛' is a word of the dictionary"));
}

TEST(GeneratorTest, RejectsSentimentWordsInTemplateText) {
  Scenario s = Load("small.yaml");
  s.templates.event.push_back("{phrase}太棒了");
  auto g = Generator::Create(s);
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(Contains(g.status().message(), "contains the sentiment word '太棒了'"));
}

TEST(GeneratorTest, RejectsSentimentWordsInsideScenarioWords) {
  Scenario s = Load("small.yaml");
  s.categories[4].seed_words.push_back("垃圾分类");
  auto g = Generator::Create(s);
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(Contains(g.status().message(), "'垃圾分类' contains the sentiment word '垃圾'"));
}

TEST(GeneratorTest, MissingDictionaryIsAnError) {
  Scenario s = Load("small.yaml");
  s.dict_path = "/nonexistent/dict.txt";
  auto g = Generator::Create(s);
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(Contains(g.status().ToString(), "/nonexistent/dict.txt"));
}

}  // namespace
}  // namespace surge::stream::sim
