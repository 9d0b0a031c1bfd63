// Post sources: where the pipeline's posts come from. A source fills RecordBlocks (records.h) with
// raw JSON records (parsed later, in parallel, by annotate) or with posts it already has as
// structs (in-process producers such as the simulator).
//
//  * JsonlSource: a JSONL file or stdin ("-"), read in large blocks and split at newlines. Blank
//    lines are skipped; a trailing '\r' is dropped; a line longer than kMaxPostBytes is reported
//    as a "too_large" SourceError (with its first bytes) and skipped, and reading goes on.
//    Positions: partition 0, offset = the line's byte offset; line numbers are 1-based.
//  * PostGeneratorSource: wraps a PostGenerator, anything that yields Posts in timestamp order
//    (the simulator library implements PostGenerator). Positions: partition 0, offset = index.
//  * The Kafka post source (another file) implements PostSource over a consumer.
//
// Thread safety: a source is used by one thread (the pipeline's reader).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "stream/records.h"

namespace surge::stream {

class PostSource {
 public:
  virtual ~PostSource() = default;
  // Appends up to `max_records` records to `block` (which the caller cleared). Returns true while
  // more may follow, false at the end of the input (the block may still hold the last records).
  // An error means the input cannot be read any further (e.g. an I/O error), not a bad record.
  virtual Result<bool> Read(RecordBlock* block, size_t max_records) = 0;
  // The records before `offsets` are fully processed and checkpointed (Kafka commits; files
  // ignore it).
  virtual Status Commit(const Offsets& offsets) {
    (void)offsets;
    return Status::Ok();
  }
  // A name for messages and dead letters ("posts.jsonl", "stdin", "sim:default").
  virtual const std::string& name() const = 0;
};

class JsonlSource final : public PostSource {
 public:
  // `path` "-" reads stdin. Errors: the file cannot be opened (names it and the reason).
  static Result<std::unique_ptr<JsonlSource>> Open(const std::string& path,
                                                   size_t read_bytes = 4u << 20);
  ~JsonlSource() override;

  Result<bool> Read(RecordBlock* block, size_t max_records) override;
  const std::string& name() const override { return name_; }

  int64_t lines() const { return line_; }
  int64_t bytes() const { return consumed_; }

 private:
  JsonlSource() = default;
  Result<bool> Fill();

  std::string name_;
  int fd_ = -1;
  bool owns_fd_ = false;
  size_t read_bytes_ = 0;
  std::string buf_;  // bytes read and not yet handed out: buf_[begin_, end_)
  size_t begin_ = 0;
  bool eof_ = false;
  bool skipping_ = false;  // inside an over-long line, dropping bytes to the next newline
  int64_t line_ = 0;       // lines handed out so far
  int64_t consumed_ = 0;   // byte offset of buf_[begin_]
};

class PostGenerator {
 public:
  virtual ~PostGenerator() = default;
  // Appends up to `max` posts (timestamp order) to `out`; returns how many, 0 at the end.
  virtual Result<size_t> Next(std::vector<Post>* out, size_t max) = 0;
};

// A generator over a vector of posts (tests, replays).
class VectorPostGenerator final : public PostGenerator {
 public:
  explicit VectorPostGenerator(std::vector<Post> posts) : posts_(std::move(posts)) {}
  Result<size_t> Next(std::vector<Post>* out, size_t max) override;

 private:
  std::vector<Post> posts_;
  size_t next_ = 0;
};

class PostGeneratorSource final : public PostSource {
 public:
  PostGeneratorSource(std::unique_ptr<PostGenerator> generator, std::string name)
      : gen_(std::move(generator)), name_(std::move(name)) {}
  Result<bool> Read(RecordBlock* block, size_t max_records) override;
  const std::string& name() const override { return name_; }

 private:
  std::unique_ptr<PostGenerator> gen_;
  std::string name_;
  int64_t index_ = 0;
};

}  // namespace surge::stream
