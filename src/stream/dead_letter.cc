#include "stream/dead_letter.h"

#include <cerrno>
#include <cstring>
#include <iterator>

#include "core/logging.h"
#include "stream/post.h"

namespace surge::stream {

Result<std::unique_ptr<DeadLetterSink>> DeadLetterSink::Open(const std::string& path) {
  std::unique_ptr<DeadLetterSink> s(new DeadLetterSink());
  s->path_ = path;
  if (path == "-") {
    s->file_ = stderr;
  } else if (!path.empty()) {
    s->file_ = std::fopen(path.c_str(), "wb");
    if (s->file_ == nullptr) {
      return InvalidArgumentError("cannot open the dead-letter file '{}' for writing: {}", path,
                                  std::strerror(errno));
    }
    s->owns_file_ = true;
  }
  return s;
}

DeadLetterSink::~DeadLetterSink() {
  if (owns_file_ && file_) std::fclose(file_);
}

void DeadLetterSink::Add(const DeadLetter& d) {
  std::lock_guard<std::mutex> lock(mu_);
  ++total_;
  auto it = counts_.find(d.kind);
  if (it == counts_.end()) {
    it = counts_.emplace(std::string(d.kind), 0).first;
    SURGE_LOG_WARN(
        "dead letter ({}): {} at {}{}offset {}{}; further records of this kind are only counted",
        d.kind, d.message, d.source, d.line ? fmt::format(" line {}, ", d.line) : " ",
        d.position.offset,
        path_.empty() ? "" : fmt::format(", written to {}", path_ == "-" ? "stderr" : path_));
  }
  ++it->second;
  if (file_ == nullptr || write_failed_) return;
  line_.clear();
  auto out = std::back_inserter(line_);
  line_.append("{\"kind\":");
  AppendJsonString(d.kind, &line_);
  line_.append(",\"message\":");
  AppendJsonString(d.message, &line_);
  line_.append(",\"source\":");
  AppendJsonString(d.source, &line_);
  fmt::format_to(out, ",\"line\":{},\"partition\":{},\"offset\":{},\"raw\":", d.line,
                 d.position.partition, d.position.offset);
  bool cut = d.raw.size() > kMaxDeadLetterRaw;
  AppendJsonString(cut ? d.raw.substr(0, kMaxDeadLetterRaw) : d.raw, &line_);
  if (cut) line_.append(",\"raw_truncated\":true");
  line_.append("}\n");
  if (std::fwrite(line_.data(), 1, line_.size(), file_) != line_.size()) {
    write_failed_ = true;
    SURGE_LOG_ERROR("cannot write the dead-letter file '{}': {}; dead letters are only counted now",
                    path_, std::strerror(errno));
  }
}

Status DeadLetterSink::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ && std::fflush(file_) != 0 && !write_failed_) {
    write_failed_ = true;
    return Status(StatusCode::kInternal, fmt::format("cannot flush the dead-letter file '{}': {}",
                                                     path_, std::strerror(errno)));
  }
  if (write_failed_) {
    return Status(StatusCode::kInternal,
                  fmt::format("writing the dead-letter file '{}' failed; {} dead letters counted",
                              path_, total_));
  }
  return Status::Ok();
}

int64_t DeadLetterSink::total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

std::map<std::string, int64_t> DeadLetterSink::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {counts_.begin(), counts_.end()};
}

}  // namespace surge::stream
