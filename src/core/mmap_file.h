// Read-only memory-mapped file. Move-only; unmaps on destruction. The bytes stay valid for the
// lifetime of the object, and callers must bounds-check every offset they read from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace surge {

class MappedFile {
 public:
  static Result<MappedFile> Open(const std::string& path);
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Whole-file helpers for small files (configs, JSON).
Result<std::string> ReadFileToString(const std::string& path);
Status WriteStringToFile(const std::string& path, std::string_view data);

}  // namespace surge
