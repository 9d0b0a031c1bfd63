#include "stream/source.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace surge::stream {

Result<std::unique_ptr<JsonlSource>> JsonlSource::Open(const std::string& path, size_t read_bytes) {
  std::unique_ptr<JsonlSource> s(new JsonlSource());
  s->read_bytes_ = std::max<size_t>(read_bytes, 4096);
  if (path == "-") {
    s->fd_ = 0;
    s->name_ = "stdin";
  } else {
    s->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (s->fd_ < 0) {
      return InvalidArgumentError("cannot open the post source '{}': {}", path,
                                  std::strerror(errno));
    }
    s->owns_fd_ = true;
    s->name_ = path;
#ifdef POSIX_FADV_SEQUENTIAL
    ::posix_fadvise(s->fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
  }
  return s;
}

JsonlSource::~JsonlSource() {
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
}

// Reads up to read_bytes_ more bytes after the unconsumed tail. Returns false at end of file.
Result<bool> JsonlSource::Fill() {
  if (begin_ > 0) {
    buf_.erase(0, begin_);
    begin_ = 0;
  }
  size_t have = buf_.size();
  buf_.resize(have + read_bytes_);
  ssize_t n;
  do {
    n = ::read(fd_, buf_.data() + have, read_bytes_);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    buf_.resize(have);
    return Status(StatusCode::kUnavailable,
                  fmt::format("reading '{}' failed after {} bytes: {}", name_, consumed_ + have,
                              std::strerror(errno)));
  }
  buf_.resize(have + static_cast<size_t>(n));
  return n > 0;
}

Result<bool> JsonlSource::Read(RecordBlock* block, size_t max_records) {
  // The block's bytes are the complete lines handed out; copy them once, in one piece.
  size_t taken = 0;
  std::string& data = block->data;
  while (taken < max_records) {
    const char* base = buf_.data();
    const char* nl =
        static_cast<const char*>(std::memchr(base + begin_, '\n', buf_.size() - begin_));
    if (nl == nullptr) {
      size_t pending = buf_.size() - begin_;
      if (pending > kMaxPostBytes && !skipping_) {
        // A line longer than any valid post: keep its start for the dead letter, drop the rest.
        SourceError e;
        e.kind = "too_large";
        e.line = line_ + 1;
        e.position = {0, consumed_};
        e.raw.assign(buf_.data() + begin_, std::min<size_t>(pending, 1024));
        e.message = fmt::format(
            "too_large: line longer than the {}-byte limit on records (kept its first {} bytes)",
            kMaxPostBytes, e.raw.size());
        block->errors.push_back(std::move(e));
        skipping_ = true;
        ++taken;
      }
      if (skipping_) {
        consumed_ += static_cast<int64_t>(pending);
        begin_ = buf_.size();
      }
      if (eof_) break;
      SURGE_ASSIGN_OR_RETURN(bool more, Fill());
      if (!more) {
        eof_ = true;
        if (buf_.size() > begin_) {
          // The last line has no newline: treat the end of file as one.
          buf_.push_back('\n');
          continue;
        }
        break;
      }
      continue;
    }
    size_t start = begin_;
    size_t len = static_cast<size_t>(nl - (base + begin_));
    int64_t offset = consumed_;
    consumed_ += static_cast<int64_t>(len + 1);
    begin_ = start + len + 1;
    ++line_;
    if (skipping_) {
      skipping_ = false;  // the tail of the over-long line
      continue;
    }
    if (len > 0 && base[start + len - 1] == '\r') --len;
    bool blank = true;
    for (size_t i = 0; i < len && blank; ++i) {
      char c = base[start + i];
      blank = c == ' ' || c == '\t';
    }
    if (blank) continue;
    if (len > kMaxPostBytes) {
      SourceError e;
      e.kind = "too_large";
      e.line = line_;
      e.position = {0, offset};
      e.raw.assign(base + start, 1024);
      e.message = fmt::format("too_large: record of {} bytes, the limit is {}", len, kMaxPostBytes);
      block->errors.push_back(std::move(e));
      ++taken;
      continue;
    }
    RawRecord r;
    r.offset = static_cast<uint32_t>(data.size());
    r.size = static_cast<uint32_t>(len);
    r.line = line_;
    r.position = {0, offset};
    data.append(base + start, len);
    block->raw.push_back(r);
    ++taken;
    if (data.size() > (64u << 20)) break;  // keep offsets in 32 bits with room to spare
  }
  return !(eof_ && begin_ >= buf_.size());
}

Result<size_t> VectorPostGenerator::Next(std::vector<Post>* out, size_t max) {
  size_t n = std::min(max, posts_.size() - next_);
  for (size_t i = 0; i < n; ++i) out->push_back(std::move(posts_[next_ + i]));
  next_ += n;
  return n;
}

Result<bool> PostGeneratorSource::Read(RecordBlock* block, size_t max_records) {
  size_t before = block->posts.size();
  SURGE_ASSIGN_OR_RETURN(size_t n, gen_->Next(&block->posts, max_records));
  for (size_t i = 0; i < n; ++i) block->post_positions.push_back({0, index_++});
  (void)before;
  return n > 0;
}

}  // namespace surge::stream
