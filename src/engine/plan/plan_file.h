// The plan file container: a versioned header, a section table and 64-byte-aligned sections, each
// with an xxHash64 checksum. It knows nothing of what the sections hold; the builder writes
// "config" (builder config JSON), "graph" (the optimised IR, see runtime/graph_codec.h), "weights"
// (raw constant data) and "tactics" (the backend's Lower() blob).
//
// Layout (little-endian):
//   0   char[8]  magic "SURGEPLN"
//   8   u32      format version (kPlanFormatVersion)
//   12  u32      header size: bytes [0, header size) hold the header and the section table
//   16  u64      file size
//   24  u64      xxHash64 (seed 0) of bytes [32, header size)
//   32  str      backend name        (str = u32 length + bytes)
//       str      device arch
//       u32      section count, then per section: str name, u64 offset, u64 size, u64 xxHash64
//   ... zero padding; every section starts at a multiple of 64 bytes, sections do not overlap.
//
// The reader checks magic, version, sizes, every offset/length, the header checksum, every
// section checksum and (when asked) the backend and device arch, and says what differs. A
// PlanFile is immutable and safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/mmap_file.h"
#include "core/status.h"

namespace surge::engine::plan {

inline constexpr std::string_view kPlanMagic = "SURGEPLN";
inline constexpr uint32_t kPlanFormatVersion = 1;
inline constexpr size_t kSectionAlignment = 64;
inline constexpr size_t kFixedHeaderBytes = 32;
inline constexpr size_t kMaxSections = 256;
inline constexpr size_t kMaxNameBytes = 256;

// Section names the builder writes.
inline constexpr std::string_view kConfigSection = "config";
inline constexpr std::string_view kGraphSection = "graph";
inline constexpr std::string_view kWeightsSection = "weights";
inline constexpr std::string_view kTacticsSection = "tactics";
// Present in quantised plans: per-layer precision and reason, calibrated tensor thresholds and the
// accuracy guard's measurements (JSON, see runtime/plan_config.h QuantSpecToJson).
inline constexpr std::string_view kQuantSection = "quant";

// xxHash64 with seed 0, the checksum of every section.
uint64_t Checksum(std::span<const uint8_t> bytes);

// Writes `bytes` to a temporary file next to `path` and renames it, so a reader never maps a
// half-written plan.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);

class PlanWriter {
 public:
  PlanWriter(std::string backend, std::string device_arch)
      : backend_(std::move(backend)), device_arch_(std::move(device_arch)) {}

  // Adds a section (copied, or moved from a string). Names must be unique and at most
  // kMaxNameBytes long.
  Status AddSection(std::string_view name, std::string&& bytes);
  Status AddSection(std::string_view name, std::span<const uint8_t> bytes) {
    return AddSection(name, std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }
  Status AddSection(std::string_view name, std::string_view bytes) {
    return AddSection(name, std::string(bytes));
  }

  // The whole file.
  Result<std::string> Finish() const;
  Status WriteToFile(const std::string& path) const;

 private:
  struct Pending {
    std::string name;
    std::string bytes;
  };
  std::string backend_;
  std::string device_arch_;
  std::vector<Pending> sections_;
};

struct SectionInfo {
  std::string name;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t checksum = 0;
};

// What the caller requires of a plan; empty fields are not checked.
struct PlanExpectations {
  std::string backend;
  std::string device_arch;
  bool verify_checksums = true;
};

class PlanFile {
 public:
  // Maps `path` and validates it. Errors: NotFound (no file), DataLoss (truncated, corrupt,
  // not a plan), FailedPrecondition (other format version, backend or device arch).
  static Result<std::shared_ptr<const PlanFile>> Open(const std::string& path,
                                                      const PlanExpectations& expect = {});
  // Validates an in-memory plan (copied into a 64-byte-aligned buffer owned by the PlanFile).
  static Result<std::shared_ptr<const PlanFile>> FromBytes(std::span<const uint8_t> bytes,
                                                           const PlanExpectations& expect = {});

  uint32_t format_version() const { return format_version_; }
  const std::string& backend() const { return backend_; }
  const std::string& device_arch() const { return device_arch_; }
  const std::vector<SectionInfo>& sections() const { return sections_; }
  // Where the plan came from (a path, or "<memory>").
  const std::string& source() const { return source_; }
  size_t size() const { return bytes_.size(); }

  // The bytes of a section (64-byte aligned, valid while this PlanFile lives); nullptr info when
  // absent.
  const SectionInfo* FindSection(std::string_view name) const;
  // The bytes of a required section; DataLoss naming the section when absent.
  Result<std::span<const uint8_t>> Section(std::string_view name) const;

 private:
  PlanFile() = default;
  Status Parse(const PlanExpectations& expect);

  std::variant<std::monostate, MappedFile, AlignedBuffer> storage_;
  std::span<const uint8_t> bytes_;
  std::string source_;
  uint32_t format_version_ = 0;
  std::string backend_;
  std::string device_arch_;
  std::vector<SectionInfo> sections_;
};

}  // namespace surge::engine::plan
