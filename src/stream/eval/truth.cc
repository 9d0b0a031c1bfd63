#include "stream/eval/truth.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/mmap_file.h"

namespace surge::stream::eval {
namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;

class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  Status Error(std::string_view path, std::string_view msg) const {
    return InvalidArgumentError("truth file '{}': field '{}': {}", source_, path, msg);
  }

  const json* Field(const json& obj, std::string_view path, std::string_view key, bool required,
                    Status* st) const {
    auto it = obj.find(std::string(key));
    if (it == obj.end() || it->is_null()) {
      if (required) *st = Error(Join(path, key), "required field is missing");
      return nullptr;
    }
    return &*it;
  }

  Status Int(const json& obj, std::string_view path, std::string_view key, int64_t* out,
             bool required) const {
    Status st;
    const json* v = Field(obj, path, key, required, &st);
    if (v == nullptr) return st;
    if (!v->is_number_integer()) return Error(Join(path, key), "expected an integer");
    *out = v->get<int64_t>();
    return Status::Ok();
  }

  Status Double(const json& obj, std::string_view path, std::string_view key, double* out,
                bool required) const {
    Status st;
    const json* v = Field(obj, path, key, required, &st);
    if (v == nullptr) return st;
    if (!v->is_number()) return Error(Join(path, key), "expected a number");
    *out = v->get<double>();
    return Status::Ok();
  }

  Status String(const json& obj, std::string_view path, std::string_view key, std::string* out,
                bool required) const {
    Status st;
    const json* v = Field(obj, path, key, required, &st);
    if (v == nullptr) return st;
    if (!v->is_string() || v->get_ref<const std::string&>().empty()) {
      return Error(Join(path, key), "expected a non-empty string");
    }
    *out = v->get<std::string>();
    return Status::Ok();
  }

  Status Strings(const json& obj, std::string_view path, std::string_view key,
                 std::vector<std::string>* out) const {
    Status st;
    const json* v = Field(obj, path, key, true, &st);
    if (v == nullptr) return st;
    if (!v->is_array()) return Error(Join(path, key), "expected a list of strings");
    out->clear();
    for (const auto& item : *v) {
      if (!item.is_string() || item.get_ref<const std::string&>().empty()) {
        return Error(Join(path, key), "expected a list of non-empty strings");
      }
      out->push_back(item.get<std::string>());
    }
    return Status::Ok();
  }

  static std::string Join(std::string_view path, std::string_view key) {
    return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
  }

 private:
  std::string source_;
};

Status ReadEvent(const Reader& r, const json& e, const std::string& path, TruthEvent* out) {
  if (!e.is_object()) return r.Error(path, "expected an object");
  SURGE_RETURN_IF_ERROR(r.String(e, path, "id", &out->id, true));
  SURGE_RETURN_IF_ERROR(r.String(e, path, "phrase", &out->phrase, true));
  SURGE_RETURN_IF_ERROR(r.Strings(e, path, "terms", &out->terms));
  SURGE_RETURN_IF_ERROR(r.String(e, path, "category", &out->category, false));
  SURGE_RETURN_IF_ERROR(r.Int(e, path, "onset_ms", &out->onset_ms, true));
  SURGE_RETURN_IF_ERROR(r.Int(e, path, "peak_ms", &out->peak_ms, true));
  SURGE_RETURN_IF_ERROR(r.Int(e, path, "end_ms", &out->end_ms, true));
  SURGE_RETURN_IF_ERROR(r.Double(e, path, "peak_per_min", &out->peak_per_min, false));
  SURGE_RETURN_IF_ERROR(r.Double(e, path, "expected_posts", &out->expected_posts, false));
  SURGE_RETURN_IF_ERROR(r.Int(e, path, "posts", &out->posts, false));
  SURGE_RETURN_IF_ERROR(r.Int(e, path, "authors", &out->authors, false));
  auto s = e.find("sentiment");
  if (s != e.end() && s->is_object()) {
    const std::string sp = path + ".sentiment";
    SURGE_RETURN_IF_ERROR(r.Double(*s, sp, "pos", &out->sentiment.pos, true));
    SURGE_RETURN_IF_ERROR(r.Double(*s, sp, "neu", &out->sentiment.neu, true));
    SURGE_RETURN_IF_ERROR(r.Double(*s, sp, "neg", &out->sentiment.neg, true));
  }
  if (out->end_ms < out->onset_ms) return r.Error(path + ".end_ms", "end_ms is before onset_ms");
  return Status::Ok();
}

Status ReadSpam(const Reader& r, const json& e, const std::string& path, TruthSpam* out) {
  if (!e.is_object()) return r.Error(path, "expected an object");
  SURGE_RETURN_IF_ERROR(r.String(e, path, "id", &out->id, true));
  SURGE_RETURN_IF_ERROR(r.String(e, path, "phrase", &out->phrase, true));
  SURGE_RETURN_IF_ERROR(r.Strings(e, path, "terms", &out->terms));
  SURGE_RETURN_IF_ERROR(r.String(e, path, "category", &out->category, false));
  SURGE_RETURN_IF_ERROR(r.Int(e, path, "start_ms", &out->start_ms, true));
  SURGE_RETURN_IF_ERROR(r.Int(e, path, "end_ms", &out->end_ms, true));
  SURGE_RETURN_IF_ERROR(r.Double(e, path, "expected_posts", &out->expected_posts, false));
  SURGE_RETURN_IF_ERROR(r.Int(e, path, "posts", &out->posts, false));
  SURGE_RETURN_IF_ERROR(r.Int(e, path, "bots", &out->bots, false));
  if (out->end_ms < out->start_ms) return r.Error(path + ".end_ms", "end_ms is before start_ms");
  return Status::Ok();
}

double Round4(double x) { return std::round(x * 1e4) / 1e4; }

ordered SentimentJson(const Sentiment& s) {
  return ordered{{"pos", Round4(s.pos)}, {"neu", Round4(s.neu)}, {"neg", Round4(s.neg)}};
}

}  // namespace

Result<Truth> ParseTruth(std::string_view text, std::string_view source) {
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return InvalidArgumentError("truth file '{}': not valid JSON: {}", source, e.what());
  }
  const Reader r(source);
  if (!doc.is_object()) return r.Error("", "the file must hold one JSON object");
  std::string format;
  SURGE_RETURN_IF_ERROR(r.String(doc, "", "format", &format, true));
  if (format != kTruthFormat) {
    return r.Error("format", fmt::format("unsupported format '{}' (this build reads '{}')", format,
                                         kTruthFormat));
  }
  Truth t;
  SURGE_RETURN_IF_ERROR(r.String(doc, "", "scenario", &t.scenario, false));
  int64_t seed = 0;
  SURGE_RETURN_IF_ERROR(r.Int(doc, "", "seed", &seed, false));
  t.seed = static_cast<uint64_t>(seed);
  SURGE_RETURN_IF_ERROR(r.Int(doc, "", "start_ms", &t.start_ms, true));
  SURGE_RETURN_IF_ERROR(r.Int(doc, "", "end_ms", &t.end_ms, true));
  SURGE_RETURN_IF_ERROR(r.Int(doc, "", "bucket_ms", &t.bucket_ms, true));
  if (t.bucket_ms <= 0) return r.Error("bucket_ms", "must be positive");
  SURGE_RETURN_IF_ERROR(r.Int(doc, "", "posts", &t.posts, false));
  for (std::string_view key : {"events", "spam"}) {
    auto it = doc.find(std::string(key));
    if (it == doc.end()) return r.Error(key, "required field is missing");
    if (!it->is_array()) return r.Error(key, "expected a list");
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string path = fmt::format("{}[{}]", key, i);
      if (key == "events") {
        SURGE_RETURN_IF_ERROR(ReadEvent(r, (*it)[i], path, &t.events.emplace_back()));
      } else {
        SURGE_RETURN_IF_ERROR(ReadSpam(r, (*it)[i], path, &t.spam.emplace_back()));
      }
    }
  }
  return t;
}

Result<Truth> LoadTruth(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) {
    return Status(text.status().code(),
                  fmt::format("truth file '{}': {}", path, text.status().message()));
  }
  return ParseTruth(*text, path);
}

std::string TruthToJson(const Truth& t) {
  ordered events = ordered::array();
  for (const auto& e : t.events) {
    events.push_back(ordered{{"id", e.id},
                             {"phrase", e.phrase},
                             {"terms", e.terms},
                             {"category", e.category},
                             {"sentiment", SentimentJson(e.sentiment)},
                             {"onset_ms", e.onset_ms},
                             {"peak_ms", e.peak_ms},
                             {"end_ms", e.end_ms},
                             {"peak_per_min", e.peak_per_min},
                             {"expected_posts", e.expected_posts},
                             {"posts", e.posts},
                             {"authors", e.authors}});
  }
  ordered spam = ordered::array();
  for (const auto& c : t.spam) {
    spam.push_back(ordered{{"id", c.id},
                           {"phrase", c.phrase},
                           {"terms", c.terms},
                           {"category", c.category},
                           {"start_ms", c.start_ms},
                           {"end_ms", c.end_ms},
                           {"expected_posts", c.expected_posts},
                           {"posts", c.posts},
                           {"bots", c.bots}});
  }
  // One line per event or campaign, fields in the documented order.
  std::string out = "{\n";
  auto field = [&](std::string_view key, const ordered& value, bool last = false) {
    out += fmt::format("  \"{}\": {}{}\n", key, value.dump(-1, ' ', false), last ? "" : ",");
  };
  field("format", std::string(kTruthFormat));
  field("scenario", t.scenario);
  field("seed", t.seed);
  field("start_ms", t.start_ms);
  field("end_ms", t.end_ms);
  field("bucket_ms", t.bucket_ms);
  field("posts", t.posts);
  auto list = [&](std::string_view key, const ordered& items, bool last) {
    out += fmt::format("  \"{}\": [", key);
    for (size_t i = 0; i < items.size(); ++i) {
      out += fmt::format("{}\n    {}", i ? "," : "", items[i].dump(-1, ' ', false));
    }
    out += items.empty() ? "]" : "\n  ]";
    out += last ? "\n" : ",\n";
  };
  list("events", events, false);
  list("spam", spam, true);
  out += "}\n";
  return out;
}

}  // namespace surge::stream::eval
