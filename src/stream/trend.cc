#include "stream/trend.h"

#include <simdjson.h>

#include <iterator>

#include "stream/post.h"

namespace surge::stream {
namespace {

namespace od = simdjson::ondemand;

void AppendStringArray(const std::vector<std::string>& v, std::string* out) {
  out->push_back('[');
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out->push_back(',');
    AppendJsonString(v[i], out);
  }
  out->push_back(']');
}

Status FieldError(std::string_view field, simdjson::error_code err) {
  return InvalidArgumentError("trend update: field '{}': {}", field, simdjson::error_message(err));
}

Status ReadStrings(od::value& v, std::string_view field, std::vector<std::string>* out) {
  od::array arr;
  if (auto err = v.get_array().get(arr)) return FieldError(field, err);
  out->clear();
  for (auto item : arr) {
    std::string_view s;
    if (auto err = item.get_string().get(s)) return FieldError(field, err);
    out->emplace_back(s);
  }
  return Status::Ok();
}

}  // namespace

void AppendTrendJson(const TrendUpdate& t, std::string* out) {
  auto it = std::back_inserter(*out);
  out->append("{\"topic_id\":");
  AppendJsonString(t.topic_id, out);
  out->append(",\"hashtag\":");
  AppendJsonString(t.hashtag, out);
  fmt::format_to(it, ",\"rank\":{},\"prev_rank\":", t.rank);
  if (t.prev_rank) {
    fmt::format_to(it, "{}", *t.prev_rank);
  } else {
    out->append("null");
  }
  fmt::format_to(it, ",\"heat\":{:.2f},\"terms\":", t.heat);
  AppendStringArray(t.terms, out);
  out->append(",\"category\":");
  AppendJsonString(t.category, out);
  fmt::format_to(it,
                 ",\"sentiment\":{{\"pos\":{:.3f},\"neu\":{:.3f},\"neg\":{:.3f}}},\"posts\":{},"
                 "\"authors\":{},\"first_seen\":{},\"updated\":{},\"samples\":",
                 t.sentiment.pos, t.sentiment.neu, t.sentiment.neg, t.posts, t.authors,
                 t.first_seen_ms, t.updated_ms);
  AppendStringArray(t.samples, out);
  out->push_back('}');
}

std::string TrendToJson(const TrendUpdate& t) {
  std::string s;
  AppendTrendJson(t, &s);
  return s;
}

Result<TrendUpdate> ParseTrend(std::string_view json) {
  simdjson::padded_string padded(json);
  od::parser parser;
  od::document doc;
  if (auto err = parser.iterate(padded).get(doc)) {
    return InvalidArgumentError("trend update: {}", simdjson::error_message(err));
  }
  od::object obj;
  if (auto err = doc.get_object().get(obj)) {
    return InvalidArgumentError("trend update: expected a JSON object: {}",
                                simdjson::error_message(err));
  }
  TrendUpdate t;
  bool has_topic = false, has_rank = false, has_updated = false;
  for (auto field : obj) {
    std::string_view key;
    if (auto err = field.unescaped_key().get(key)) return FieldError("<key>", err);
    od::value v;
    if (auto err = field.value().get(v)) return FieldError(key, err);
    std::string_view s;
    int64_t i = 0;
    double d = 0;
    if (key == "topic_id") {
      if (auto err = v.get_string().get(s)) return FieldError(key, err);
      t.topic_id = s;
      has_topic = true;
    } else if (key == "hashtag") {
      if (auto err = v.get_string().get(s)) return FieldError(key, err);
      t.hashtag = s;
    } else if (key == "category") {
      if (auto err = v.get_string().get(s)) return FieldError(key, err);
      t.category = s;
    } else if (key == "rank") {
      if (auto err = v.get_int64().get(i)) return FieldError(key, err);
      t.rank = static_cast<int>(i);
      has_rank = true;
    } else if (key == "prev_rank") {
      bool is_null = false;
      if (!v.is_null().get(is_null) && is_null) continue;
      if (auto err = v.get_int64().get(i)) return FieldError(key, err);
      t.prev_rank = static_cast<int>(i);
    } else if (key == "heat") {
      if (auto err = v.get_double().get(d)) return FieldError(key, err);
      t.heat = d;
    } else if (key == "terms") {
      SURGE_RETURN_IF_ERROR(ReadStrings(v, key, &t.terms));
    } else if (key == "samples") {
      SURGE_RETURN_IF_ERROR(ReadStrings(v, key, &t.samples));
    } else if (key == "sentiment") {
      od::object so;
      if (auto err = v.get_object().get(so)) return FieldError(key, err);
      for (auto sf : so) {
        std::string_view sk;
        if (auto err = sf.unescaped_key().get(sk)) return FieldError("sentiment", err);
        if (auto err = sf.value().get_double().get(d)) return FieldError("sentiment", err);
        if (sk == "pos") t.sentiment.pos = d;
        if (sk == "neu") t.sentiment.neu = d;
        if (sk == "neg") t.sentiment.neg = d;
      }
    } else if (key == "posts" || key == "authors" || key == "first_seen" || key == "updated") {
      if (auto err = v.get_int64().get(i)) return FieldError(key, err);
      if (key == "posts") t.posts = i;
      if (key == "authors") t.authors = i;
      if (key == "first_seen") t.first_seen_ms = i;
      if (key == "updated") {
        t.updated_ms = i;
        has_updated = true;
      }
    }
  }
  if (!doc.current_location().error())
    return InvalidArgumentError("trend update: trailing content");
  if (!has_topic) return InvalidArgumentError("trend update: field 'topic_id' is required");
  if (!has_rank) return InvalidArgumentError("trend update: field 'rank' is required");
  if (!has_updated) return InvalidArgumentError("trend update: field 'updated' is required");
  return t;
}

}  // namespace surge::stream
