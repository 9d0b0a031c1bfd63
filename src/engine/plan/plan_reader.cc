#include <algorithm>
#include <cstring>

#include "engine/plan/byte_io.h"
#include "engine/plan/plan_file.h"

namespace surge::engine::plan {

namespace {

std::string Printable(std::span<const uint8_t> b) {
  std::string s;
  for (uint8_t c : b) s += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  return s;
}

}  // namespace

Result<std::shared_ptr<const PlanFile>> PlanFile::Open(const std::string& path,
                                                       const PlanExpectations& expect) {
  SURGE_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  std::shared_ptr<PlanFile> plan(new PlanFile());
  plan->bytes_ = file.bytes();
  plan->storage_ = std::move(file);
  plan->source_ = path;
  Status st = plan->Parse(expect);
  if (!st.ok()) return st.WithContext("plan '" + path + "'");
  return std::shared_ptr<const PlanFile>(std::move(plan));
}

Result<std::shared_ptr<const PlanFile>> PlanFile::FromBytes(std::span<const uint8_t> bytes,
                                                            const PlanExpectations& expect) {
  std::shared_ptr<PlanFile> plan(new PlanFile());
  AlignedBuffer buf(bytes.size());
  if (!bytes.empty()) std::memcpy(buf.data(), bytes.data(), bytes.size());
  plan->bytes_ = {buf.data(), bytes.size()};
  plan->storage_ = std::move(buf);
  plan->source_ = "<memory>";
  Status st = plan->Parse(expect);
  if (!st.ok()) return st.WithContext("plan");
  return std::shared_ptr<const PlanFile>(std::move(plan));
}

Status PlanFile::Parse(const PlanExpectations& expect) {
  const size_t size = bytes_.size();
  if (size < kPlanMagic.size()) {
    return DataLossError("not a Surge plan: {} bytes is too short to hold the '{}' magic", size,
                         kPlanMagic);
  }
  if (std::memcmp(bytes_.data(), kPlanMagic.data(), kPlanMagic.size()) != 0) {
    return DataLossError("not a Surge plan: magic is '{}', expected '{}'",
                         Printable(bytes_.first(kPlanMagic.size())), kPlanMagic);
  }
  ByteReader fixed(bytes_, "plan header");
  SURGE_RETURN_IF_ERROR(fixed.Bytes(kPlanMagic.size()).status());
  SURGE_ASSIGN_OR_RETURN(format_version_, fixed.U32());
  if (format_version_ != kPlanFormatVersion) {
    return FailedPreconditionError(
        "plan format version is {}, this build of surge reads version {}; rebuild the plan with "
        "this surge",
        format_version_, kPlanFormatVersion);
  }
  SURGE_ASSIGN_OR_RETURN(uint32_t header_size, fixed.U32());
  SURGE_ASSIGN_OR_RETURN(uint64_t file_size, fixed.U64());
  SURGE_ASSIGN_OR_RETURN(uint64_t header_checksum, fixed.U64());
  if (file_size != size) {
    return DataLossError("plan is {}: its header says {} bytes, the file has {}",
                         size < file_size ? "truncated" : "longer than written", file_size, size);
  }
  if (header_size < kFixedHeaderBytes || header_size > size) {
    return DataLossError("plan header size {} is outside [{}, {}]", header_size, kFixedHeaderBytes,
                         size);
  }
  auto table_bytes = bytes_.subspan(kFixedHeaderBytes, header_size - kFixedHeaderBytes);
  const uint64_t actual_header_checksum = Checksum(table_bytes);
  if (actual_header_checksum != header_checksum) {
    return DataLossError("plan header is corrupt: checksum {:016x}, expected {:016x}",
                         actual_header_checksum, header_checksum);
  }

  ByteReader table(table_bytes, "plan section table");
  SURGE_ASSIGN_OR_RETURN(backend_, table.Str(kMaxNameBytes));
  SURGE_ASSIGN_OR_RETURN(device_arch_, table.Str(kMaxNameBytes));
  SURGE_ASSIGN_OR_RETURN(uint32_t count, table.U32());
  if (count > kMaxSections) {
    return DataLossError("plan has {} sections, at most {} are allowed", count, kMaxSections);
  }
  for (uint32_t i = 0; i < count; ++i) {
    SectionInfo s;
    SURGE_ASSIGN_OR_RETURN(s.name, table.Str(kMaxNameBytes));
    SURGE_ASSIGN_OR_RETURN(s.offset, table.U64());
    SURGE_ASSIGN_OR_RETURN(s.size, table.U64());
    SURGE_ASSIGN_OR_RETURN(s.checksum, table.U64());
    if (s.offset % kSectionAlignment != 0 || s.offset < header_size || s.offset > size ||
        s.size > size - s.offset) {
      return DataLossError(
          "plan section '{}' at offset {} with {} bytes lies outside the file ({} bytes, header "
          "{} bytes) or is not {}-byte aligned",
          s.name, s.offset, s.size, size, header_size, kSectionAlignment);
    }
    if (FindSection(s.name) != nullptr) {
      return DataLossError("plan section '{}' appears twice", s.name);
    }
    sections_.push_back(std::move(s));
  }
  if (table.remaining() != 0) {
    return DataLossError("plan section table has {} unexpected trailing bytes", table.remaining());
  }
  std::vector<const SectionInfo*> sorted;
  for (const auto& s : sections_) sorted.push_back(&s);
  std::sort(sorted.begin(), sorted.end(),
            [](const SectionInfo* a, const SectionInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i - 1]->offset + sorted[i - 1]->size > sorted[i]->offset) {
      return DataLossError("plan sections '{}' and '{}' overlap", sorted[i - 1]->name,
                           sorted[i]->name);
    }
  }

  // Padding must be zero, so every byte of the file is covered by some check.
  auto check_zero = [&](uint64_t from, uint64_t to) -> Status {
    for (uint64_t i = from; i < to; ++i) {
      if (bytes_[i] != 0)
        return DataLossError("plan is corrupt: non-zero padding byte at offset {}", i);
    }
    return Status::Ok();
  };
  uint64_t gap_start = header_size;
  for (const SectionInfo* s : sorted) {
    SURGE_RETURN_IF_ERROR(check_zero(gap_start, s->offset));
    gap_start = s->offset + s->size;
  }
  SURGE_RETURN_IF_ERROR(check_zero(gap_start, size));

  if (!expect.backend.empty() && expect.backend != backend_) {
    return FailedPreconditionError(
        "plan was built for backend '{}', but backend '{}' was asked for", backend_,
        expect.backend);
  }
  if (!expect.device_arch.empty() && expect.device_arch != device_arch_) {
    return FailedPreconditionError(
        "plan was built for device arch '{}' (backend '{}'), but this machine is '{}'; rebuild the "
        "plan on this machine",
        device_arch_, backend_, expect.device_arch);
  }
  if (expect.verify_checksums) {
    for (const auto& s : sections_) {
      const uint64_t actual = Checksum(bytes_.subspan(s.offset, s.size));
      if (actual != s.checksum) {
        return DataLossError("plan section '{}' is corrupt: checksum {:016x}, expected {:016x}",
                             s.name, actual, s.checksum);
      }
    }
  }
  return Status::Ok();
}

const SectionInfo* PlanFile::FindSection(std::string_view name) const {
  for (const auto& s : sections_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Result<std::span<const uint8_t>> PlanFile::Section(std::string_view name) const {
  const SectionInfo* s = FindSection(name);
  if (s == nullptr) return DataLossError("plan '{}' has no '{}' section", source_, name);
  return bytes_.subspan(s->offset, s->size);
}

}  // namespace surge::engine::plan
