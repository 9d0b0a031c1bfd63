// The dashboard's own files (the top-level web/ folder), embedded into the binary at build time
// by src/stream/web/embed_assets.cmake, so `surge` serves them from any working directory.
#pragma once

#include <span>
#include <string_view>

namespace surge::stream::web {

struct Asset {
  std::string_view path;          // "/index.html", "/app.js", ...
  std::string_view content_type;  // from the file's extension
  std::string_view data;
};

// All embedded files, sorted by path. Defined in the generated web_assets.cc.
std::span<const Asset> EmbeddedAssets();

}  // namespace surge::stream::web
