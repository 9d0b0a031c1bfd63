#include "stream/sim/sink.h"

#include <cerrno>
#include <cstring>

namespace surge::stream::sim {
namespace {

constexpr size_t kFlushBytes = 1 << 20;

}  // namespace

JsonlWriter::JsonlWriter(std::FILE* f, std::string path, bool owned)
    : file_(f), path_(std::move(path)), owned_(owned) {
  buffer_.reserve(kFlushBytes + 4096);
}

JsonlWriter::~JsonlWriter() {
  if (file_ != nullptr) (void)Close();
}

Result<std::unique_ptr<JsonlWriter>> JsonlWriter::Open(const std::string& path) {
  if (path.empty()) return InvalidArgumentError("output path is empty (use '-' for stdout)");
  if (path == "-") return std::unique_ptr<JsonlWriter>(new JsonlWriter(stdout, "<stdout>", false));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return InvalidArgumentError("cannot open '{}' for writing: {}", path, std::strerror(errno));
  }
  return std::unique_ptr<JsonlWriter>(new JsonlWriter(f, path, true));
}

Status JsonlWriter::Flush() {
  if (buffer_.empty()) return Status::Ok();
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) {
    return DataLossError("writing '{}' failed: {}", path_, std::strerror(errno));
  }
  buffer_.clear();
  return Status::Ok();
}

Status JsonlWriter::WriteLine(std::string_view line) {
  if (file_ == nullptr) return FailedPreconditionError("'{}' is already closed", path_);
  buffer_.append(line);
  buffer_.push_back('\n');
  if (buffer_.size() >= kFlushBytes) return Flush();
  return Status::Ok();
}

Status JsonlWriter::Close() {
  if (file_ == nullptr) return Status::Ok();
  Status st = Flush();
  if (std::fflush(file_) != 0 && st.ok()) {
    st = DataLossError("writing '{}' failed: {}", path_, std::strerror(errno));
  }
  if (owned_ && std::fclose(file_) != 0 && st.ok()) {
    st = DataLossError("closing '{}' failed: {}", path_, std::strerror(errno));
  }
  file_ = nullptr;
  return st;
}

Result<std::unique_ptr<JsonlPostSink>> JsonlPostSink::Open(const std::string& path) {
  SURGE_ASSIGN_OR_RETURN(auto w, JsonlWriter::Open(path));
  return std::unique_ptr<JsonlPostSink>(new JsonlPostSink(std::move(w)));
}

Status JsonlPostSink::Write(const Post& post) {
  line_.clear();
  AppendPostJson(post, &line_);
  return writer_->WriteLine(line_);
}

Status JsonlPostSink::Close() { return writer_->Close(); }

Result<std::unique_ptr<JsonlLabelSink>> JsonlLabelSink::Open(const std::string& path,
                                                             const Scenario* scenario) {
  SURGE_ASSIGN_OR_RETURN(auto w, JsonlWriter::Open(path));
  return std::unique_ptr<JsonlLabelSink>(new JsonlLabelSink(std::move(w), scenario));
}

Status JsonlLabelSink::Write(const SimPost& post) {
  line_.clear();
  AppendLabelJson(post, *scenario_, &line_);
  return writer_->WriteLine(line_);
}

Status JsonlLabelSink::Close() { return writer_->Close(); }

Status WriteTextFile(const std::string& path, std::string_view text) {
  SURGE_ASSIGN_OR_RETURN(auto w, JsonlWriter::Open(path));
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  SURGE_RETURN_IF_ERROR(w->WriteLine(text));
  return w->Close();
}

}  // namespace surge::stream::sim
