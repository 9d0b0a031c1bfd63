#include "stream/sim/scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <set>

#include "core/mmap_file.h"
#include "stream/sim/post_template.h"

namespace surge::stream::sim {
namespace {

// ---- scalar syntax -------------------------------------------------------------------------

bool ParseDouble(std::string_view s, double* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end && std::isfinite(*out);
}

int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool Digits(std::string_view s, size_t pos, size_t n, int* out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

// "HH:MM" or "HH:MM:SS" -> ms since midnight.
bool ParseClock(std::string_view s, int64_t* out) {
  int h, m, sec = 0;
  if (!Digits(s, 0, 2, &h) || s.size() < 5 || s[2] != ':' || !Digits(s, 3, 2, &m)) return false;
  if (s.size() == 8) {
    if (s[5] != ':' || !Digits(s, 6, 2, &sec)) return false;
  } else if (s.size() != 5) {
    return false;
  }
  if (h > 23 || m > 59 || sec > 59) return false;
  *out = ((h * 60 + m) * 60 + sec) * 1000ll;
  return true;
}

// ---- YAML reading with positions -----------------------------------------------------------

struct Source {
  std::string name;
};

std::string Where(const Source& src, const YAML::Node& node) {
  if (!node.IsDefined()) return src.name;
  const YAML::Mark m = node.Mark();
  if (m.line < 0) return src.name;
  return fmt::format("{}:{}:{}", src.name, m.line + 1, m.column + 1);
}

std::string Describe(const YAML::Node& n) {
  if (n.IsNull()) return "null";
  if (n.IsScalar()) return fmt::format("'{}'", n.Scalar());
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

// A mapping being read: its node, the path of its fields in messages and where it came from.
class Map {
 public:
  Map(const Source* src, YAML::Node node, std::string path)
      : src_(src), node_(std::move(node)), path_(std::move(path)) {}

  const Source& src() const { return *src_; }
  const YAML::Node& node() const { return node_; }

  std::string FieldPath(std::string_view key) const {
    return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
  }
  Status Error(const YAML::Node& at, std::string_view key, std::string_view msg) const {
    return InvalidArgumentError("{}: field '{}': {}", Where(*src_, at.IsDefined() ? at : node_),
                                FieldPath(key), msg);
  }
  YAML::Node Get(std::string_view key) const { return node_[std::string(key)]; }
  bool Has(std::string_view key) const {
    const YAML::Node n = Get(key);
    return n.IsDefined() && !n.IsNull();
  }

  Status CheckKeys(std::initializer_list<std::string_view> known) const {
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      const std::string key = it->first.Scalar();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string list;
        for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        return InvalidArgumentError("{}: unknown field '{}' (known: {})", Where(*src_, it->first),
                                    FieldPath(key), list);
      }
    }
    return Status::Ok();
  }

  Status Require(std::string_view key) const {
    if (!Has(key)) return Error(node_, key, "required field is missing");
    return Status::Ok();
  }

  Status Double(std::string_view key, double* out, double lo, double hi) const {
    const YAML::Node n = Get(key);
    if (!n.IsDefined() || n.IsNull()) return Status::Ok();
    double v;
    if (!n.IsScalar() || !ParseDouble(n.Scalar(), &v)) {
      return Error(n, key, fmt::format("expected a number, got {}", Describe(n)));
    }
    if (v < lo || v > hi) {
      return Error(n, key, fmt::format("{} is out of range [{}, {}]", n.Scalar(), lo, hi));
    }
    *out = v;
    return Status::Ok();
  }

  Status Int(std::string_view key, int64_t* out, int64_t lo, int64_t hi) const {
    const YAML::Node n = Get(key);
    if (!n.IsDefined() || n.IsNull()) return Status::Ok();
    int64_t v;
    const std::string& s = n.IsScalar() ? n.Scalar() : std::string();
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (!n.IsScalar() || s.empty() || ec != std::errc() || p != s.data() + s.size()) {
      return Error(n, key, fmt::format("expected an integer, got {}", Describe(n)));
    }
    if (v < lo || v > hi) {
      return Error(n, key, fmt::format("{} is out of range [{}, {}]", v, lo, hi));
    }
    *out = v;
    return Status::Ok();
  }

  Status String(std::string_view key, std::string* out) const {
    const YAML::Node n = Get(key);
    if (!n.IsDefined() || n.IsNull()) return Status::Ok();
    if (!n.IsScalar() || n.Scalar().empty()) {
      return Error(n, key, fmt::format("expected a non-empty string, got {}", Describe(n)));
    }
    *out = n.Scalar();
    return Status::Ok();
  }

  Status Strings(std::string_view key, std::vector<std::string>* out, bool non_empty) const {
    const YAML::Node n = Get(key);
    if (!n.IsDefined() || n.IsNull()) {
      if (non_empty && out->empty()) return Error(n, key, "expected a non-empty list of strings");
      return Status::Ok();
    }
    if (!n.IsSequence()) {
      return Error(n, key, fmt::format("expected a list of strings, got {}", Describe(n)));
    }
    std::vector<std::string> v;
    for (size_t i = 0; i < n.size(); ++i) {
      const YAML::Node item = n[i];
      if (!item.IsScalar() || item.Scalar().empty()) {
        return Error(item, fmt::format("{}[{}]", key, i),
                     fmt::format("expected a non-empty string, got {}", Describe(item)));
      }
      v.push_back(item.Scalar());
    }
    if (non_empty && v.empty()) return Error(n, key, "expected a non-empty list of strings");
    *out = std::move(v);
    return Status::Ok();
  }

  Status Duration(std::string_view key, int64_t* out, int64_t min_ms) const {
    const YAML::Node n = Get(key);
    if (!n.IsDefined() || n.IsNull()) return Status::Ok();
    auto d = n.IsScalar() ? ParseDuration(n.Scalar()) : Result<int64_t>(InvalidArgumentError(""));
    if (!d.ok()) {
      return Error(n, key,
                   fmt::format("expected a duration (seconds, or \"90s\", \"5m\", \"1h30m\", "
                               "\"250ms\"), got {}",
                               Describe(n)));
    }
    if (*d < min_ms) {
      return Error(n, key, fmt::format("{} is shorter than the minimum {} ms", n.Scalar(), min_ms));
    }
    *out = *d;
    return Status::Ok();
  }

  Status Mix(std::string_view key, Sentiment* out) const {
    const YAML::Node n = Get(key);
    if (!n.IsDefined() || n.IsNull()) return Status::Ok();
    if (!n.IsMap())
      return Error(n, key, fmt::format("expected {{pos, neu, neg}}, got {}", Describe(n)));
    Map m(src_, n, FieldPath(key));
    SURGE_RETURN_IF_ERROR(m.CheckKeys({"pos", "neu", "neg"}));
    Sentiment s{0, 0, 0};
    SURGE_RETURN_IF_ERROR(m.Double("pos", &s.pos, 0, 1e9));
    SURGE_RETURN_IF_ERROR(m.Double("neu", &s.neu, 0, 1e9));
    SURGE_RETURN_IF_ERROR(m.Double("neg", &s.neg, 0, 1e9));
    const double sum = s.pos + s.neu + s.neg;
    if (sum <= 0) return Error(n, key, "pos + neu + neg must be positive");
    *out = {s.pos / sum, s.neu / sum, s.neg / sum};
    return Status::Ok();
  }

  Status Templates(std::string_view key, std::vector<std::string>* out, bool non_empty) const {
    SURGE_RETURN_IF_ERROR(Strings(key, out, non_empty));
    const YAML::Node n = Get(key);
    for (size_t i = 0; i < out->size(); ++i) {
      auto t = CompileTemplate((*out)[i]);
      if (!t.ok()) {
        return Error(n.IsDefined() && n.IsSequence() ? n[i] : n, fmt::format("{}[{}]", key, i),
                     t.status().message());
      }
    }
    return Status::Ok();
  }

  // A mapping-valued field; `required` makes a missing one an error.
  Result<Map> Sub(std::string_view key) const {
    const YAML::Node n = Get(key);
    if (!n.IsMap()) return Error(n, key, fmt::format("expected a mapping, got {}", Describe(n)));
    return Map(src_, n, FieldPath(key));
  }

 private:
  const Source* src_;
  YAML::Node node_;
  std::string path_;
};

// Calls `fn(Map item, index)` for each mapping of a list field.
Status ForEachItem(const Map& parent, std::string_view key,
                   const std::function<Status(const Map&, size_t)>& fn) {
  const YAML::Node n = parent.Get(key);
  if (!n.IsDefined() || n.IsNull()) return Status::Ok();
  if (!n.IsSequence()) {
    return parent.Error(n, key, fmt::format("expected a list, got {}", Describe(n)));
  }
  for (size_t i = 0; i < n.size(); ++i) {
    const YAML::Node item = n[i];
    const std::string path = fmt::format("{}[{}]", parent.FieldPath(key), i);
    if (!item.IsMap()) {
      return InvalidArgumentError("{}: field '{}': expected a mapping, got {}",
                                  Where(parent.src(), item), path, Describe(item));
    }
    SURGE_RETURN_IF_ERROR(fn(Map(&parent.src(), item, path), i));
  }
  return Status::Ok();
}

// ---- sections ------------------------------------------------------------------------------

Status ReadUsers(const Map& m, UserModel* u) {
  SURGE_RETURN_IF_ERROR(
      m.CheckKeys({"count", "followers", "verified_share", "age", "activity_sigma"}));
  SURGE_RETURN_IF_ERROR(m.Int("count", &u->count, 10, 100'000'000));
  SURGE_RETURN_IF_ERROR(m.Double("verified_share", &u->verified_share, 0, 1));
  SURGE_RETURN_IF_ERROR(m.Double("activity_sigma", &u->activity_sigma, 0, 5));
  if (m.Has("followers")) {
    SURGE_ASSIGN_OR_RETURN(Map f, m.Sub("followers"));
    SURGE_RETURN_IF_ERROR(f.CheckKeys({"median", "sigma", "max", "verified_factor"}));
    SURGE_RETURN_IF_ERROR(f.Double("median", &u->followers.median, 0, 1e9));
    SURGE_RETURN_IF_ERROR(f.Double("sigma", &u->followers.sigma, 0, 5));
    SURGE_RETURN_IF_ERROR(f.Int("max", &u->followers.max, 1, 10'000'000'000));
    SURGE_RETURN_IF_ERROR(f.Double("verified_factor", &u->followers.verified_factor, 1, 1e6));
  }
  if (m.Has("age")) {
    SURGE_ASSIGN_OR_RETURN(Map a, m.Sub("age"));
    SURGE_RETURN_IF_ERROR(a.CheckKeys({"median_days", "sigma", "min_days"}));
    SURGE_RETURN_IF_ERROR(a.Double("median_days", &u->age.median_days, 1, 1e5));
    SURGE_RETURN_IF_ERROR(a.Double("sigma", &u->age.sigma, 0, 5));
    SURGE_RETURN_IF_ERROR(a.Double("min_days", &u->age.min_days, 0, 1e5));
  }
  return Status::Ok();
}

Status ReadCategories(const Map& top, std::vector<CategorySpec>* out) {
  std::vector<CategorySpec> cats;
  std::set<std::string> names;
  SURGE_RETURN_IF_ERROR(ForEachItem(top, "categories", [&](const Map& m, size_t) -> Status {
    SURGE_RETURN_IF_ERROR(
        m.CheckKeys({"name", "weight", "sentiment", "seed_words", "dict_chars", "dict_words"}));
    CategorySpec c;
    SURGE_RETURN_IF_ERROR(m.Require("name"));
    SURGE_RETURN_IF_ERROR(m.String("name", &c.name));
    if (!names.insert(c.name).second) {
      return m.Error(m.Get("name"), "name", fmt::format("category '{}' is defined twice", c.name));
    }
    SURGE_RETURN_IF_ERROR(m.Double("weight", &c.weight, 1e-9, 1e9));
    SURGE_RETURN_IF_ERROR(m.Mix("sentiment", &c.sentiment));
    SURGE_RETURN_IF_ERROR(m.Strings("seed_words", &c.seed_words, true));
    SURGE_RETURN_IF_ERROR(m.String("dict_chars", &c.dict_chars));
    int64_t dw = c.dict_words;
    SURGE_RETURN_IF_ERROR(m.Int("dict_words", &dw, 0, 100000));
    c.dict_words = static_cast<int>(dw);
    cats.push_back(std::move(c));
    return Status::Ok();
  }));
  if (cats.empty()) {
    return top.Error(top.Get("categories"), "categories", "at least one category is needed");
  }
  *out = std::move(cats);
  return Status::Ok();
}

Status CheckCategory(const Map& m, const std::vector<CategorySpec>& cats, const std::string& c) {
  for (const auto& cat : cats) {
    if (cat.name == c) return Status::Ok();
  }
  std::string list;
  for (const auto& cat : cats) list += (list.empty() ? "" : ", ") + cat.name;
  return m.Error(m.Get("category"), "category",
                 fmt::format("unknown category '{}' (categories: {})", c, list));
}

Status ReadEvents(const Map& top, const Scenario& s, std::vector<EventSpec>* out) {
  std::vector<EventSpec> events;
  std::set<std::string> ids;
  SURGE_RETURN_IF_ERROR(ForEachItem(top, "events", [&](const Map& m, size_t) -> Status {
    SURGE_RETURN_IF_ERROR(m.CheckKeys(
        {"id", "phrase", "terms", "category", "onset", "rise", "half_life", "peak_per_minute",
         "shape", "shape_param", "sentiment", "repost_share", "hashtag_share", "phrase_share"}));
    EventSpec e;
    for (auto key : {"id", "phrase", "terms", "category", "onset", "peak_per_minute"}) {
      SURGE_RETURN_IF_ERROR(m.Require(key));
    }
    SURGE_RETURN_IF_ERROR(m.String("id", &e.id));
    if (!ids.insert(e.id).second) {
      return m.Error(m.Get("id"), "id", fmt::format("event id '{}' is used twice", e.id));
    }
    SURGE_RETURN_IF_ERROR(m.String("phrase", &e.phrase));
    SURGE_RETURN_IF_ERROR(m.Strings("terms", &e.terms, true));
    SURGE_RETURN_IF_ERROR(m.String("category", &e.category));
    SURGE_RETURN_IF_ERROR(CheckCategory(m, s.categories, e.category));
    SURGE_RETURN_IF_ERROR(m.Duration("onset", &e.onset_ms, 0));
    if (e.onset_ms >= s.duration_ms) {
      return m.Error(m.Get("onset"), "onset",
                     fmt::format("onset {} ms is not before the end of the scenario ({} ms)",
                                 e.onset_ms, s.duration_ms));
    }
    SURGE_RETURN_IF_ERROR(m.Duration("rise", &e.rise_ms, 1000));
    SURGE_RETURN_IF_ERROR(m.Duration("half_life", &e.half_life_ms, 1000));
    SURGE_RETURN_IF_ERROR(m.Double("peak_per_minute", &e.peak_per_min, 1e-3, 1e7));
    if (m.Has("shape")) {
      std::string shape;
      SURGE_RETURN_IF_ERROR(m.String("shape", &shape));
      if (shape == "gamma") {
        e.shape = RiseShape::kGamma;
      } else if (shape == "lognormal") {
        e.shape = RiseShape::kLogNormal;
        if (!m.Has("shape_param")) e.shape_param = 0.6;
      } else {
        return m.Error(m.Get("shape"), "shape",
                       fmt::format("expected gamma or lognormal, got '{}'", shape));
      }
    }
    SURGE_RETURN_IF_ERROR(m.Double("shape_param", &e.shape_param, 0.05, 20));
    SURGE_RETURN_IF_ERROR(m.Mix("sentiment", &e.sentiment));
    SURGE_RETURN_IF_ERROR(m.Double("repost_share", &e.repost_share, 0, 0.95));
    SURGE_RETURN_IF_ERROR(m.Double("hashtag_share", &e.hashtag_share, 0, 1));
    SURGE_RETURN_IF_ERROR(m.Double("phrase_share", &e.phrase_share, 0, 1));
    events.push_back(std::move(e));
    return Status::Ok();
  }));
  *out = std::move(events);
  return Status::Ok();
}

Status ReadSpam(const Map& top, const Scenario& s, std::vector<SpamSpec>* out) {
  std::vector<SpamSpec> spam;
  std::set<std::string> ids;
  for (const auto& e : s.events) ids.insert(e.id);
  SURGE_RETURN_IF_ERROR(ForEachItem(top, "spam", [&](const Map& m, size_t) -> Status {
    SURGE_RETURN_IF_ERROR(m.CheckKeys({"id", "phrase", "terms", "category", "start", "end", "bots",
                                       "per_minute", "on", "off", "hashtag_share", "repost_share",
                                       "max_age_days", "max_followers", "templates"}));
    SpamSpec c;
    for (auto key : {"id", "phrase", "terms", "category", "start", "end", "per_minute"}) {
      SURGE_RETURN_IF_ERROR(m.Require(key));
    }
    SURGE_RETURN_IF_ERROR(m.String("id", &c.id));
    if (!ids.insert(c.id).second) {
      return m.Error(m.Get("id"), "id",
                     fmt::format("id '{}' is already used by an event or campaign", c.id));
    }
    SURGE_RETURN_IF_ERROR(m.String("phrase", &c.phrase));
    SURGE_RETURN_IF_ERROR(m.Strings("terms", &c.terms, true));
    SURGE_RETURN_IF_ERROR(m.String("category", &c.category));
    SURGE_RETURN_IF_ERROR(CheckCategory(m, s.categories, c.category));
    SURGE_RETURN_IF_ERROR(m.Duration("start", &c.start_ms, 0));
    SURGE_RETURN_IF_ERROR(m.Duration("end", &c.end_ms, 0));
    if (c.end_ms <= c.start_ms) {
      return m.Error(m.Get("end"), "end", "a campaign must end after it starts");
    }
    if (c.start_ms >= s.duration_ms) {
      return m.Error(m.Get("start"), "start",
                     fmt::format("start {} ms is not before the end of the scenario ({} ms)",
                                 c.start_ms, s.duration_ms));
    }
    SURGE_RETURN_IF_ERROR(m.Int("bots", &c.bots, 1, 10'000'000));
    SURGE_RETURN_IF_ERROR(m.Double("per_minute", &c.per_min, 1e-3, 1e7));
    SURGE_RETURN_IF_ERROR(m.Duration("on", &c.on_ms, 1000));
    SURGE_RETURN_IF_ERROR(m.Duration("off", &c.off_ms, 0));
    SURGE_RETURN_IF_ERROR(m.Double("hashtag_share", &c.hashtag_share, 0, 1));
    SURGE_RETURN_IF_ERROR(m.Double("repost_share", &c.repost_share, 0, 0.95));
    SURGE_RETURN_IF_ERROR(m.Double("max_age_days", &c.max_age_days, 1, 1e5));
    SURGE_RETURN_IF_ERROR(m.Int("max_followers", &c.max_followers, 0, 1'000'000'000));
    SURGE_RETURN_IF_ERROR(m.Templates("templates", &c.templates, false));
    spam.push_back(std::move(c));
    return Status::Ok();
  }));
  *out = std::move(spam);
  return Status::Ok();
}

Status ReadBumps(const Map& top, std::vector<BumpSpec>* out) {
  std::vector<BumpSpec> bumps;
  SURGE_RETURN_IF_ERROR(ForEachItem(top, "bumps", [&](const Map& m, size_t) -> Status {
    SURGE_RETURN_IF_ERROR(m.CheckKeys({"words", "peak", "width", "amplitude", "share"}));
    BumpSpec b;
    SURGE_RETURN_IF_ERROR(m.Require("words"));
    SURGE_RETURN_IF_ERROR(m.Require("peak"));
    SURGE_RETURN_IF_ERROR(m.Strings("words", &b.words, true));
    const YAML::Node peak = m.Get("peak");
    if (!peak.IsScalar() || !ParseClock(peak.Scalar(), &b.peak_clock_ms)) {
      return m.Error(peak, "peak",
                     fmt::format("expected a local time of day \"HH:MM\", got {}", Describe(peak)));
    }
    SURGE_RETURN_IF_ERROR(m.Duration("width", &b.width_ms, 1000));
    SURGE_RETURN_IF_ERROR(m.Double("amplitude", &b.amplitude, 0, 100));
    SURGE_RETURN_IF_ERROR(m.Double("share", &b.share, 0, 1));
    bumps.push_back(std::move(b));
    return Status::Ok();
  }));
  *out = std::move(bumps);
  return Status::Ok();
}

// The scenario from the top-level fields, each looked up in the user's file first and in the
// default scenario otherwise.
class TopLevel {
 public:
  TopLevel(const Source* user_src, YAML::Node user, const Source* def_src, YAML::Node def)
      : user_(user_src, std::move(user), ""), def_(def_src, std::move(def), "") {}

  const Map& For(std::string_view key) const { return user_.Has(key) ? user_ : def_; }
  const Map& user() const { return user_; }

 private:
  Map user_;
  Map def_;
};

Status Read(const TopLevel& t, Scenario* s) {
  SURGE_RETURN_IF_ERROR(t.user().CheckKeys(
      {"name", "seed", "start", "duration", "bucket", "rate_per_minute", "noise", "repost_share",
       "end_fraction", "diurnal", "dictionary", "users", "categories", "evergreen", "bumps",
       "lexicon", "templates", "events", "spam"}));
  SURGE_RETURN_IF_ERROR(t.For("name").String("name", &s->name));
  {
    const Map& m = t.For("seed");
    int64_t seed = 0;
    SURGE_RETURN_IF_ERROR(m.Int("seed", &seed, 0, INT64_MAX));
    s->seed = static_cast<uint64_t>(seed);
  }
  {
    const Map& m = t.For("start");
    const YAML::Node n = m.Get("start");
    int64_t ms = 0;
    auto [p, ec] = std::from_chars(n.Scalar().data(), n.Scalar().data() + n.Scalar().size(), ms);
    if (n.IsScalar() && ec == std::errc() && p == n.Scalar().data() + n.Scalar().size()) {
      s->start_ms = ms;
      s->utc_offset_minutes = 0;
    } else {
      auto ts = n.IsScalar() ? ParseTimestamp(n.Scalar())
                             : Result<std::pair<int64_t, int>>(InvalidArgumentError(""));
      if (!ts.ok()) {
        return m.Error(n, "start",
                       fmt::format("expected an ISO 8601 time such as "
                                   "\"2026-12-02T20:00:00+08:00\" or ms since the epoch, got {}",
                                   Describe(n)));
      }
      s->start_ms = ts->first;
      s->utc_offset_minutes = ts->second;
    }
  }
  SURGE_RETURN_IF_ERROR(t.For("duration").Duration("duration", &s->duration_ms, 1000));
  SURGE_RETURN_IF_ERROR(t.For("bucket").Duration("bucket", &s->bucket_ms, 1000));
  SURGE_RETURN_IF_ERROR(
      t.For("rate_per_minute").Double("rate_per_minute", &s->rate_per_min, 0, 1e8));
  SURGE_RETURN_IF_ERROR(t.For("noise").Double("noise", &s->noise, 0, 2));
  SURGE_RETURN_IF_ERROR(t.For("repost_share").Double("repost_share", &s->repost_share, 0, 0.95));
  SURGE_RETURN_IF_ERROR(t.For("end_fraction").Double("end_fraction", &s->end_fraction, 1e-6, 0.99));
  SURGE_RETURN_IF_ERROR(t.For("dictionary").String("dictionary", &s->dict_path));
  {
    const Map& m = t.For("diurnal");
    const YAML::Node n = m.Get("diurnal");
    if (!n.IsSequence() || n.size() != 24) {
      return m.Error(
          n, "diurnal",
          fmt::format("expected a list of 24 multipliers (one per local hour), got {}",
                      n.IsSequence() ? fmt::format("{} values", n.size()) : Describe(n)));
    }
    double sum = 0;
    for (size_t h = 0; h < 24; ++h) {
      double v;
      if (!n[h].IsScalar() || !ParseDouble(n[h].Scalar(), &v) || v < 0) {
        return m.Error(n[h], fmt::format("diurnal[{}]", h),
                       fmt::format("expected a non-negative number, got {}", Describe(n[h])));
      }
      s->diurnal[h] = v;
      sum += v;
    }
    if (sum <= 0) return m.Error(n, "diurnal", "at least one multiplier must be positive");
  }
  {
    SURGE_ASSIGN_OR_RETURN(Map u, t.For("users").Sub("users"));
    SURGE_RETURN_IF_ERROR(ReadUsers(u, &s->users));
  }
  SURGE_RETURN_IF_ERROR(ReadCategories(t.For("categories"), &s->categories));
  {
    SURGE_ASSIGN_OR_RETURN(Map e, t.For("evergreen").Sub("evergreen"));
    SURGE_RETURN_IF_ERROR(e.CheckKeys({"share", "zipf", "words"}));
    SURGE_RETURN_IF_ERROR(e.Double("share", &s->evergreen.share, 0, 1));
    SURGE_RETURN_IF_ERROR(e.Double("zipf", &s->evergreen.zipf, 0, 5));
    SURGE_RETURN_IF_ERROR(e.Strings("words", &s->evergreen.words, s->evergreen.share > 0));
  }
  SURGE_RETURN_IF_ERROR(ReadBumps(t.For("bumps"), &s->bumps));
  {
    SURGE_ASSIGN_OR_RETURN(Map l, t.For("lexicon").Sub("lexicon"));
    SURGE_RETURN_IF_ERROR(l.CheckKeys({"pos", "neg", "neu", "adjectives", "emoji", "exclude"}));
    SURGE_RETURN_IF_ERROR(l.Strings("pos", &s->lexicon.pos, true));
    SURGE_RETURN_IF_ERROR(l.Strings("neg", &s->lexicon.neg, true));
    SURGE_RETURN_IF_ERROR(l.Strings("neu", &s->lexicon.neu, true));
    SURGE_RETURN_IF_ERROR(l.Strings("adjectives", &s->lexicon.adjectives, true));
    SURGE_RETURN_IF_ERROR(l.Strings("emoji", &s->lexicon.emoji, true));
    SURGE_RETURN_IF_ERROR(l.Strings("exclude", &s->lexicon.exclude, false));
    std::set<std::string> pos(s->lexicon.pos.begin(), s->lexicon.pos.end());
    for (const auto& w : s->lexicon.neg) {
      if (pos.count(w)) {
        return l.Error(l.Get("neg"), "neg",
                       fmt::format("'{}' is both a positive and a negative word", w));
      }
    }
  }
  {
    SURGE_ASSIGN_OR_RETURN(Map m, t.For("templates").Sub("templates"));
    SURGE_RETURN_IF_ERROR(
        m.CheckKeys({"background", "event", "spam", "repost", "evergreen", "bump"}));
    SURGE_RETURN_IF_ERROR(m.Templates("background", &s->templates.background, true));
    SURGE_RETURN_IF_ERROR(m.Templates("event", &s->templates.event, true));
    SURGE_RETURN_IF_ERROR(m.Templates("spam", &s->templates.spam, true));
    SURGE_RETURN_IF_ERROR(m.Templates("repost", &s->templates.repost, true));
    SURGE_RETURN_IF_ERROR(m.Templates("evergreen", &s->templates.evergreen, true));
    SURGE_RETURN_IF_ERROR(m.Templates("bump", &s->templates.bump, true));
  }
  SURGE_RETURN_IF_ERROR(ReadEvents(t.For("events"), *s, &s->events));
  SURGE_RETURN_IF_ERROR(ReadSpam(t.For("spam"), *s, &s->spam));
  return Status::Ok();
}

Result<YAML::Node> LoadYaml(std::string_view text, const Source& src) {
  try {
    YAML::Node n = YAML::Load(std::string(text));
    if (n.IsNull()) return YAML::Node(YAML::NodeType::Map);
    if (!n.IsMap()) {
      return InvalidArgumentError("{}: a scenario must be a mapping of fields, got {}",
                                  Where(src, n), Describe(n));
    }
    return n;
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("{}:{}:{}: not valid YAML/JSON: {}", src.name, e.mark.line + 1,
                                e.mark.column + 1, e.msg);
  }
}

}  // namespace

Result<int64_t> ParseDuration(std::string_view text) {
  auto bad = [&] {
    return InvalidArgumentError(
        "'{}' is not a duration (seconds, or \"90s\", \"5m\", \"1h30m\", "
        "\"250ms\")",
        text);
  };
  double plain;
  if (ParseDouble(text, &plain)) {
    if (plain < 0) return bad();
    return static_cast<int64_t>(std::llround(plain * 1000));
  }
  double total = 0;
  size_t i = 0;
  if (text.empty()) return bad();
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && ((text[j] >= '0' && text[j] <= '9') || text[j] == '.')) ++j;
    double v;
    if (j == i || !ParseDouble(text.substr(i, j - i), &v)) return bad();
    size_t k = j;
    while (k < text.size() && text[k] >= 'a' && text[k] <= 'z') ++k;
    const std::string_view unit = text.substr(j, k - j);
    double scale;
    if (unit == "ms") {
      scale = 1;
    } else if (unit == "s") {
      scale = 1000;
    } else if (unit == "m") {
      scale = 60000;
    } else if (unit == "h") {
      scale = 3600000;
    } else if (unit == "d") {
      scale = 86400000;
    } else {
      return bad();
    }
    total += v * scale;
    i = k;
  }
  return static_cast<int64_t>(std::llround(total));
}

Result<std::pair<int64_t, int>> ParseTimestamp(std::string_view s) {
  auto bad = [&] {
    return InvalidArgumentError("'{}' is not an ISO 8601 time (\"2026-12-02T20:00:00+08:00\")", s);
  };
  int y, mo, d, h, mi, sec = 0;
  if (!Digits(s, 0, 4, &y) || s.size() < 16 || s[4] != '-' || !Digits(s, 5, 2, &mo) ||
      s[7] != '-' || !Digits(s, 8, 2, &d) || (s[10] != 'T' && s[10] != ' ') ||
      !Digits(s, 11, 2, &h) || s[13] != ':' || !Digits(s, 14, 2, &mi)) {
    return bad();
  }
  size_t p = 16;
  double frac = 0;
  if (p < s.size() && s[p] == ':') {
    if (!Digits(s, p + 1, 2, &sec)) return bad();
    p += 3;
    if (p < s.size() && s[p] == '.') {
      size_t q = p + 1;
      while (q < s.size() && s[q] >= '0' && s[q] <= '9') ++q;
      if (q == p + 1 || !ParseDouble(s.substr(p, q - p), &frac)) return bad();
      p = q;
    }
  }
  int offset = 0;
  if (p < s.size()) {
    if (s[p] == 'Z' && p + 1 == s.size()) {
      offset = 0;
    } else if (s[p] == '+' || s[p] == '-') {
      int oh, om;
      const size_t rest = s.size() - p - 1;
      if (rest == 5 && s[p + 3] == ':' && Digits(s, p + 1, 2, &oh) && Digits(s, p + 4, 2, &om)) {
      } else if (rest == 4 && Digits(s, p + 1, 2, &oh) && Digits(s, p + 3, 2, &om)) {
      } else {
        return bad();
      }
      if (oh > 18 || om > 59) return bad();
      offset = (s[p] == '-' ? -1 : 1) * (oh * 60 + om);
    } else {
      return bad();
    }
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return bad();
  const int64_t days = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  const int64_t local_ms =
      ((days * 24 + h) * 60 + mi) * 60000ll + sec * 1000ll + std::llround(frac * 1000);
  return std::pair<int64_t, int>(local_ms - offset * int64_t{60000}, offset);
}

Result<Scenario> ParseScenario(std::string_view text, std::string_view source) {
  static const Source kDefaultSource{"<default scenario>"};
  const Source user_src{std::string(source)};
  SURGE_ASSIGN_OR_RETURN(YAML::Node def, LoadYaml(DefaultScenarioYaml(), kDefaultSource));
  SURGE_ASSIGN_OR_RETURN(YAML::Node user, LoadYaml(text, user_src));
  Scenario s;
  try {
    SURGE_RETURN_IF_ERROR(Read(TopLevel(&user_src, user, &kDefaultSource, def), &s));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("{}:{}:{}: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  return s;
}

Result<std::vector<std::string>> ApplyOverrides(const ScenarioOverrides& o, Scenario* s) {
  std::vector<std::string> dropped;
  if (o.seed) s->seed = *o.seed;
  if (o.rate_per_min) {
    if (!(*o.rate_per_min >= 0)) {
      return InvalidArgumentError("rate {} posts/minute is negative", *o.rate_per_min);
    }
    s->rate_per_min = *o.rate_per_min;
  }
  if (o.duration_ms) {
    if (*o.duration_ms < 1000) {
      return InvalidArgumentError("duration {} ms is shorter than one second", *o.duration_ms);
    }
    s->duration_ms = *o.duration_ms;
    std::erase_if(s->events, [&](const EventSpec& e) {
      if (e.onset_ms < s->duration_ms) return false;
      dropped.push_back(e.id);
      return true;
    });
    std::erase_if(s->spam, [&](const SpamSpec& c) {
      if (c.start_ms < s->duration_ms) return false;
      dropped.push_back(c.id);
      return true;
    });
  }
  return dropped;
}

Result<Scenario> DefaultScenario() { return ParseScenario("", "<default scenario>"); }

Result<Scenario> LoadScenario(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) {
    return Status(text.status().code(),
                  fmt::format("scenario file '{}': {}", path, text.status().message()));
  }
  return ParseScenario(*text, path);
}

}  // namespace surge::stream::sim
