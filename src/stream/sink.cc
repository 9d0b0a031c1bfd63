#include "stream/sink.h"

#include <cerrno>
#include <cstring>

namespace surge::stream {

Result<std::unique_ptr<JsonlTrendSink>> JsonlTrendSink::Open(const std::string& path) {
  std::unique_ptr<JsonlTrendSink> s(new JsonlTrendSink());
  s->path_ = path;
  if (path == "-") {
    s->file_ = stdout;
  } else {
    s->file_ = std::fopen(path.c_str(), "wb");
    if (s->file_ == nullptr) {
      return InvalidArgumentError("cannot open the trends output '{}' for writing: {}", path,
                                  std::strerror(errno));
    }
    s->owns_ = true;
  }
  return s;
}

JsonlTrendSink::~JsonlTrendSink() {
  if (owns_ && file_) std::fclose(file_);
}

Status JsonlTrendSink::OnHotList(const HotList& list) {
  line_.clear();
  for (const TrendUpdate& u : list.updates) {
    AppendTrendJson(u, &line_);
    line_.push_back('\n');
  }
  if (!line_.empty() && std::fwrite(line_.data(), 1, line_.size(), file_) != line_.size()) {
    return Status(StatusCode::kInternal, fmt::format("writing the trends output '{}' failed: {}",
                                                     path_, std::strerror(errno)));
  }
  written_ += static_cast<int64_t>(list.updates.size());
  if (std::fflush(file_) != 0) {
    return Status(StatusCode::kInternal, fmt::format("flushing the trends output '{}' failed: {}",
                                                     path_, std::strerror(errno)));
  }
  return Status::Ok();
}

Status JsonlTrendSink::Close() {
  if (file_ == nullptr) return Status::Ok();
  int rc = owns_ ? std::fclose(file_) : std::fflush(file_);
  file_ = nullptr;
  if (rc != 0) {
    return Status(StatusCode::kInternal, fmt::format("closing the trends output '{}' failed: {}",
                                                     path_, std::strerror(errno)));
  }
  return Status::Ok();
}

}  // namespace surge::stream
