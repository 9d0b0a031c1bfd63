#include "stream/post.h"

#include <simdjson.h>

#include <cmath>
#include <cstring>
#include <iterator>

#include "text/utf8.h"

namespace surge::stream {
namespace {

namespace od = simdjson::ondemand;

Status Bad(std::string_view kind, std::string_view what) {
  return InvalidArgumentError("{}: {}", kind, what);
}

Status TypeError(std::string_view field, std::string_view expected, od::value& v) {
  od::json_type t;
  std::string_view got = "an invalid value";
  if (!v.type().get(t)) {
    switch (t) {
      case od::json_type::array:
        got = "an array";
        break;
      case od::json_type::object:
        got = "an object";
        break;
      case od::json_type::number:
        got = "a number";
        break;
      case od::json_type::string:
        got = "a string";
        break;
      case od::json_type::boolean:
        got = "a boolean";
        break;
      case od::json_type::null:
        got = "null";
        break;
    }
  }
  return InvalidArgumentError("bad_type: field '{}': expected {}, got {}", field, expected, got);
}

Status GetString(od::value& v, std::string_view field, std::string* out) {
  std::string_view s;
  if (v.get_string().get(s)) return TypeError(field, "a string", v);
  out->assign(s);
  return Status::Ok();
}

// Integers; a JSON number with no fractional part written as a double (1.7e12) is accepted too,
// since some producers write every number as a double.
Status GetInt(od::value& v, std::string_view field, bool non_negative, int64_t* out) {
  od::number_type nt;
  if (v.get_number_type().get(nt)) return TypeError(field, "an integer", v);
  if (nt == od::number_type::signed_integer) {
    if (v.get_int64().get(*out)) return TypeError(field, "an integer", v);
  } else if (nt == od::number_type::unsigned_integer) {
    return Bad("bad_value", fmt::format("field '{}': integer out of the int64 range", field));
  } else {
    double d;
    if (v.get_double().get(d)) return TypeError(field, "an integer", v);
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e18) {
      return Bad("bad_type", fmt::format("field '{}': expected an integer, got {}", field, d));
    }
    *out = static_cast<int64_t>(d);
  }
  if (non_negative && *out < 0) {
    return Bad("bad_value", fmt::format("field '{}': must be >= 0, got {}", field, *out));
  }
  return Status::Ok();
}

Status ParseUser(od::value& v, User* u, bool* has_id) {
  od::object obj;
  if (v.get_object().get(obj)) return TypeError("user", "an object", v);
  for (auto field : obj) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return Bad("json", "malformed key in 'user'");
    od::value fv = field.value();
    if (key == "id") {
      SURGE_RETURN_IF_ERROR(GetString(fv, "user.id", &u->id));
      *has_id = true;
    } else if (key == "followers") {
      SURGE_RETURN_IF_ERROR(GetInt(fv, "user.followers", true, &u->followers));
    } else if (key == "verified") {
      bool b;
      if (fv.get_bool().get(b)) return TypeError("user.verified", "a boolean", fv);
      u->verified = b;
    } else if (key == "created") {
      bool is_null = false;
      if (!fv.is_null().get(is_null) && is_null) continue;
      SURGE_RETURN_IF_ERROR(GetInt(fv, "user.created", true, &u->created_ms));
    }
  }
  return Status::Ok();
}

}  // namespace

struct PostParser::Impl {
  od::parser parser;
  simdjson::padded_string buffer;
};

PostParser::PostParser() : impl_(std::make_unique<Impl>()) {}
PostParser::~PostParser() = default;
PostParser::PostParser(PostParser&&) noexcept = default;
PostParser& PostParser::operator=(PostParser&&) noexcept = default;

Result<Post> PostParser::Parse(std::string_view json) {
  Post p;
  SURGE_RETURN_IF_ERROR(ParseInto(json, &p));
  return p;
}

Status PostParser::ParseInto(std::string_view json, Post* p) {
  if (json.size() > kMaxPostBytes) {
    return Bad("too_large",
               fmt::format("record of {} bytes, the limit is {}", json.size(), kMaxPostBytes));
  }
  // Keep a padded copy (simdjson reads up to SIMDJSON_PADDING bytes past the end).
  if (impl_->buffer.size() < json.size()) {
    impl_->buffer = simdjson::padded_string(json.size() * 2 + 64);
  }
  std::memcpy(impl_->buffer.data(), json.data(), json.size());
  od::document doc;
  auto err = impl_->parser
                 .iterate(impl_->buffer.data(), json.size(),
                          impl_->buffer.size() + simdjson::SIMDJSON_PADDING)
                 .get(doc);
  if (err == simdjson::UTF8_ERROR) return Bad("bad_utf8", "the record is not valid UTF-8");
  if (err) return Bad("json", simdjson::error_message(err));
  od::json_type type;
  err = doc.type().get(type);
  if (err) return Bad("json", simdjson::error_message(err));
  if (type != od::json_type::object) {
    // Rare path: tell valid non-object JSON from garbage with the validating DOM parser.
    simdjson::dom::parser dom;
    simdjson::dom::element e;
    if (auto derr = dom.parse(json.data(), json.size()).get(e)) {
      return Bad("json", simdjson::error_message(derr));
    }
    return Bad("bad_type", "a post must be a JSON object");
  }
  od::object obj;
  err = doc.get_object().get(obj);
  if (err) return Bad("json", simdjson::error_message(err));
  *p = Post{};
  bool has_id = false, has_ts = false, has_user = false, has_user_id = false, has_text = false;
  for (auto field : obj) {
    std::string_view key;
    err = field.unescaped_key().get(key);
    if (err)
      return Bad(err == simdjson::UTF8_ERROR ? "bad_utf8" : "json", simdjson::error_message(err));
    od::value v;
    err = field.value().get(v);
    if (err) return Bad("json", simdjson::error_message(err));
    if (key == "id") {
      SURGE_RETURN_IF_ERROR(GetString(v, "id", &p->id));
      has_id = true;
    } else if (key == "ts") {
      SURGE_RETURN_IF_ERROR(GetInt(v, "ts", false, &p->ts_ms));
      has_ts = true;
    } else if (key == "user") {
      SURGE_RETURN_IF_ERROR(ParseUser(v, &p->user, &has_user_id));
      has_user = true;
    } else if (key == "text") {
      SURGE_RETURN_IF_ERROR(GetString(v, "text", &p->text));
      has_text = true;
    } else if (key == "repost_of") {
      bool is_null = false;
      if (!v.is_null().get(is_null) && is_null) {
        p->repost_of.reset();
      } else {
        std::string s;
        SURGE_RETURN_IF_ERROR(GetString(v, "repost_of", &s));
        if (s.empty())
          p->repost_of.reset();
        else
          p->repost_of = std::move(s);
      }
    } else if (key == "reposts") {
      SURGE_RETURN_IF_ERROR(GetInt(v, "reposts", true, &p->reposts));
    } else if (key == "comments") {
      SURGE_RETURN_IF_ERROR(GetInt(v, "comments", true, &p->comments));
    } else if (key == "likes") {
      SURGE_RETURN_IF_ERROR(GetInt(v, "likes", true, &p->likes));
    }
  }
  // The object iteration stops at the first syntax error inside it; make sure all was consumed.
  if (!doc.current_location().error()) return Bad("json", "trailing content after the post object");
  if (!has_id) return Bad("missing_field", "field 'id' is required");
  if (p->id.empty()) return Bad("bad_value", "field 'id' must not be empty");
  if (!has_ts) return Bad("missing_field", "field 'ts' (ms since the epoch) is required");
  if (!has_user) return Bad("missing_field", "field 'user' is required");
  if (!has_user_id) return Bad("missing_field", "field 'user.id' is required");
  if (p->user.id.empty()) return Bad("bad_value", "field 'user.id' must not be empty");
  if (!has_text) return Bad("missing_field", "field 'text' is required");
  return Status::Ok();
}

std::string_view PostErrorKind(const Status& status) {
  std::string_view m = status.message();
  for (std::string_view kind :
       {"json", "missing_field", "bad_type", "bad_utf8", "too_large", "bad_value"}) {
    if (m.size() > kind.size() && m.substr(0, kind.size()) == kind && m[kind.size()] == ':') {
      return kind;
    }
  }
  return "other";
}

void AppendJsonString(std::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      text::DecodedChar d = text::DecodeUtf8At(s, i);
      if (d.valid) {
        out->append(s.substr(i, d.length));
      } else {
        out->append("\xEF\xBF\xBD");  // U+FFFD, one per invalid byte
      }
      i += d.length;
      continue;
    }
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 15]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

void AppendPostJson(const Post& p, std::string* out) {
  out->append("{\"id\":");
  AppendJsonString(p.id, out);
  fmt::format_to(std::back_inserter(*out), ",\"ts\":{},\"user\":{{\"id\":", p.ts_ms);
  AppendJsonString(p.user.id, out);
  fmt::format_to(std::back_inserter(*out),
                 ",\"followers\":{},\"verified\":{},\"created\":{}}},\"text\":", p.user.followers,
                 p.user.verified ? "true" : "false", p.user.created_ms);
  AppendJsonString(p.text, out);
  out->append(",\"repost_of\":");
  if (p.repost_of) {
    AppendJsonString(*p.repost_of, out);
  } else {
    out->append("null");
  }
  fmt::format_to(std::back_inserter(*out), ",\"reposts\":{},\"comments\":{},\"likes\":{}}}",
                 p.reposts, p.comments, p.likes);
}

std::string PostToJson(const Post& post) {
  std::string s;
  AppendPostJson(post, &s);
  return s;
}

}  // namespace surge::stream
