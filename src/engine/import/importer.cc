#include "engine/import/importer.h"

#include <filesystem>

namespace surge::engine::import {

Result<ir::Graph> ImportModel(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return ImportHuggingFace(path);
  if (!std::filesystem::exists(path, ec)) return NotFoundError("model '{}' does not exist", path);
  return ImportOnnx(path);
}

}  // namespace surge::engine::import
