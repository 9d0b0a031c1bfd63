// A bounds-checked reader for the safetensors format (Hugging Face checkpoints): an 8-byte
// little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}}, then the
// data section. The file is memory-mapped; every offset and length is checked at Open().
// Immutable after Open(); safe to read from several threads.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/mmap_file.h"
#include "core/status.h"
#include "core/tensor.h"

namespace surge::engine::import {

class SafeTensors {
 public:
  struct Entry {
    std::string dtype;  // "F32", "F16", "BF16", "I64", ...
    Shape shape;
    size_t begin = 0;  // byte range inside the data section, checked against the file
    size_t end = 0;
  };

  // Parses and validates the header; DataLoss on any corruption.
  static Result<SafeTensors> Open(const std::string& path);
  // Same over bytes held by the caller, which must outlive the SafeTensors.
  static Result<SafeTensors> FromBytes(std::span<const uint8_t> bytes, std::string name);

  bool Has(const std::string& name) const { return entries_.count(name) > 0; }
  const std::map<std::string, Entry>& entries() const { return entries_; }
  // The tensor converted to float32 (from F32/F16/BF16/F64) as a new owned tensor. NotFound
  // naming the tensor when absent; Unimplemented for other dtypes.
  Result<Tensor> ReadFloat32(const std::string& name) const;

 private:
  Status Parse();

  MappedFile file_;  // empty for FromBytes
  std::span<const uint8_t> bytes_;
  std::string path_;
  size_t data_start_ = 0;
  std::map<std::string, Entry> entries_;
};

}  // namespace surge::engine::import
