#include "stream/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/logging.h"

namespace surge::stream {
namespace {

constexpr std::string_view kMagic = "SURGECKP";
constexpr size_t kHeaderBytes = 32;
constexpr std::string_view kSuffix = ".ckpt";
constexpr std::string_view kTmpTag = ".tmp.";

void PutU32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutStr(std::string_view s, std::string* out) {
  PutU32(static_cast<uint32_t>(s.size()), out);
  out->append(s);
}
uint64_t GetLE(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// Bounds-checked reader over the body; every failure names the field and the byte offset.
class Reader {
 public:
  Reader(std::string_view body, std::string_view source) : body_(body), source_(source) {}

  Status U32(std::string_view field, uint32_t* v) {
    SURGE_RETURN_IF_ERROR(Need(4, field));
    *v = static_cast<uint32_t>(GetLE(body_.data() + pos_, 4));
    pos_ += 4;
    return Status::Ok();
  }
  Status U64(std::string_view field, uint64_t* v) {
    SURGE_RETURN_IF_ERROR(Need(8, field));
    *v = GetLE(body_.data() + pos_, 8);
    pos_ += 8;
    return Status::Ok();
  }
  Status Bytes(std::string_view field, uint64_t n, std::string* out) {
    SURGE_RETURN_IF_ERROR(Need(n, field));
    out->assign(body_.data() + pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  Status Str(std::string_view field, std::string* out) {
    uint32_t n;
    SURGE_RETURN_IF_ERROR(U32(field, &n));
    return Bytes(field, n, out);
  }
  // A count of items each at least `min_item_bytes` long must fit in what is left.
  Status Count(std::string_view field, size_t min_item_bytes, uint32_t* n) {
    SURGE_RETURN_IF_ERROR(U32(field, n));
    if (static_cast<uint64_t>(*n) * min_item_bytes > body_.size() - pos_) {
      return DataLossError("checkpoint {}: {} count {} at byte {} cannot fit in the {} bytes left",
                           source_, field, *n, kHeaderBytes + pos_ - 4, body_.size() - pos_);
    }
    return Status::Ok();
  }
  bool AtEnd() const { return pos_ == body_.size(); }
  size_t pos() const { return pos_; }

 private:
  Status Need(uint64_t n, std::string_view field) {
    if (n > body_.size() - pos_) {
      return DataLossError(
          "checkpoint {}: truncated body reading {} at byte {} (needs {}, {} left)", source_, field,
          kHeaderBytes + pos_, n, body_.size() - pos_);
    }
    return Status::Ok();
  }
  std::string_view body_;
  std::string_view source_;
  size_t pos_ = 0;
};

std::string Errno(int err) { return std::strerror(err); }

std::string FileName(std::string_view name, uint64_t sequence) {
  return fmt::format("{}.{:020d}{}", name, sequence, kSuffix);
}

// "<name>.<20 digits>.ckpt" → (name, sequence).
bool ParseFileName(std::string_view file, std::string* name, uint64_t* sequence) {
  if (file.size() <= kSuffix.size() + 21 || file.substr(file.size() - kSuffix.size()) != kSuffix ||
      file.front() == '.') {
    return false;
  }
  std::string_view stem = file.substr(0, file.size() - kSuffix.size());
  size_t dot = stem.rfind('.');
  if (dot == std::string_view::npos || stem.size() - dot - 1 != 20) return false;
  std::string_view digits = stem.substr(dot + 1);
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *sequence);
  if (ec != std::errc() || p != digits.data() + digits.size()) return false;
  name->assign(stem.substr(0, dot));
  return true;
}

Result<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return NotFoundError("checkpoint directory '{}': cannot list it: {}", dir, Errno(errno));
  }
  std::vector<std::string> out;
  while (dirent* e = readdir(d)) out.emplace_back(e->d_name);
  closedir(d);
  return out;
}

// (sequence, file) of `name`, newest first.
Result<std::vector<std::pair<uint64_t, std::string>>> FilesOf(const std::string& dir,
                                                              std::string_view name) {
  SURGE_ASSIGN_OR_RETURN(std::vector<std::string> entries, ListDir(dir));
  std::vector<std::pair<uint64_t, std::string>> out;
  for (const auto& e : entries) {
    std::string n;
    uint64_t seq;
    if (ParseFileName(e, &n, &seq) && n == name) out.emplace_back(seq, e);
  }
  std::sort(out.begin(), out.end(), std::greater<>());
  return out;
}

Result<std::string> ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFoundError("checkpoint {}: cannot open: {}", path, Errno(errno));
  std::string data;
  char buf[1 << 16];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return DataLossError("checkpoint {}: read failed: {}", path, Errno(err));
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return data;
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status(errno == ENOSPC ? StatusCode::kResourceExhausted : StatusCode::kInternal,
                    fmt::format("checkpoint {}: write failed: {}", path, Errno(errno)));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status FsyncDir(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return InternalError("checkpoint directory '{}': open: {}", dir, Errno(errno));
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0) return InternalError("checkpoint directory '{}': fsync: {}", dir, Errno(err));
  return Status::Ok();
}

// Temporary files a crashed writer left: ".<name>.<seq>.ckpt.tmp.<pid>" whose pid is gone.
void RemoveStaleTemporaries(const std::string& dir, std::string_view name,
                            const std::vector<std::string>& entries) {
  std::string prefix = fmt::format(".{}.", name);
  for (const auto& e : entries) {
    size_t tag = e.rfind(kTmpTag);
    if (e.rfind(prefix, 0) != 0 || tag == std::string::npos) continue;
    int pid = 0;
    std::string_view digits = std::string_view(e).substr(tag + kTmpTag.size());
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (ec != std::errc() || pid <= 0) continue;
    if (pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (unlink((dir + "/" + e).c_str()) == 0) {
      SURGE_LOG_INFO("checkpoint: removed {} left by a writer that stopped mid-write", e);
    }
  }
}

}  // namespace

const CheckpointBlob* Checkpoint::FindBlob(std::string_view blob_name) const {
  for (const auto& b : blobs) {
    if (b.name == blob_name) return &b;
  }
  return nullptr;
}

const CheckpointOffset* Checkpoint::FindOffset(std::string_view topic, int32_t partition) const {
  for (const auto& o : offsets) {
    if (o.topic == topic && o.partition == partition) return &o;
  }
  return nullptr;
}

std::string EncodeCheckpoint(const Checkpoint& c) {
  std::string body;
  PutStr(c.name, &body);
  PutStr(c.stage, &body);
  PutStr(c.worker_id, &body);
  PutU32(c.state_version, &body);
  PutU64(static_cast<uint64_t>(c.created_ms), &body);
  PutU64(c.sequence, &body);
  PutU32(static_cast<uint32_t>(c.offsets.size()), &body);
  for (const auto& o : c.offsets) {
    PutStr(o.topic, &body);
    PutU32(static_cast<uint32_t>(o.partition), &body);
    PutU64(static_cast<uint64_t>(o.next_offset), &body);
  }
  PutU32(static_cast<uint32_t>(c.blobs.size()), &body);
  for (const auto& b : c.blobs) {
    PutStr(b.name, &body);
    PutU64(b.data.size(), &body);
    body.append(b.data);
  }
  std::string out;
  out.reserve(kHeaderBytes + body.size());
  out.append(kMagic);
  PutU32(kCheckpointFormatVersion, &out);
  PutU32(0, &out);
  PutU64(body.size(), &out);
  PutU64(XXH3_64bits(body.data(), body.size()), &out);
  out.append(body);
  return out;
}

Result<Checkpoint> DecodeCheckpoint(std::string_view bytes, std::string_view source) {
  if (bytes.size() < kHeaderBytes) {
    return DataLossError("checkpoint {}: truncated: {} bytes, the header alone is {}", source,
                         bytes.size(), kHeaderBytes);
  }
  if (bytes.substr(0, kMagic.size()) != kMagic) {
    return DataLossError("checkpoint {}: not a Surge checkpoint (the file must start with {})",
                         source, kMagic);
  }
  uint32_t version = static_cast<uint32_t>(GetLE(bytes.data() + 8, 4));
  if (version != kCheckpointFormatVersion) {
    return FailedPreconditionError(
        "checkpoint {}: format version {}, this build reads version {}; use the matching surge "
        "build or remove the checkpoint to start from the committed offsets",
        source, version, kCheckpointFormatVersion);
  }
  uint64_t body_len = GetLE(bytes.data() + 16, 8);
  uint64_t checksum = GetLE(bytes.data() + 24, 8);
  if (body_len != bytes.size() - kHeaderBytes) {
    return DataLossError("checkpoint {}: {}: the header says {} body bytes, the file has {}",
                         source,
                         body_len > bytes.size() - kHeaderBytes ? "truncated" : "trailing bytes",
                         body_len, bytes.size() - kHeaderBytes);
  }
  std::string_view body = bytes.substr(kHeaderBytes);
  uint64_t actual = XXH3_64bits(body.data(), body.size());
  if (actual != checksum) {
    return DataLossError("checkpoint {}: corrupt: body checksum {:016x}, the header says {:016x}",
                         source, actual, checksum);
  }
  Reader r(body, source);
  Checkpoint c;
  uint64_t u64;
  uint32_t n;
  SURGE_RETURN_IF_ERROR(r.Str("name", &c.name));
  SURGE_RETURN_IF_ERROR(r.Str("stage", &c.stage));
  SURGE_RETURN_IF_ERROR(r.Str("worker_id", &c.worker_id));
  SURGE_RETURN_IF_ERROR(r.U32("state_version", &c.state_version));
  SURGE_RETURN_IF_ERROR(r.U64("created_ms", &u64));
  c.created_ms = static_cast<int64_t>(u64);
  SURGE_RETURN_IF_ERROR(r.U64("sequence", &c.sequence));
  SURGE_RETURN_IF_ERROR(r.Count("offset", 16, &n));
  c.offsets.resize(n);
  for (auto& o : c.offsets) {
    uint32_t partition;
    SURGE_RETURN_IF_ERROR(r.Str("offset topic", &o.topic));
    SURGE_RETURN_IF_ERROR(r.U32("offset partition", &partition));
    SURGE_RETURN_IF_ERROR(r.U64("next offset", &u64));
    o.partition = static_cast<int32_t>(partition);
    o.next_offset = static_cast<int64_t>(u64);
  }
  SURGE_RETURN_IF_ERROR(r.Count("blob", 12, &n));
  c.blobs.resize(n);
  for (auto& b : c.blobs) {
    SURGE_RETURN_IF_ERROR(r.Str("blob name", &b.name));
    SURGE_RETURN_IF_ERROR(r.U64("blob length", &u64));
    SURGE_RETURN_IF_ERROR(r.Bytes("blob data", u64, &b.data));
  }
  if (!r.AtEnd()) {
    return DataLossError("checkpoint {}: {} unexpected bytes after the last blob", source,
                         body.size() - r.pos());
  }
  return c;
}

Status ValidateCheckpointName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= 200 && name.front() != '.';
  for (char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-');
  }
  if (!ok) {
    return InvalidArgumentError(
        "checkpoint name '{}' is invalid: use 1..200 characters of [A-Za-z0-9._-], not starting "
        "with '.'",
        name);
  }
  return Status::Ok();
}

Result<CheckpointStore> CheckpointStore::Open(std::string dir, Options options) {
  if (dir.empty()) return InvalidArgumentError("checkpoint directory: empty path");
  if (options.keep < 2) {
    return InvalidArgumentError(
        "checkpoint store '{}': keep={} — keep at least 2 so that a bad newest file leaves a good "
        "one",
        dir, options.keep);
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return InvalidArgumentError("checkpoint directory '{}': cannot create it: {}", dir,
                                ec ? ec.message() : "exists and is not a directory");
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return CheckpointStore(std::move(dir), options);
}

Result<uint64_t> CheckpointStore::Write(Checkpoint c) {
  SURGE_RETURN_IF_ERROR(ValidateCheckpointName(c.name));
  SURGE_ASSIGN_OR_RETURN(std::vector<std::string> entries, ListDir(dir_));
  RemoveStaleTemporaries(dir_, c.name, entries);
  SURGE_ASSIGN_OR_RETURN(auto files, FilesOf(dir_, c.name));
  c.sequence = files.empty() ? 1 : files.front().first + 1;
  if (c.created_ms == 0) {
    c.created_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  }
  const std::string bytes = EncodeCheckpoint(c);
  const std::string final_name = FileName(c.name, c.sequence);
  const std::string path = dir_ + "/" + final_name;
  const std::string tmp = fmt::format("{}/.{}{}{}", dir_, final_name, kTmpTag, getpid());

  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return InternalError("checkpoint {}: cannot create the temporary file {}: {}", path, tmp,
                         Errno(errno));
  }
  Status s = WriteAll(fd, bytes, tmp);
  if (s.ok() && fsync(fd) != 0) s = InternalError("checkpoint {}: fsync: {}", tmp, Errno(errno));
  if (close(fd) != 0 && s.ok()) s = InternalError("checkpoint {}: close: {}", tmp, Errno(errno));
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    s = InternalError("checkpoint {}: rename from {}: {}", path, tmp, Errno(errno));
  }
  if (!s.ok()) {
    unlink(tmp.c_str());
    return s;
  }
  SURGE_RETURN_IF_ERROR(FsyncDir(dir_));
  // Keep the newest `keep` (the one just written, known good, among them).
  for (size_t i = static_cast<size_t>(options_.keep) - 1; i < files.size(); ++i) {
    std::string old = dir_ + "/" + files[i].second;
    if (unlink(old.c_str()) != 0) {
      SURGE_LOG_WARN("checkpoint: could not remove the old {}: {}", old, Errno(errno));
    }
  }
  return c.sequence;
}

Result<std::optional<CheckpointStore::Loaded>> CheckpointStore::LoadLatest(
    std::string_view name) const {
  SURGE_RETURN_IF_ERROR(ValidateCheckpointName(name));
  SURGE_ASSIGN_OR_RETURN(auto files, FilesOf(dir_, name));
  if (files.empty()) return std::optional<Loaded>();
  Loaded loaded;
  for (const auto& [seq, file] : files) {
    std::string path = dir_ + "/" + file;
    Result<Checkpoint> c = [&]() -> Result<Checkpoint> {
      SURGE_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
      return DecodeCheckpoint(bytes, path);
    }();
    if (c.ok() && (c->name != name || c->sequence != seq)) {
      c = DataLossError("checkpoint {}: holds '{}' sequence {}, its file name says '{}' {}", path,
                        c->name, c->sequence, name, seq);
    }
    if (c.ok()) {
      loaded.checkpoint = std::move(c).value();
      loaded.path = path;
      for (const auto& why : loaded.skipped) {
        SURGE_LOG_ERROR("checkpoint '{}': skipped a bad newer file ({}); loaded {}", name, why,
                        path);
      }
      return std::optional<Loaded>(std::move(loaded));
    }
    if (c.status().code() == StatusCode::kFailedPrecondition) return c.status();
    loaded.skipped.push_back(c.status().message());
  }
  std::string reasons;
  for (const auto& r : loaded.skipped) reasons += "\n  " + r;
  return DataLossError("checkpoint '{}' in {}: no usable file among {}:{}", name, dir_,
                       files.size(), reasons);
}

Result<std::vector<std::string>> CheckpointStore::Names() const {
  SURGE_ASSIGN_OR_RETURN(std::vector<std::string> entries, ListDir(dir_));
  std::vector<std::string> names;
  for (const auto& e : entries) {
    std::string n;
    uint64_t seq;
    if (ParseFileName(e, &n, &seq)) names.push_back(std::move(n));
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

Result<std::vector<std::string>> CheckpointStore::Files(std::string_view name) const {
  SURGE_RETURN_IF_ERROR(ValidateCheckpointName(name));
  SURGE_ASSIGN_OR_RETURN(auto files, FilesOf(dir_, name));
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back(dir_ + "/" + f.second);
  return out;
}

}  // namespace surge::stream
