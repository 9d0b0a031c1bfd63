#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/mmap_file.h"
#include "engine/plan/byte_io.h"
#include "engine/plan/plan_file.h"

namespace surge::engine::plan {

uint64_t Checksum(std::span<const uint8_t> bytes) { return XXH64(bytes.data(), bytes.size(), 0); }

Status PlanWriter::AddSection(std::string_view name, std::string&& bytes) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return InvalidArgumentError("plan section name '{}' must have 1..{} bytes", name,
                                kMaxNameBytes);
  }
  for (const auto& s : sections_) {
    if (s.name == name) return InvalidArgumentError("plan section '{}' added twice", name);
  }
  if (sections_.size() >= kMaxSections) {
    return InvalidArgumentError("a plan holds at most {} sections", kMaxSections);
  }
  sections_.push_back({std::string(name), std::move(bytes)});
  return Status::Ok();
}

Result<std::string> PlanWriter::Finish() const {
  if (backend_.empty() || backend_.size() > kMaxNameBytes || device_arch_.size() > kMaxNameBytes) {
    return InvalidArgumentError(
        "plan backend name must have 1..{} bytes and device arch at most {}", kMaxNameBytes,
        kMaxNameBytes);
  }
  std::vector<uint64_t> checksums;
  for (const auto& s : sections_) {
    checksums.push_back(
        Checksum({reinterpret_cast<const uint8_t*>(s.bytes.data()), s.bytes.size()}));
  }
  // The table's size does not depend on the offsets, so lay it out once to learn it.
  auto table = [&](const std::vector<uint64_t>& offsets) {
    ByteWriter w;
    w.Str(backend_);
    w.Str(device_arch_);
    w.U32(static_cast<uint32_t>(sections_.size()));
    for (size_t i = 0; i < sections_.size(); ++i) {
      const auto& s = sections_[i];
      w.Str(s.name);
      w.U64(offsets.empty() ? 0 : offsets[i]);
      w.U64(s.bytes.size());
      w.U64(checksums[i]);
    }
    return w.Take();
  };
  const size_t header_size = kFixedHeaderBytes + table({}).size();
  std::vector<uint64_t> offsets;
  uint64_t pos = AlignUp(header_size, kSectionAlignment);
  for (const auto& s : sections_) {
    offsets.push_back(pos);
    pos = AlignUp(pos + s.bytes.size(), kSectionAlignment);
  }
  const uint64_t file_size = pos;
  const std::string tab = table(offsets);

  ByteWriter w;
  w.Reserve(file_size);
  w.Raw(kPlanMagic.data(), kPlanMagic.size());
  w.U32(kPlanFormatVersion);
  w.U32(static_cast<uint32_t>(header_size));
  w.U64(file_size);
  w.U64(Checksum({reinterpret_cast<const uint8_t*>(tab.data()), tab.size()}));
  w.Raw(tab.data(), tab.size());
  for (const auto& s : sections_) {
    w.PadTo(kSectionAlignment);
    w.Raw(s.bytes.data(), s.bytes.size());
  }
  w.PadTo(kSectionAlignment);
  SURGE_CHECK(w.size() == file_size, "plan layout mismatch: {} vs {}", w.size(), file_size);
  return w.Take();
}

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  SURGE_RETURN_IF_ERROR(WriteStringToFile(tmp, bytes));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return InternalError("cannot move the written plan to '{}': {}", path, std::strerror(errno));
  }
  return Status::Ok();
}

Status PlanWriter::WriteToFile(const std::string& path) const {
  SURGE_ASSIGN_OR_RETURN(std::string bytes, Finish());
  return WriteFileAtomically(path, bytes);
}

}  // namespace surge::engine::plan
