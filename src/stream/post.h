// The post: the unit the trend pipeline consumes (DESIGN.md §5), one JSON object per JSONL line or
// per Kafka message value:
//
//   {"id":"p1","ts":1764669600123,"user":{"id":"u1","followers":1234,"verified":false,
//    "created":1600000000000},"text":"…","repost_of":null,"reposts":0,"comments":0,"likes":0}
//
// Required: id (non-empty string), ts (integer ms since the epoch), user.id (non-empty string),
// text (string, valid UTF-8). Optional (default 0/false/null): user.followers, user.verified,
// user.created (ms), repost_of (string or null), reposts, comments, likes (non-negative
// integers). Unknown fields are ignored, so producers may add their own.
//
// Thread safety: PostParser is not thread-safe (one per thread); the free functions are pure.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace surge::stream {

struct User {
  std::string id;
  int64_t followers = 0;
  bool verified = false;
  int64_t created_ms = 0;  // account creation time; 0 = unknown
};

struct Post {
  std::string id;
  int64_t ts_ms = 0;
  User user;
  std::string text;
  std::optional<std::string> repost_of;  // id of the reposted post
  int64_t reposts = 0;
  int64_t comments = 0;
  int64_t likes = 0;
};

// Longest post JSON accepted (bytes); longer records are rejected as a whole.
inline constexpr size_t kMaxPostBytes = 1u << 20;

// Parses one post. Errors are InvalidArgument and name the field and what was wrong ("field
// 'ts': expected an integer (ms since the epoch), got a string"); the error's first word
// before ':' is a stable kind for dead-letter counting (see PostErrorKind).
class PostParser {
 public:
  PostParser();
  ~PostParser();
  PostParser(PostParser&&) noexcept;
  PostParser& operator=(PostParser&&) noexcept;

  Result<Post> Parse(std::string_view json);
  // Same, reusing `out`'s storage.
  Status ParseInto(std::string_view json, Post* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A short stable name for why a record was rejected ("json", "missing_field", "bad_type",
// "bad_utf8", "too_large", "bad_value"), for dead-letter counters.
std::string_view PostErrorKind(const Status& status);

// Appends the post as one JSON object (no newline) in the field order above; strings are escaped
// so that ParsePost(AppendPostJson(p)) == p.
void AppendPostJson(const Post& post, std::string* out);
std::string PostToJson(const Post& post);

// Appends `s` as a JSON string literal (quotes included), escaping what JSON requires. `s` must be
// valid UTF-8 (invalid bytes are written as U+FFFD).
void AppendJsonString(std::string_view s, std::string* out);

}  // namespace surge::stream
