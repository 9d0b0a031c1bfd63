#include "engine/import/importer.h"

namespace surge::engine::import {

Result<ir::Graph> ImportHuggingFace(const std::string& folder) {
  return UnimplementedError("Hugging Face import of '{}' is not implemented yet", folder);
}

}  // namespace surge::engine::import
