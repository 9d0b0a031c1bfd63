#include "stream/eval/eval.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "text/utf8.h"

namespace surge::stream::eval {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kMaxKeptErrors = 5;

size_t CodePoints(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += text::DecodeUtf8At(s, i).length) ++n;
  return n;
}

std::string Norm(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const text::DecodedChar c = text::DecodeUtf8At(s, i);
    const bool drop = c.cp == '#' || c.cp == ' ' || c.cp == '\t' || c.cp == '\n' || c.cp == '\r' ||
                      c.cp == 0x3000 || c.cp == 0xFF03;  // ＃, ideographic space
    if (!drop) {
      if (c.cp >= 'A' && c.cp <= 'Z') {
        out.push_back(static_cast<char>(c.cp - 'A' + 'a'));
      } else {
        out.append(s.substr(i, c.length));
      }
    }
    i += c.length;
  }
  return out;
}

std::vector<std::string> Surfaces(const TrendUpdate& t, int max_terms) {
  std::vector<std::string> out;
  auto add = [&](std::string_view s) {
    std::string n = Norm(s);
    if (CodePoints(n) >= 2) out.push_back(std::move(n));
  };
  add(t.hashtag);
  for (size_t i = 0; i < t.terms.size() && static_cast<int>(i) < max_terms; ++i) add(t.terms[i]);
  return out;
}

double Coverage(const std::vector<std::string>& surfaces, const std::string& phrase) {
  if (phrase.empty()) return 0;
  for (const auto& s : surfaces) {
    if (s.find(phrase) != std::string::npos) return 1;
  }
  std::vector<uint8_t> covered(phrase.size(), 0);  // per byte; counted per code point below
  for (const auto& s : surfaces) {
    for (size_t pos = phrase.find(s); pos != std::string::npos; pos = phrase.find(s, pos + 1)) {
      std::fill(covered.begin() + pos, covered.begin() + pos + s.size(), 1);
    }
  }
  size_t total = 0, hit = 0;
  for (size_t i = 0; i < phrase.size(); i += text::DecodeUtf8At(phrase, i).length) {
    ++total;
    hit += covered[i];
  }
  return total ? static_cast<double>(hit) / static_cast<double>(total) : 0;
}

struct Score {
  bool match = false;
  double score = 0;
};

// `spam`: also match when at least half of the topic's surfaces lie inside the phrase or hold a
// key term (rule (c) in eval.h).
Score ScoreTarget(const std::vector<std::string>& surfaces, std::string_view phrase,
                  const std::vector<std::string>& terms, bool spam) {
  const std::string np = Norm(phrase);
  const double cov = Coverage(surfaces, np);
  std::vector<std::string> nterms;
  for (const auto& k : terms) nterms.push_back(Norm(k));
  size_t covered = 0;
  for (const auto& nk : nterms) {
    if (nk.empty()) continue;
    for (const auto& s : surfaces) {
      if (s.find(nk) != std::string::npos) {
        ++covered;
        break;
      }
    }
  }
  Score r;
  r.match = cov >= 0.5 || (!terms.empty() && 2 * covered > terms.size());
  if (spam && !r.match && !surfaces.empty()) {
    size_t inside = 0;
    for (const auto& s : surfaces) {
      bool in = np.find(s) != std::string::npos;
      for (const auto& nk : nterms) in = in || (!nk.empty() && s.find(nk) != std::string::npos);
      inside += in;
    }
    r.match = 2 * inside >= surfaces.size();
  }
  r.score = cov + (terms.empty() ? 0 : static_cast<double>(covered) / terms.size());
  return r;
}

bool Overlaps(int64_t updated_ms, int64_t b, int64_t from, int64_t to) {
  return updated_ms > from && updated_ms - b <= to;
}

double Median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double NearestRank(std::vector<double> v, double q) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

nlohmann::ordered_json Num(double x) {
  if (!std::isfinite(x)) return nullptr;
  return std::round(x * 1e4) / 1e4;
}

std::string Cell(double x, int decimals = 3) {
  if (std::isnan(x)) return "-";
  if (std::isinf(x)) return "miss";
  return fmt::format("{:.{}f}", x, decimals);
}

// Display width: CJK characters take two columns.
size_t Width(std::string_view s) {
  size_t w = 0;
  for (size_t i = 0; i < s.size();) {
    const text::DecodedChar c = text::DecodeUtf8At(s, i);
    w += (c.cp >= 0x1100 &&
          (c.cp <= 0x115F || (c.cp >= 0x2E80 && c.cp <= 0xA4CF) ||
           (c.cp >= 0xAC00 && c.cp <= 0xD7A3) || (c.cp >= 0xF900 && c.cp <= 0xFAFF) ||
           (c.cp >= 0xFF00 && c.cp <= 0xFF60)))
             ? 2
             : 1;
    i += c.length;
  }
  return w;
}

std::string Pad(std::string_view s, size_t width) {
  std::string out(s);
  for (size_t w = Width(s); w < width; ++w) out.push_back(' ');
  return out;
}

}  // namespace

std::string_view SlotKindName(SlotKind kind) {
  switch (kind) {
    case SlotKind::kEvent:
      return "event";
    case SlotKind::kDuplicate:
      return "duplicate";
    case SlotKind::kSpam:
      return "spam";
    case SlotKind::kStale:
      return "stale";
    case SlotKind::kNoise:
      return "noise";
  }
  return "noise";
}

std::vector<HotList> CutIntoLists(std::vector<TrendUpdate> updates) {
  std::map<int64_t, std::vector<TrendUpdate>> groups;
  for (auto& u : updates) groups[u.updated_ms].push_back(std::move(u));
  std::vector<HotList> lists;
  lists.reserve(groups.size());
  for (auto& [updated, topics] : groups) {
    std::stable_sort(topics.begin(), topics.end(), [](const TrendUpdate& a, const TrendUpdate& b) {
      if (a.rank != b.rank) return a.rank < b.rank;
      return a.heat > b.heat;
    });
    lists.push_back({updated, std::move(topics)});
  }
  return lists;
}

Status ReadJsonlLines(std::istream& in, std::string_view source, bool skip_bad,
                      JsonlReadStats* stats,
                      const std::function<Status(std::string_view line)>& parse) {
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ++stats->lines;
    Status st = parse(line);
    if (st.ok()) continue;
    const std::string msg = fmt::format("{}:{}: {}", source, line_no, st.message());
    if (!skip_bad) {
      return InvalidArgumentError("{} (use --skip-bad to count and skip bad lines)", msg);
    }
    ++stats->skipped_lines;
    if (stats->first_errors.size() < kMaxKeptErrors) stats->first_errors.push_back(msg);
  }
  if (in.bad()) return DataLossError("{}: read error after line {}", source, line_no);
  return Status::Ok();
}

Result<TrendsFile> ReadTrends(std::istream& in, std::string_view source,
                              const TrendsReadOptions& options) {
  TrendsFile f;
  std::vector<TrendUpdate> updates;
  SURGE_RETURN_IF_ERROR(
      ReadJsonlLines(in, source, options.skip_bad, &f, [&](std::string_view line) -> Status {
        auto t = ParseTrend(line);
        if (!t.ok()) return t.status();
        updates.push_back(std::move(*t));
        return Status::Ok();
      }));
  f.lists = CutIntoLists(std::move(updates));
  return f;
}

Result<TrendsFile> LoadTrends(const std::string& path, const TrendsReadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("trends file '{}': cannot open it", path);
  return ReadTrends(in, path, options);
}

double PhraseCoverage(const TrendUpdate& topic, std::string_view phrase, int max_terms) {
  return Coverage(Surfaces(topic, max_terms), Norm(phrase));
}

TopicMatch MatchTopic(const TrendUpdate& topic, int64_t updated_ms, const Truth& truth,
                      const EvalOptions& options, const std::vector<bool>& already_matched) {
  const int64_t b = options.bucket_ms > 0 ? options.bucket_ms : truth.bucket_ms;
  const int64_t grace = options.grace_buckets * b;
  const std::vector<std::string> surfaces = Surfaces(topic, options.max_terms);
  struct Candidate {
    bool spam;
    int index;
    bool active;
    double score;
    int64_t start;
    const std::string* id;
  };
  std::vector<Candidate> cands;
  for (size_t i = 0; i < truth.events.size(); ++i) {
    const TruthEvent& e = truth.events[i];
    const Score s = ScoreTarget(surfaces, e.phrase, e.terms, false);
    if (!s.match) continue;
    cands.push_back({false, static_cast<int>(i),
                     Overlaps(updated_ms, b, e.onset_ms, e.end_ms + grace), s.score, e.onset_ms,
                     &e.id});
  }
  for (size_t i = 0; i < truth.spam.size(); ++i) {
    const TruthSpam& c = truth.spam[i];
    const Score s = ScoreTarget(surfaces, c.phrase, c.terms, true);
    if (!s.match) continue;
    cands.push_back({true, static_cast<int>(i),
                     Overlaps(updated_ms, b, c.start_ms, c.end_ms + grace), s.score, c.start_ms,
                     &c.id});
  }
  TopicMatch m;
  if (cands.empty()) return m;
  const bool any_active =
      std::any_of(cands.begin(), cands.end(), [](const Candidate& c) { return c.active; });
  const Candidate* best = nullptr;
  for (const auto& c : cands) {
    if (any_active && !c.active) continue;
    if (best == nullptr || c.score > best->score ||
        (c.score == best->score &&
         (c.start < best->start || (c.start == best->start && *c.id < *best->id)))) {
      best = &c;
    }
  }
  if (best->spam) {
    m.kind = SlotKind::kSpam;
    m.spam = best->index;
    return m;
  }
  m.event = best->index;
  if (!best->active) {
    m.kind = SlotKind::kStale;
  } else if (already_matched[best->index]) {
    m.kind = SlotKind::kDuplicate;
  } else {
    m.kind = SlotKind::kEvent;
  }
  return m;
}

Result<EvalReport> Evaluate(const Truth& truth, const std::vector<HotList>& lists,
                            const EvalOptions& options) {
  if (options.k <= 0) return InvalidArgumentError("k must be positive, got {}", options.k);
  if (options.grace_buckets < 0) {
    return InvalidArgumentError("grace buckets must be >= 0, got {}", options.grace_buckets);
  }
  if (options.max_terms <= 0) {
    return InvalidArgumentError("max terms must be positive, got {}", options.max_terms);
  }
  const int64_t b = options.bucket_ms > 0 ? options.bucket_ms : truth.bucket_ms;
  if (b <= 0) return InvalidArgumentError("bucket width must be positive, got {} ms", b);
  EvalReport r;
  r.k = options.k;
  r.bucket_ms = b;
  r.events = static_cast<int64_t>(truth.events.size());
  r.event_results.resize(truth.events.size());
  for (size_t i = 0; i < truth.events.size(); ++i) r.event_results[i].id = truth.events[i].id;
  r.spam_results.resize(truth.spam.size());
  for (size_t i = 0; i < truth.spam.size(); ++i) r.spam_results[i].id = truth.spam[i].id;

  std::vector<int64_t> spam_last_list(truth.spam.size(), -1);
  for (size_t li = 0; li < lists.size(); ++li) {
    const HotList& list = lists[li];
    const size_t n = std::min(list.topics.size(), static_cast<size_t>(options.k));
    if (n == 0) continue;
    ++r.lists;
    std::vector<bool> matched(truth.events.size(), false);
    for (size_t slot = 0; slot < n; ++slot) {
      const TrendUpdate& t = list.topics[slot];
      const int rank = static_cast<int>(slot) + 1;
      const TopicMatch m = MatchTopic(t, list.updated_ms, truth, options, matched);
      ++r.slots;
      switch (m.kind) {
        case SlotKind::kEvent: {
          ++r.event_slots;
          matched[m.event] = true;
          EventResult& e = r.event_results[m.event];
          if (!e.detected) {
            e.detected = true;
            e.first_listed_ms = list.updated_ms;
            e.delay_ms = list.updated_ms - truth.events[m.event].onset_ms;
            const double q = std::ceil(static_cast<double>(e.delay_ms) / static_cast<double>(b));
            e.delay_buckets = std::max<int64_t>(0, static_cast<int64_t>(q) - 1);
            e.best_rank = rank;
          }
          e.best_rank = std::min(e.best_rank, rank);
          ++e.lists;
          break;
        }
        case SlotKind::kDuplicate:
          ++r.duplicate_slots;
          break;
        case SlotKind::kSpam: {
          ++r.spam_slots;
          SpamResult& s = r.spam_results[m.spam];
          if (spam_last_list[m.spam] != static_cast<int64_t>(li)) {
            spam_last_list[m.spam] = static_cast<int64_t>(li);
            ++s.lists;
          }
          s.best_rank = s.best_rank == 0 ? rank : std::min(s.best_rank, rank);
          break;
        }
        case SlotKind::kStale:
          ++r.stale_slots;
          break;
        case SlotKind::kNoise:
          ++r.noise_slots;
          break;
      }
    }
  }
  r.precision_at_k =
      r.slots ? static_cast<double>(r.event_slots) / static_cast<double>(r.slots) : 0;
  const int64_t about_events = r.event_slots + r.duplicate_slots;
  r.duplicate_rate =
      about_events ? static_cast<double>(r.duplicate_slots) / static_cast<double>(about_events) : 0;
  std::vector<double> all, detected;
  for (const auto& e : r.event_results) {
    if (e.detected) {
      ++r.detected;
      all.push_back(static_cast<double>(e.delay_buckets));
      detected.push_back(static_cast<double>(e.delay_buckets));
    } else {
      all.push_back(kInf);
    }
  }
  r.recall = r.events ? static_cast<double>(r.detected) / static_cast<double>(r.events) : 0;
  r.delay_median_buckets = Median(all);
  r.delay_p90_buckets = NearestRank(all, 0.9);
  r.delay_median_detected_buckets = Median(detected);
  for (const auto& s : r.spam_results) r.spam_surfaced += s.lists > 0;
  return r;
}

std::string ReportToJson(const EvalReport& r) {
  using ordered = nlohmann::ordered_json;
  ordered events = ordered::array();
  for (const auto& e : r.event_results) {
    ordered j{{"id", e.id}, {"detected", e.detected}};
    if (e.detected) {
      j["first_listed_ms"] = e.first_listed_ms;
      j["delay_buckets"] = e.delay_buckets;
      j["delay_ms"] = e.delay_ms;
      j["best_rank"] = e.best_rank;
      j["lists"] = e.lists;
    }
    events.push_back(std::move(j));
  }
  ordered spam = ordered::array();
  for (const auto& s : r.spam_results) {
    spam.push_back(ordered{{"id", s.id}, {"lists", s.lists}, {"best_rank", s.best_rank}});
  }
  ordered j{{"k", r.k},
            {"bucket_ms", r.bucket_ms},
            {"precision_at_k", Num(r.precision_at_k)},
            {"recall", Num(r.recall)},
            {"delay_median_buckets", Num(r.delay_median_buckets)},
            {"delay_p90_buckets", Num(r.delay_p90_buckets)},
            {"delay_median_detected_buckets", Num(r.delay_median_detected_buckets)},
            {"spam_surfaced", r.spam_surfaced},
            {"duplicate_rate", Num(r.duplicate_rate)},
            {"events", r.events},
            {"detected", r.detected},
            {"lists", r.lists},
            {"slots", r.slots},
            {"event_slots", r.event_slots},
            {"duplicate_slots", r.duplicate_slots},
            {"spam_slots", r.spam_slots},
            {"stale_slots", r.stale_slots},
            {"noise_slots", r.noise_slots},
            {"per_event", std::move(events)},
            {"per_spam", std::move(spam)}};
  return j.dump();
}

std::string FormatReports(const std::vector<std::pair<std::string, EvalReport>>& reports) {
  if (reports.empty()) return "";
  const EvalReport& first = reports.front().second;
  std::vector<std::vector<std::string>> rows;
  auto row = [&](std::string name, auto cell) {
    std::vector<std::string> r{std::move(name)};
    for (const auto& [n, rep] : reports) r.push_back(cell(rep));
    rows.push_back(std::move(r));
  };
  rows.push_back({"metric"});
  for (const auto& [n, rep] : reports) rows.back().push_back(n);
  row(fmt::format("precision@{}", first.k),
      [](const EvalReport& e) { return Cell(e.precision_at_k); });
  row("recall", [](const EvalReport& e) {
    return fmt::format("{} ({}/{})", Cell(e.recall), e.detected, e.events);
  });
  row("delay median (buckets)",
      [](const EvalReport& e) { return Cell(e.delay_median_buckets, 1); });
  row("delay p90 (buckets)", [](const EvalReport& e) { return Cell(e.delay_p90_buckets, 1); });
  row("delay median, detected",
      [](const EvalReport& e) { return Cell(e.delay_median_detected_buckets, 1); });
  row("spam surfaced", [](const EvalReport& e) {
    return fmt::format("{}/{}", e.spam_surfaced, e.spam_results.size());
  });
  row("duplicate rate", [](const EvalReport& e) { return Cell(e.duplicate_rate); });
  row("lists / slots",
      [](const EvalReport& e) { return fmt::format("{} / {}", e.lists, e.slots); });
  row("slots event/dup/spam/stale/noise", [](const EvalReport& e) {
    return fmt::format("{}/{}/{}/{}/{}", e.event_slots, e.duplicate_slots, e.spam_slots,
                       e.stale_slots, e.noise_slots);
  });
  for (size_t i = 0; i < first.event_results.size(); ++i) {
    row(fmt::format("  {} delay (best rank)", first.event_results[i].id), [i](const EvalReport& e) {
      if (i >= e.event_results.size()) return std::string("-");
      const EventResult& x = e.event_results[i];
      return x.detected ? fmt::format("{} (#{})", x.delay_buckets, x.best_rank)
                        : std::string("miss");
    });
  }
  for (size_t i = 0; i < first.spam_results.size(); ++i) {
    row(fmt::format("  {} lists (best rank)", first.spam_results[i].id), [i](const EvalReport& e) {
      if (i >= e.spam_results.size()) return std::string("-");
      const SpamResult& x = e.spam_results[i];
      return x.lists ? fmt::format("{} (#{})", x.lists, x.best_rank) : std::string("0");
    });
  }
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], Width(r[c]));
  }
  std::string out;
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size(); ++c) {
      out += c + 1 < r.size() ? Pad(r[c], width[c] + 2) : r[c];
    }
    out += '\n';
  }
  return out;
}

}  // namespace surge::stream::eval
