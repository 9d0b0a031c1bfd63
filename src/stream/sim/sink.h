// Where simulated posts go. The generator only yields posts; a sink writes them. `surge simulate`
// writes JSONL files (or stdout); a Kafka producer or an in-process channel is one more PostSink.
//
// Thread safety: a sink is used by one thread at a time.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "core/status.h"
#include "stream/post.h"
#include "stream/sim/generator.h"

namespace surge::stream::sim {

class PostSink {
 public:
  virtual ~PostSink() = default;
  virtual Status Write(const Post& post) = 0;
  // Flushes and closes; Write after Close is an error.
  virtual Status Close() = 0;
};

// Buffered line writer over a file or stdout ("-"). Errors name the path.
class JsonlWriter {
 public:
  static Result<std::unique_ptr<JsonlWriter>> Open(const std::string& path);
  ~JsonlWriter();
  // Appends `line` and a newline.
  Status WriteLine(std::string_view line);
  Status Close();
  const std::string& path() const { return path_; }

 private:
  JsonlWriter(std::FILE* f, std::string path, bool owned);
  Status Flush();
  std::FILE* file_;
  std::string path_;
  bool owned_;
  std::string buffer_;
};

// One post JSON object per line (stream/post.h format).
class JsonlPostSink : public PostSink {
 public:
  static Result<std::unique_ptr<JsonlPostSink>> Open(const std::string& path);
  Status Write(const Post& post) override;
  Status Close() override;

 private:
  explicit JsonlPostSink(std::unique_ptr<JsonlWriter> w) : writer_(std::move(w)) {}
  std::unique_ptr<JsonlWriter> writer_;
  std::string line_;
};

// One label object per line (AppendLabelJson).
class JsonlLabelSink {
 public:
  static Result<std::unique_ptr<JsonlLabelSink>> Open(const std::string& path,
                                                      const Scenario* scenario);
  Status Write(const SimPost& post);
  Status Close();

 private:
  JsonlLabelSink(std::unique_ptr<JsonlWriter> w, const Scenario* s)
      : writer_(std::move(w)), scenario_(s) {}
  std::unique_ptr<JsonlWriter> writer_;
  const Scenario* scenario_;
  std::string line_;
};

// Writes `text` to `path` ("-" = stdout) as a whole.
Status WriteTextFile(const std::string& path, std::string_view text);

}  // namespace surge::stream::sim
