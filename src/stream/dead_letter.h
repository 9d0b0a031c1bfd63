// Dead-letter sink: where records that cannot be processed go, with the reason, so that one bad
// record never stops the stream and none is silently dropped (DESIGN.md §5).
//
// Each dead letter is one JSON line:
//   {"kind":"bad_type","message":"bad_type: field 'ts': expected an integer ...",
//    "source":"posts.jsonl","line":12,"partition":0,"offset":3456,"raw":"{...}"}
// `kind` is PostErrorKind's vocabulary (json, missing_field, bad_type, bad_utf8, too_large,
// bad_value) or another stage's own; `line` is 0 where the input has no lines; `raw` is the
// record as a JSON string (invalid UTF-8 bytes become U+FFFD), cut to kMaxDeadLetterRaw bytes with
// "raw_truncated":true when longer. Counts are kept per kind; the first record of each kind is
// logged (warn) and later ones only counted, so a flood of bad input cannot flood the log.
//
// Thread safety: Add() and the accessors may be called from any thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "core/status.h"
#include "stream/records.h"

namespace surge::stream {

inline constexpr size_t kMaxDeadLetterRaw = 64 * 1024;

struct DeadLetter {
  std::string_view kind;
  std::string_view message;
  std::string_view source;  // input name
  int64_t line = 0;
  InputPosition position;
  std::string_view raw;
};

class DeadLetterSink {
 public:
  // Writes to `path` (created or truncated; "-" = stderr); an empty path only counts and logs.
  static Result<std::unique_ptr<DeadLetterSink>> Open(const std::string& path);
  ~DeadLetterSink();

  void Add(const DeadLetter& letter);
  // Flushes the file; reports a write error that happened on the way (once).
  Status Flush();

  int64_t total() const;
  std::map<std::string, int64_t> counts() const;
  const std::string& path() const { return path_; }

 private:
  DeadLetterSink() = default;

  mutable std::mutex mu_;
  std::string path_;
  FILE* file_ = nullptr;
  bool owns_file_ = false;
  bool write_failed_ = false;
  std::string line_;
  std::map<std::string, int64_t, std::less<>> counts_;
  int64_t total_ = 0;
};

}  // namespace surge::stream
