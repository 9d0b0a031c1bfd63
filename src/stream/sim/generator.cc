#include "stream/sim/generator.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "stream/sim/post_template.h"
#include "stream/sim/random.h"
#include "stream/sim/vocabulary.h"
#include "text/utf8.h"

namespace surge::stream::sim {
namespace {

constexpr int64_t kTickMs = 1000;
constexpr int64_t kMinuteMs = 60000;
constexpr int64_t kDayMs = 86400000;
constexpr size_t kRingSize = 256;
constexpr int kVerifiedSources = 3;  // an event's first posts come from verified accounts

// Stream numbers for MixSeed: each part of the model draws from its own sequence.
enum RngStream : uint64_t { kUsersStream = 1, kNoiseStream, kPostsStream, kBurstStream };

// A post kept for reposting.
struct RingEntry {
  std::string id;
  std::string text;
  uint32_t author = 0;
  int64_t likes = 0;
  PostLabel label;
};

class Ring {
 public:
  void Push(RingEntry e) {
    if (entries_.size() < kRingSize) {
      entries_.push_back(std::move(e));
    } else {
      entries_[next_] = std::move(e);
    }
    next_ = (next_ + 1) % kRingSize;
  }
  bool empty() const { return entries_.empty(); }
  // Preferential choice: the most-liked of three random recent posts.
  const RingEntry& Pick(Rng& rng) const {
    const RingEntry* best = &entries_[rng.Below(entries_.size())];
    for (int i = 0; i < 2; ++i) {
      const RingEntry* e = &entries_[rng.Below(entries_.size())];
      if (e->likes > best->likes) best = e;
    }
    return *best;
  }

 private:
  std::vector<RingEntry> entries_;
  size_t next_ = 0;
};

struct UserRec {
  std::string id;
  std::string nick_digits;  // "用户" + this is the screen name
  int64_t followers = 0;
  int64_t created_ms = 0;
  bool verified = false;
};

// Where a post's words come from.
struct FillContext {
  int category = 0;
  SentimentLabel sentiment = SentimentLabel::kNeu;
  const std::string* phrase = nullptr;
  const std::vector<std::string>* terms = nullptr;
  double phrase_share = 1.0;
  int bump = -1;
};

}  // namespace

std::string_view SentimentLabelName(SentimentLabel s) {
  switch (s) {
    case SentimentLabel::kPos:
      return "pos";
    case SentimentLabel::kNeu:
      return "neu";
    case SentimentLabel::kNeg:
      return "neg";
  }
  return "neu";
}

std::string_view KeywordKindName(KeywordKind k) {
  switch (k) {
    case KeywordKind::kPhrase:
      return "phrase";
    case KeywordKind::kTerm:
      return "term";
    case KeywordKind::kTopic:
      return "topic";
  }
  return "topic";
}

struct Generator::Impl {
  Scenario s;
  Vocabulary vocab;
  Rng rng;
  std::vector<PostTemplate> bg_t, ev_t, repost_t, evergreen_t, bump_t;
  std::vector<std::vector<PostTemplate>> spam_t;  // per campaign
  std::vector<int> event_category, spam_category;

  std::vector<UserRec> users;  // ordinary accounts, then each campaign's bots
  AliasTable activity;         // over ordinary accounts
  std::vector<uint32_t> verified;
  std::vector<std::pair<uint32_t, uint32_t>> bots;  // per campaign [begin, end)

  int64_t start_ms = 0, end_ms = 0, next_tick_ms = 0;
  std::vector<double> bg_noise;                // per minute boundary, log factor
  std::vector<std::vector<double>> cat_noise;  // [minute][category], log factor
  int64_t cat_table_minute = -1;
  AliasTable cat_table;

  struct EventState {
    int64_t onset = 0, peak = 0, end = 0;
    double expected = 0;
    int64_t posts = 0, authors = 0, sources = 0;
    std::vector<uint8_t> seen;
    Ring ring;
  };
  struct SpamState {
    int64_t start = 0, end = 0;
    double expected = 0;
    int64_t posts = 0;
    Ring ring;
  };
  std::vector<EventState> events;
  std::vector<SpamState> spam;
  Ring bg_ring;

  // Lexicon words by length in code points, for the boundary check (see Append).
  std::vector<std::unordered_set<std::string>> lexicon_by_len;
  size_t lexicon_max_len = 0;

  std::vector<SimPost> tick;  // posts of the current tick, in order
  size_t tick_pos = 0;
  std::vector<SimPost> scratch;
  std::vector<uint32_t> scratch_author;  // user index of scratch[i]
  int64_t seq = 0;
  bool done = false;

  // ---- rates (posts per minute) ----

  double Diurnal(int64_t t) const {
    int64_t local = (t + s.utc_offset_minutes * kMinuteMs) % kDayMs;
    if (local < 0) local += kDayMs;
    const double hour = static_cast<double>(local) / 3600000.0;
    const int h0 = static_cast<int>(hour) % 24;
    const double frac = hour - std::floor(hour);
    return s.diurnal[h0] * (1 - frac) + s.diurnal[(h0 + 1) % 24] * frac;
  }

  double NoiseAt(const std::vector<double>& series, int64_t t) const {
    const double m = static_cast<double>(t - start_ms) / kMinuteMs;
    const size_t i =
        static_cast<size_t>(std::clamp(m, 0.0, static_cast<double>(series.size() - 1)));
    const size_t j = std::min(i + 1, series.size() - 1);
    const double f = std::clamp(m - static_cast<double>(i), 0.0, 1.0);
    return std::exp(series[i] * (1 - f) + series[j] * f);
  }

  double BackgroundRate(int64_t t) const { return s.rate_per_min * Diurnal(t); }

  double EventCurve(size_t e, int64_t t) const {
    const EventSpec& spec = s.events[e];
    const EventState& st = events[e];
    if (t <= st.onset) return 0;
    if (t <= st.peak) {
      const double x = static_cast<double>(t - st.onset) / static_cast<double>(spec.rise_ms);
      if (spec.shape == RiseShape::kGamma) {
        const double k = spec.shape_param;
        return std::pow(x, k) * std::exp(k * (1 - x));
      }
      const double sg = spec.shape_param, sg2 = sg * sg;
      const double lx = std::log(x) - sg2;
      return std::exp(-lx * lx / (2 * sg2) + sg2 / 2) / x;
    }
    return std::exp(-M_LN2 * static_cast<double>(t - st.peak) /
                    static_cast<double>(spec.half_life_ms));
  }

  double EventRate(size_t e, int64_t t) const {
    return s.events[e].peak_per_min * EventCurve(e, t);
  }

  double SpamRate(size_t c, int64_t t) const {
    const SpamSpec& spec = s.spam[c];
    const int64_t rel = t - start_ms;
    if (rel < spec.start_ms || rel >= spec.end_ms) return 0;
    const int64_t period = spec.on_ms + spec.off_ms;
    const int64_t phase = (rel - spec.start_ms) % period;
    if (phase >= spec.on_ms) return 0;
    // Bursts differ in strength (deterministic per burst).
    uint64_t h =
        MixSeed(s.seed ^ (c * 0x9E37u), kBurstStream + 16 * ((rel - spec.start_ms) / period));
    Rng r(h);
    return spec.per_min * std::exp(0.25 * r.Normal());
  }

  // ---- text ----

  // True when appending `next` to `text` would form a lexicon word across the boundary.
  bool CrossesLexicon(const std::string& text, std::string_view next) const {
    if (lexicon_max_len < 2 || text.empty() || next.empty()) return false;
    // Up to max_len-1 code points on each side.
    size_t tail_start[8];
    size_t nt = 0;
    for (size_t p = text.size(); p > 0 && nt < lexicon_max_len - 1;) {
      --p;
      while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
      tail_start[nt++] = p;
    }
    size_t head_end[8];
    size_t nh = 0;
    for (size_t p = 0; p < next.size() && nh < lexicon_max_len - 1;) {
      p += text::DecodeUtf8At(next, p).length;
      head_end[nh++] = p;
    }
    std::string cand;
    for (size_t a = 1; a <= nt; ++a) {
      for (size_t b = 1; b <= nh && a + b <= lexicon_max_len; ++b) {
        const auto& set = lexicon_by_len[a + b];
        if (set.empty()) continue;
        cand.assign(text, tail_start[a - 1], std::string::npos);
        cand.append(next.substr(0, head_end[b - 1]));
        if (set.count(cand)) return true;
      }
    }
    return false;
  }

  const std::string& SentimentWord(SentimentLabel l) {
    switch (l) {
      case SentimentLabel::kPos:
        return vocab.pos.Draw(rng);
      case SentimentLabel::kNeg:
        return vocab.neg.Draw(rng);
      default:
        return vocab.neu.Draw(rng);
    }
  }

  void AppendUser(std::string* out) {
    out->append("@用户");
    out->append(users[activity.Draw(rng)].nick_digits);
  }

  // Draws the word for one slot (empty for slots that have nothing to give).
  std::string_view SlotWord(Slot slot, const FillContext& c, KeywordKind* kind, bool* keyword,
                            std::string* tmp, const std::string** last_term) {
    *keyword = false;
    switch (slot) {
      case Slot::kNoun:
        *keyword = true;
        *kind = KeywordKind::kTopic;
        return vocab.category[c.category].Draw(rng);
      case Slot::kGeneral:
        return vocab.general.Draw(rng);
      case Slot::kVerb:
        return vocab.verbs.Draw(rng);
      case Slot::kAdv:
        return vocab.adverbs.Draw(rng);
      case Slot::kAdj:
        return vocab.adjectives.Draw(rng);
      case Slot::kEvergreen:
        return vocab.evergreen.empty() ? std::string_view() : vocab.evergreen.Draw(rng);
      case Slot::kBump:
        return c.bump >= 0 ? vocab.bumps[c.bump].Draw(rng) : std::string_view();
      case Slot::kSentiment:
        return SentimentWord(c.sentiment);
      case Slot::kPhrase:
        if (c.phrase != nullptr && (c.terms == nullptr || rng.Bernoulli(c.phrase_share))) {
          *keyword = true;
          *kind = KeywordKind::kPhrase;
          return *c.phrase;
        }
        [[fallthrough]];
      case Slot::kTerm: {
        if (c.terms == nullptr || c.terms->empty()) {
          *keyword = true;
          *kind = KeywordKind::kTopic;
          return vocab.category[c.category].Draw(rng);
        }
        const std::string* t = &(*c.terms)[rng.Below(c.terms->size())];
        if (t == *last_term && c.terms->size() > 1) t = &(*c.terms)[rng.Below(c.terms->size())];
        *last_term = t;
        *keyword = true;
        *kind = KeywordKind::kTerm;
        return *t;
      }
      case Slot::kEmoji:
        return vocab.emoji.Draw(rng);
      case Slot::kUser:
        tmp->clear();
        AppendUser(tmp);
        return *tmp;
      case Slot::kNum:
        *tmp = std::to_string(rng.Bernoulli(0.2) ? 2000 + rng.Below(27) : 1 + rng.Below(99));
        return *tmp;
      case Slot::kRand: {
        static constexpr char kChars[] = "abcdefghjkmnpqrstuvwxyz23456789";
        tmp->clear();
        for (int i = 0; i < 4; ++i) tmp->push_back(kChars[rng.Below(sizeof(kChars) - 1)]);
        return *tmp;
      }
      case Slot::kLiteral:
        break;
    }
    return {};
  }

  // Appends a filled template to `text`, recording keyword spans.
  void Fill(const PostTemplate& t, const FillContext& c, std::string* text,
            std::vector<KeywordSpan>* spans) {
    std::string tmp;
    const std::string* last_term = nullptr;
    for (size_t i = 0; i < t.pieces.size(); ++i) {
      const TemplatePiece& p = t.pieces[i];
      if (p.slot == Slot::kLiteral) {
        text->append(p.text);
        continue;
      }
      const std::string_view next_literal =
          i + 1 < t.pieces.size() && t.pieces[i + 1].slot == Slot::kLiteral
              ? std::string_view(t.pieces[i + 1].text)
              : std::string_view();
      KeywordKind kind = KeywordKind::kTopic;
      bool keyword = false;
      std::string_view w;
      std::string word;
      for (int attempt = 0; attempt < 8; ++attempt) {
        w = SlotWord(p.slot, c, &kind, &keyword, &tmp, &last_term);
        word.assign(w);
        if (!CrossesLexicon(*text, word) &&
            (next_literal.empty() || !CrossesLexicon(word, next_literal))) {
          break;
        }
        word.clear();  // give up on this slot rather than break the labels
      }
      if (word.empty()) continue;
      if (keyword) {
        spans->push_back({static_cast<uint32_t>(text->size()),
                          static_cast<uint32_t>(text->size() + word.size()), kind});
      }
      text->append(word);
    }
  }

  void Engagement(Post* p, const UserRec& u, double heat) {
    const double mean = 0.03 * std::pow(static_cast<double>(u.followers) + 20, 0.75) * heat *
                        (u.verified ? 2.0 : 1.0);
    p->likes = static_cast<int64_t>(mean * rng.LogNormal(0, 1.0));
    p->comments =
        static_cast<int64_t>(static_cast<double>(p->likes) * 0.12 * rng.LogNormal(0, 0.6));
    p->reposts = static_cast<int64_t>(static_cast<double>(p->likes) * 0.06 * rng.LogNormal(0, 0.8));
  }

  void SetAuthor(Post* p, uint32_t u) {
    scratch_author.back() = u;
    const UserRec& r = users[u];
    p->user.id = r.id;
    p->user.followers = r.followers;
    p->user.verified = r.verified;
    p->user.created_ms = r.created_ms;
  }

  SentimentLabel DrawSentiment(const Sentiment& mix) {
    const double x = rng.Uniform();
    if (x < mix.pos) return SentimentLabel::kPos;
    if (x < mix.pos + mix.neu) return SentimentLabel::kNeu;
    return SentimentLabel::kNeg;
  }

  // Ensures pos/neg posts hold a sentiment word (templates without a {sentiment} slot).
  void EnsureSentiment(const PostTemplate& t, const FillContext& c, std::string* text) {
    if (c.sentiment == SentimentLabel::kNeu || t.HasSlot(Slot::kSentiment)) return;
    for (int attempt = 0; attempt < 8; ++attempt) {
      const std::string& w = SentimentWord(c.sentiment);
      if (!CrossesLexicon("，", w)) {
        text->append("，");
        text->append(w);
        return;
      }
    }
  }

  uint32_t OrdinaryAuthor() { return static_cast<uint32_t>(activity.Draw(rng)); }

  SimPost& NewPost(int64_t ts) {
    SimPost& sp = scratch.emplace_back();
    sp.post.ts_ms = ts;
    scratch_author.push_back(0);
    return sp;
  }

  void MakeRepost(SimPost& sp, const Ring& ring, uint32_t author, double heat) {
    const RingEntry& orig = ring.Pick(rng);
    sp.label = orig.label;
    sp.label.repost = true;
    FillContext c;
    c.category = orig.label.category;
    c.sentiment = orig.label.sentiment;
    std::string& text = sp.post.text;
    text.clear();
    std::vector<KeywordSpan> spans;
    const PostTemplate& t = repost_t[rng.Below(repost_t.size())];
    Fill(t, c, &text, &spans);
    text.append("//@用户");
    text.append(users[orig.author].nick_digits);
    text.append(":");
    const auto shift = static_cast<uint32_t>(text.size());
    text.append(orig.text);
    sp.label.keywords.clear();
    for (const auto& k : orig.label.keywords) {
      sp.label.keywords.push_back({k.begin + shift, k.end + shift, k.kind});
    }
    sp.post.repost_of = orig.id;
    SetAuthor(&sp.post, author);
    Engagement(&sp.post, users[author], heat * 0.5);
  }

  double BumpShare(size_t b, int64_t t) const {
    const BumpSpec& spec = s.bumps[b];
    int64_t local = (t + s.utc_offset_minutes * kMinuteMs) % kDayMs;
    if (local < 0) local += kDayMs;
    int64_t d = std::llabs(local - spec.peak_clock_ms);
    d = std::min(d, kDayMs - d);
    const double z = static_cast<double>(d) / static_cast<double>(spec.width_ms);
    return spec.share * (1 + spec.amplitude * std::exp(-0.5 * z * z));
  }

  void MakeBackground(int64_t ts) {
    SimPost& sp = NewPost(ts);
    const uint32_t author = OrdinaryAuthor();
    if (!bg_ring.empty() && rng.Bernoulli(s.repost_share)) {
      MakeRepost(sp, bg_ring, author, 1.0);
      return;
    }
    FillContext c;
    c.category = static_cast<int>(cat_table.Draw(rng));
    c.sentiment = DrawSentiment(s.categories[c.category].sentiment);
    sp.label.category = c.category;
    sp.label.sentiment = c.sentiment;
    std::string& text = sp.post.text;
    const PostTemplate& t = bg_t[rng.Below(bg_t.size())];
    Fill(t, c, &text, &sp.label.keywords);
    if (!vocab.evergreen.empty() && rng.Bernoulli(s.evergreen.share)) {
      Fill(evergreen_t[rng.Below(evergreen_t.size())], c, &text, &sp.label.keywords);
    }
    for (size_t b = 0; b < s.bumps.size(); ++b) {
      if (rng.Bernoulli(BumpShare(b, ts))) {
        c.bump = static_cast<int>(b);
        Fill(bump_t[rng.Below(bump_t.size())], c, &text, &sp.label.keywords);
      }
    }
    EnsureSentiment(t, c, &text);
    SetAuthor(&sp.post, author);
    Engagement(&sp.post, users[author], 1.0);
  }

  void MakeEvent(size_t e, int64_t ts) {
    const EventSpec& spec = s.events[e];
    EventState& st = events[e];
    SimPost& sp = NewPost(ts);
    const double heat = 1 + 4 * EventCurve(e, ts);
    uint32_t author;
    if (st.sources < kVerifiedSources && !verified.empty()) {
      author = verified[rng.Below(verified.size())];
      ++st.sources;
    } else {
      author = OrdinaryAuthor();
    }
    if (!st.ring.empty() && rng.Bernoulli(spec.repost_share)) {
      MakeRepost(sp, st.ring, author, heat);
      return;
    }
    FillContext c;
    c.category = event_category[e];
    c.sentiment = DrawSentiment(spec.sentiment);
    c.phrase = &spec.phrase;
    c.terms = &spec.terms;
    c.phrase_share = spec.phrase_share;
    sp.label.category = c.category;
    sp.label.sentiment = c.sentiment;
    sp.label.event = static_cast<int>(e);
    std::string& text = sp.post.text;
    if (rng.Bernoulli(spec.hashtag_share)) {
      text.push_back('#');
      sp.label.keywords.push_back(
          {1, static_cast<uint32_t>(1 + spec.phrase.size()), KeywordKind::kPhrase});
      text.append(spec.phrase);
      text.append("# ");
    }
    const PostTemplate& t = ev_t[rng.Below(ev_t.size())];
    Fill(t, c, &text, &sp.label.keywords);
    EnsureSentiment(t, c, &text);
    SetAuthor(&sp.post, author);
    Engagement(&sp.post, users[author], heat);
  }

  void MakeSpam(size_t k, int64_t ts) {
    const SpamSpec& spec = s.spam[k];
    SpamState& st = spam[k];
    SimPost& sp = NewPost(ts);
    const auto [b0, b1] = bots[k];
    const uint32_t author = b0 + static_cast<uint32_t>(rng.Below(b1 - b0));
    if (!st.ring.empty() && rng.Bernoulli(spec.repost_share)) {
      MakeRepost(sp, st.ring, author, 0.05);
      return;
    }
    FillContext c;
    c.category = spam_category[k];
    c.sentiment = SentimentLabel::kNeu;
    c.phrase = &spec.phrase;
    c.terms = &spec.terms;
    c.phrase_share = 1.0;
    sp.label.category = c.category;
    sp.label.sentiment = c.sentiment;
    sp.label.spam = static_cast<int>(k);
    std::string& text = sp.post.text;
    if (rng.Bernoulli(spec.hashtag_share)) {
      text.push_back('#');
      sp.label.keywords.push_back(
          {1, static_cast<uint32_t>(1 + spec.phrase.size()), KeywordKind::kPhrase});
      text.append(spec.phrase);
      text.append("#");
    }
    const auto& ts_list = spam_t[k];
    Fill(ts_list[rng.Below(ts_list.size())], c, &text, &sp.label.keywords);
    SetAuthor(&sp.post, author);
    Engagement(&sp.post, users[author], 0.05);
  }

  void UpdateCategoryTable(int64_t t) {
    const int64_t minute = (t - start_ms) / kMinuteMs;
    if (minute == cat_table_minute) return;
    cat_table_minute = minute;
    const size_t m = static_cast<size_t>(std::min<int64_t>(minute, cat_noise.size() - 1));
    std::vector<double> w(s.categories.size());
    for (size_t c = 0; c < w.size(); ++c) w[c] = s.categories[c].weight * std::exp(cat_noise[m][c]);
    cat_table = AliasTable(w);
  }

  // Generates the next tick into `tick`. False when the scenario is over.
  bool GenerateTick() {
    tick.clear();
    tick_pos = 0;
    if (next_tick_ms >= end_ms) return false;
    const int64_t t0 = next_tick_ms;
    const int64_t t1 = std::min(t0 + kTickMs, end_ms);
    const int64_t tm = (t0 + t1) / 2;
    const double minutes = static_cast<double>(t1 - t0) / kMinuteMs;
    const auto span = static_cast<uint64_t>(t1 - t0);
    scratch.clear();
    scratch_author.clear();
    UpdateCategoryTable(tm);
    const int64_t n_bg = rng.Poisson(BackgroundRate(tm) * NoiseAt(bg_noise, tm) * minutes);
    for (int64_t i = 0; i < n_bg; ++i) MakeBackground(t0 + static_cast<int64_t>(rng.Below(span)));
    for (size_t e = 0; e < events.size(); ++e) {
      const int64_t n = rng.Poisson(EventRate(e, tm) * minutes);
      for (int64_t i = 0; i < n; ++i) {
        // Keep event posts after the onset even inside the onset's tick.
        const int64_t lo = std::max(t0, events[e].onset);
        MakeEvent(e, lo + static_cast<int64_t>(
                              rng.Below(static_cast<uint64_t>(std::max<int64_t>(t1 - lo, 1)))));
      }
    }
    for (size_t k = 0; k < spam.size(); ++k) {
      const int64_t n = rng.Poisson(SpamRate(k, tm) * minutes);
      for (int64_t i = 0; i < n; ++i) MakeSpam(k, t0 + static_cast<int64_t>(rng.Below(span)));
    }
    std::vector<uint32_t> order(scratch.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return scratch[a].post.ts_ms < scratch[b].post.ts_ms;
    });
    tick.reserve(order.size());
    for (uint32_t i : order) {
      SimPost& sp = tick.emplace_back(std::move(scratch[i]));
      sp.post.id = "p" + std::to_string(++seq);
      Account(sp, scratch_author[i]);
    }
    next_tick_ms = t1;
    return true;
  }

  // Counts the post for the truth and keeps originals for reposting.
  void Account(const SimPost& sp, uint32_t author) {
    auto keep = [&](Ring& ring) {
      if (sp.label.repost) return;
      ring.Push({sp.post.id, sp.post.text, author, sp.post.likes, sp.label});
    };
    if (sp.label.event >= 0) {
      EventState& st = events[sp.label.event];
      ++st.posts;
      if (!st.seen[author]) {
        st.seen[author] = 1;
        ++st.authors;
      }
      keep(st.ring);
    } else if (sp.label.spam >= 0) {
      ++spam[sp.label.spam].posts;
      keep(spam[sp.label.spam].ring);
    } else {
      keep(bg_ring);
    }
  }
};

namespace {

Status CompileAll(const std::vector<std::string>& src, std::string_view what,
                  const std::vector<std::unordered_set<std::string>>* lexicon,
                  std::vector<PostTemplate>* out) {
  out->clear();
  for (const auto& t : src) {
    auto c = CompileTemplate(t);
    if (!c.ok()) return c.status().WithContext(fmt::format("templates.{}", what));
    for (const auto& piece : c->pieces) {
      if (piece.slot != Slot::kLiteral) continue;
      for (const auto& set : *lexicon) {
        for (const auto& w : set) {
          if (piece.text.find(w) != std::string::npos) {
            return InvalidArgumentError(
                "templates.{}: \"{}\" contains the sentiment word '{}'; "
                "use {{sentiment}} so labels stay right",
                what, t, w);
          }
        }
      }
    }
    out->push_back(std::move(*c));
  }
  if (out->empty()) return InvalidArgumentError("templates.{}: no templates", what);
  return Status::Ok();
}

size_t CodePoints(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += text::DecodeUtf8At(s, i).length) ++n;
  return n;
}

// A 10-digit user number, distinct for distinct indices (a bijection of [0, 9e9)).
uint64_t UserNumber(uint64_t index) {
  constexpr uint64_t kRange = 9'000'000'000ull;
  return 1'000'000'000ull +
         static_cast<uint64_t>((static_cast<unsigned __int128>(index) * 2654435761ull) % kRange);
}

}  // namespace

Generator::Generator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Generator::~Generator() = default;

Result<std::unique_ptr<Generator>> Generator::Create(const Scenario& scenario) {
  auto g = std::make_unique<Impl>();
  Impl& m = *g;
  m.s = scenario;
  const Scenario& s = m.s;
  SURGE_ASSIGN_OR_RETURN(m.vocab, BuildVocabulary(s));

  for (const auto* list : {&s.lexicon.pos, &s.lexicon.neg}) {
    for (const auto& w : *list) {
      const size_t n = CodePoints(w);
      if (n >= 8) {
        return InvalidArgumentError("lexicon word '{}' is too long (at most 7 characters)", w);
      }
      if (m.lexicon_by_len.size() <= n) m.lexicon_by_len.resize(n + 1);
      m.lexicon_by_len[n].insert(w);
      m.lexicon_max_len = std::max(m.lexicon_max_len, n);
    }
  }
  m.lexicon_by_len.resize(std::max<size_t>(m.lexicon_by_len.size(), 9));
  const auto* lex = &m.lexicon_by_len;
  SURGE_RETURN_IF_ERROR(CompileAll(s.templates.background, "background", lex, &m.bg_t));
  SURGE_RETURN_IF_ERROR(CompileAll(s.templates.event, "event", lex, &m.ev_t));
  SURGE_RETURN_IF_ERROR(CompileAll(s.templates.repost, "repost", lex, &m.repost_t));
  SURGE_RETURN_IF_ERROR(CompileAll(s.templates.evergreen, "evergreen", lex, &m.evergreen_t));
  SURGE_RETURN_IF_ERROR(CompileAll(s.templates.bump, "bump", lex, &m.bump_t));
  for (const auto& c : s.spam) {
    SURGE_RETURN_IF_ERROR(CompileAll(c.templates.empty() ? s.templates.spam : c.templates,
                                     c.templates.empty() ? "spam" : "spam (" + c.id + ")", lex,
                                     &m.spam_t.emplace_back()));
  }
  auto category_index = [&](const std::string& name) {
    for (size_t i = 0; i < s.categories.size(); ++i) {
      if (s.categories[i].name == name) return static_cast<int>(i);
    }
    return 0;
  };
  for (const auto& e : s.events) m.event_category.push_back(category_index(e.category));
  for (const auto& c : s.spam) m.spam_category.push_back(category_index(c.category));

  // Users.
  Rng urng(MixSeed(s.seed, kUsersStream));
  const UserModel& um = s.users;
  std::vector<double> activity(um.count);
  m.users.resize(um.count);
  for (int64_t i = 0; i < um.count; ++i) {
    UserRec& u = m.users[i];
    u.verified = urng.Bernoulli(um.verified_share);
    double f = urng.LogNormal(std::log(std::max(um.followers.median, 1e-9)), um.followers.sigma);
    if (u.verified) f *= um.followers.verified_factor;
    u.followers = std::min<int64_t>(static_cast<int64_t>(f), um.followers.max);
    const double age_days =
        std::max(um.age.min_days, urng.LogNormal(std::log(um.age.median_days), um.age.sigma));
    u.created_ms = s.start_ms - static_cast<int64_t>(age_days * kDayMs);
    activity[i] = urng.LogNormal(0, um.activity_sigma);
    if (u.verified) m.verified.push_back(static_cast<uint32_t>(i));
  }
  m.activity = AliasTable(activity);
  for (const auto& c : s.spam) {
    const auto b0 = static_cast<uint32_t>(m.users.size());
    for (int64_t i = 0; i < c.bots; ++i) {
      UserRec& u = m.users.emplace_back();
      u.verified = false;
      u.followers = std::min<int64_t>(static_cast<int64_t>(urng.LogNormal(std::log(8.0), 0.9)),
                                      c.max_followers);
      u.created_ms = s.start_ms - static_cast<int64_t>(urng.Uniform(0.2, c.max_age_days) * kDayMs);
    }
    m.bots.emplace_back(b0, static_cast<uint32_t>(m.users.size()));
  }
  for (size_t i = 0; i < m.users.size(); ++i) {
    m.users[i].nick_digits = std::to_string(UserNumber(i));
    m.users[i].id = "u" + m.users[i].nick_digits;
  }

  // Schedule and jitter.
  m.start_ms = s.start_ms;
  m.end_ms = s.start_ms + s.duration_ms;
  m.next_tick_ms = m.start_ms;
  Rng nrng(MixSeed(s.seed, kNoiseStream));
  const size_t minutes = static_cast<size_t>(s.duration_ms / kMinuteMs) + 2;
  constexpr double kRho = 0.7;
  const double innov = s.noise * std::sqrt(1 - kRho * kRho);
  m.bg_noise.resize(minutes);
  m.cat_noise.assign(minutes, std::vector<double>(s.categories.size()));
  double x = s.noise * nrng.Normal();
  std::vector<double> xc(s.categories.size());
  for (auto& v : xc) v = s.noise * nrng.Normal();
  for (size_t i = 0; i < minutes; ++i) {
    m.bg_noise[i] = x;
    x = kRho * x + innov * nrng.Normal();
    for (size_t c = 0; c < xc.size(); ++c) {
      m.cat_noise[i][c] = xc[c];
      xc[c] = kRho * xc[c] + 2 * innov * nrng.Normal();
    }
  }
  m.events.resize(s.events.size());
  for (size_t e = 0; e < s.events.size(); ++e) {
    const EventSpec& spec = s.events[e];
    auto& st = m.events[e];
    st.onset = m.start_ms + spec.onset_ms;
    st.peak = st.onset + spec.rise_ms;
    const double tail = static_cast<double>(spec.half_life_ms) * std::log2(1 / s.end_fraction);
    st.end = std::min(m.end_ms, st.peak + static_cast<int64_t>(tail));
    st.seen.assign(m.users.size(), 0);
  }
  m.spam.resize(s.spam.size());
  for (size_t k = 0; k < s.spam.size(); ++k) {
    m.spam[k].start = m.start_ms + s.spam[k].start_ms;
    m.spam[k].end = std::min(m.end_ms, m.start_ms + s.spam[k].end_ms);
  }
  // Expected counts: the rates integrated over the same ticks the generator uses.
  for (int64_t t0 = m.start_ms; t0 < m.end_ms; t0 += kTickMs) {
    const int64_t t1 = std::min(t0 + kTickMs, m.end_ms);
    const int64_t tm = (t0 + t1) / 2;
    const double minutes_in_tick = static_cast<double>(t1 - t0) / kMinuteMs;
    for (size_t e = 0; e < m.events.size(); ++e) {
      m.events[e].expected += m.EventRate(e, tm) * minutes_in_tick;
    }
    for (size_t k = 0; k < m.spam.size(); ++k) {
      m.spam[k].expected += m.SpamRate(k, tm) * minutes_in_tick;
    }
  }
  m.rng.Seed(MixSeed(s.seed, kPostsStream));
  return std::unique_ptr<Generator>(new Generator(std::move(g)));
}

bool Generator::NextBatch(std::vector<SimPost>* out) {
  out->clear();
  Impl& m = *impl_;
  if (m.tick_pos < m.tick.size()) {
    out->insert(out->end(), std::make_move_iterator(m.tick.begin() + m.tick_pos),
                std::make_move_iterator(m.tick.end()));
    m.tick.clear();
    m.tick_pos = 0;
    return true;
  }
  if (!m.GenerateTick()) return false;
  out->swap(m.tick);
  m.tick.clear();
  return true;
}

bool Generator::Next(SimPost* out) {
  Impl& m = *impl_;
  while (m.tick_pos >= m.tick.size()) {
    if (!m.GenerateTick()) return false;
  }
  *out = std::move(m.tick[m.tick_pos++]);
  return true;
}

const Scenario& Generator::scenario() const { return impl_->s; }
int64_t Generator::posts_generated() const { return impl_->seq; }
int64_t Generator::now_ms() const { return impl_->next_tick_ms; }

double Generator::BackgroundRate(int64_t t_ms) const { return impl_->BackgroundRate(t_ms); }
double Generator::EventRate(size_t event, int64_t t_ms) const {
  return impl_->EventRate(event, t_ms);
}
double Generator::SpamRate(size_t campaign, int64_t t_ms) const {
  return impl_->SpamRate(campaign, t_ms);
}

eval::Truth Generator::truth() const {
  const Impl& m = *impl_;
  const Scenario& s = m.s;
  eval::Truth t;
  t.scenario = s.name;
  t.seed = s.seed;
  t.start_ms = m.start_ms;
  t.end_ms = m.end_ms;
  t.bucket_ms = s.bucket_ms;
  t.posts = m.seq;
  for (size_t e = 0; e < s.events.size(); ++e) {
    const EventSpec& spec = s.events[e];
    const auto& st = m.events[e];
    eval::TruthEvent te;
    te.id = spec.id;
    te.phrase = spec.phrase;
    te.terms = spec.terms;
    te.category = spec.category;
    te.sentiment = spec.sentiment;
    te.onset_ms = st.onset;
    te.peak_ms = st.peak;
    te.end_ms = st.end;
    te.peak_per_min = spec.peak_per_min;
    te.expected_posts = std::round(st.expected * 10) / 10;
    te.posts = st.posts;
    te.authors = st.authors;
    t.events.push_back(std::move(te));
  }
  for (size_t k = 0; k < s.spam.size(); ++k) {
    const SpamSpec& spec = s.spam[k];
    eval::TruthSpam ts;
    ts.id = spec.id;
    ts.phrase = spec.phrase;
    ts.terms = spec.terms;
    ts.category = spec.category;
    ts.start_ms = m.spam[k].start;
    ts.end_ms = m.spam[k].end;
    ts.expected_posts = std::round(m.spam[k].expected * 10) / 10;
    ts.posts = m.spam[k].posts;
    ts.bots = spec.bots;
    t.spam.push_back(std::move(ts));
  }
  return t;
}

void AppendLabelJson(const SimPost& sp, const Scenario& s, std::string* out) {
  const PostLabel& l = sp.label;
  out->append("{\"id\":");
  AppendJsonString(sp.post.id, out);
  out->append(",\"category\":");
  AppendJsonString(s.categories[l.category].name, out);
  out->append(",\"sentiment\":\"");
  out->append(SentimentLabelName(l.sentiment));
  out->append("\",\"event\":");
  if (l.event >= 0) {
    AppendJsonString(s.events[l.event].id, out);
  } else {
    out->append("null");
  }
  out->append(",\"spam\":");
  if (l.spam >= 0) {
    AppendJsonString(s.spam[l.spam].id, out);
  } else {
    out->append("null");
  }
  out->append(l.repost ? ",\"repost\":true" : ",\"repost\":false");
  out->append(",\"keywords\":[");
  for (size_t i = 0; i < l.keywords.size(); ++i) {
    const KeywordSpan& k = l.keywords[i];
    if (i) out->push_back(',');
    fmt::format_to(std::back_inserter(*out),
                   "{{\"start\":{},\"end\":{},\"kind\":\"{}\",\"text\":", k.begin, k.end,
                   KeywordKindName(k.kind));
    AppendJsonString(std::string_view(sp.post.text).substr(k.begin, k.end - k.begin), out);
    out->push_back('}');
  }
  out->append("]}");
}

}  // namespace surge::stream::sim
