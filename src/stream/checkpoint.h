// Checkpoints: a stage's state (opaque blobs) saved together with the input offsets it reflects,
// so that a restart resumes exactly where the saved state left off — no input lost, none applied
// twice. Independent of Kafka: an offset is any (topic, partition) → next position.
//
// File format (little-endian), one checkpoint per file:
//
//   magic "SURGECKP" | u32 format version (1) | u32 reserved (0) | u64 body length | u64 XXH3-64
//   of the body | body
//   body: str name | str stage | str worker_id | u32 state_version | i64 created_ms |
//         u64 sequence | u32 n_offsets × (str topic | i32 partition | i64 next_offset) |
//         u32 n_blobs × (str name | u64 length | bytes)        (str = u32 length | bytes)
//
// A store keeps the newest `keep` checkpoints of each name as `<name>.<sequence>.ckpt` in one
// directory. Writes are atomic: a temporary file in the same directory is written and fsync'd,
// renamed over the final name, and the directory is fsync'd; a crash leaves either the old or the
// new checkpoint, never a torn one. Loading checks length, checksum and version; when the newest
// file is truncated or corrupt the previous good one is loaded (and the bad one is reported), so
// one bad write never costs the state. A file of a newer format version is an error, not skipped:
// falling back past it would silently rewind the state.
//
// Thread safety: a CheckpointStore may be used from several threads and processes for different
// names; one name has one writer at a time (the stage instance that owns that state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace surge::stream {

inline constexpr uint32_t kCheckpointFormatVersion = 1;

struct CheckpointOffset {
  std::string topic;
  int32_t partition = 0;
  int64_t next_offset = 0;  // the first input position whose effects are NOT in the state
  bool operator==(const CheckpointOffset&) const = default;
};

struct CheckpointBlob {
  std::string name;
  std::string data;
  bool operator==(const CheckpointBlob&) const = default;
};

struct Checkpoint {
  std::string name;            // the store key, e.g. "detect.surge.terms.3"
  std::string stage;           // e.g. "detect"
  std::string worker_id;       // who wrote it (host:pid or a configured id)
  uint32_t state_version = 0;  // the stage's own blob format version
  int64_t created_ms = 0;      // wall clock, set by the store when 0
  uint64_t sequence = 0;       // set by the store: 1, 2, ... per name
  std::vector<CheckpointOffset> offsets;
  std::vector<CheckpointBlob> blobs;

  const CheckpointBlob* FindBlob(std::string_view blob_name) const;
  const CheckpointOffset* FindOffset(std::string_view topic, int32_t partition) const;
};

// Serialises (header + body) / parses one checkpoint. `source` names the input in errors (a path).
// Errors: kDataLoss for truncated, corrupt (bad magic, checksum, lengths) input;
// kFailedPrecondition for another format version.
std::string EncodeCheckpoint(const Checkpoint& checkpoint);
Result<Checkpoint> DecodeCheckpoint(std::string_view bytes, std::string_view source);

// A checkpoint name: 1..200 characters of [A-Za-z0-9._-], not starting with '.'.
Status ValidateCheckpointName(std::string_view name);

class CheckpointStore {
 public:
  struct Options {
    int keep = 2;  // newest checkpoints kept per name (>= 2, so one bad write leaves a good one)
  };
  struct Loaded {
    Checkpoint checkpoint;
    std::string path;
    // Newer files that could not be used, each "path: reason" (truncated/corrupt).
    std::vector<std::string> skipped;
  };

  // Creates `dir` (and parents) if missing.
  static Result<CheckpointStore> Open(std::string dir, Options options);
  static Result<CheckpointStore> Open(std::string dir) { return Open(std::move(dir), Options()); }

  // Writes `checkpoint` under checkpoint.name with the next sequence number (and created_ms if
  // 0), atomically and durably; then removes checkpoints of that name older than the newest
  // `keep`. Returns the sequence written. Errors name the path and the failing system call.
  Result<uint64_t> Write(Checkpoint checkpoint);

  // The newest usable checkpoint of `name`; nullopt when none exists. Falls back over truncated
  // or corrupt files (listed in Loaded::skipped and logged); kDataLoss when every file is bad
  // (each reason listed); kFailedPrecondition for a file of another format version.
  Result<std::optional<Loaded>> LoadLatest(std::string_view name) const;

  // Names that have at least one checkpoint file, sorted.
  Result<std::vector<std::string>> Names() const;
  // Checkpoint files of `name`, newest first.
  Result<std::vector<std::string>> Files(std::string_view name) const;

  const std::string& dir() const { return dir_; }

 private:
  CheckpointStore(std::string dir, Options options) : dir_(std::move(dir)), options_(options) {}
  std::string dir_;
  Options options_;
};

}  // namespace surge::stream
