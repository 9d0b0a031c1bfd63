// The stream generator: turns a Scenario into posts, in timestamp order, deterministically for a
// seed, one simulated second at a time (so a pipeline can consume it in-process, no file).
//
// Model (docs/stream-sim.md has the details):
//  * Background: rate_per_minute x diurnal(t) x a slow log-normal jitter; each post picks a
//    category (weights jittered per minute), a sentiment from the category's mix and a template
//    filled from the category's words, general nouns, verbs and adverbs; evergreen clauses and
//    daily-cycle bump clauses are added with their shares. A share of posts repost a recent
//    post ("comment//@用户N:original").
//  * Events: rate peak_per_minute x f(t), f rising from 0 at onset to 1 at the peak (gamma
//    x^k e^{k(1-x)} or log-normal) and decaying exponentially with half_life; posts carry the
//    event's phrase (phrase_share of {phrase} slots, else a key term), its terms and category
//    words; the first three come from verified accounts, later ones from the whole population
//    (organic, diverse authors); a share are reposts of earlier event posts with a short comment.
//  * Spam: bursts (on/off) of near-identical template posts from a ring of young, low-follower,
//    unverified bot accounts pushing the campaign's phrase; bots repost each other.
//  * Engagement (likes, comments, reposts) grows with followers^0.75 and with event heat.
//
// Post ids are "p1", "p2", … in timestamp order; a repost's repost_of always names an earlier
// post. User ids are "u" + 10 digits (bots look like everyone else).
//
// Thread safety: a Generator is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "stream/eval/truth.h"
#include "stream/post.h"
#include "stream/sim/scenario.h"

namespace surge::stream::sim {

enum class SentimentLabel { kPos, kNeu, kNeg };
std::string_view SentimentLabelName(SentimentLabel s);  // "pos", "neu", "neg"

enum class KeywordKind { kPhrase, kTerm, kTopic };
std::string_view KeywordKindName(KeywordKind k);  // "phrase", "term", "topic"

// A keyword span: bytes [begin, end) of the post text.
struct KeywordSpan {
  uint32_t begin = 0;
  uint32_t end = 0;
  KeywordKind kind = KeywordKind::kTopic;
};

// What the generator knows about a post (for training and tests).
//  * category: the scenario category the text was written in (index into categories); the text
//    holds at least one word of that category.
//  * sentiment: pos posts hold at least one lexicon.pos word and no lexicon.neg word; neg the
//    reverse; neu posts hold neither.
//  * keywords: every span of the event/spam phrase (kPhrase) and key terms (kTerm) in the text,
//    and the category words (kTopic) that templates placed.
struct PostLabel {
  int category = 0;
  SentimentLabel sentiment = SentimentLabel::kNeu;
  int event = -1;  // index into scenario.events, or -1
  int spam = -1;   // index into scenario.spam, or -1
  bool repost = false;
  std::vector<KeywordSpan> keywords;
};

struct SimPost {
  Post post;
  PostLabel label;
};

class Generator {
 public:
  // Builds the vocabulary and user population. Errors: unreadable dictionary, an event phrase
  // that is a single dictionary word, empty word pools.
  static Result<std::unique_ptr<Generator>> Create(const Scenario& scenario);
  ~Generator();

  // The next post in timestamp order; false once the scenario is over.
  bool Next(SimPost* out);
  // Replaces `out` with the posts of the next simulated second (possibly none); false once the
  // scenario is over (then `out` is empty).
  bool NextBatch(std::vector<SimPost>* out);

  const Scenario& scenario() const;
  // The ground truth. The schedule (onset, peak, end, expected_posts) is known from the start;
  // posts and authors count what has been generated so far (final once Next returned false).
  eval::Truth truth() const;
  int64_t posts_generated() const;
  // Simulated time up to which posts have been produced (ms since the epoch).
  int64_t now_ms() const;

  // Rates in posts per minute at time `t_ms` (for tests and docs): background without jitter,
  // and one event's or campaign's configured curve.
  double BackgroundRate(int64_t t_ms) const;
  double EventRate(size_t event, int64_t t_ms) const;
  double SpamRate(size_t campaign, int64_t t_ms) const;

  struct Impl;

 private:
  explicit Generator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One label line (JSON, no newline):
// {"id":"p1","category":"科技","sentiment":"pos","event":"e01","spam":null,"repost":false,
//  "keywords":[{"start":0,"end":14,"kind":"phrase","text":"AI推理革命"}]}
// start/end are byte offsets into the post's text.
void AppendLabelJson(const SimPost& post, const Scenario& scenario, std::string* out);

}  // namespace surge::stream::sim
