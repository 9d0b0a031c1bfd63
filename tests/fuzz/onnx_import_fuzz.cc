// libFuzzer target for the ONNX importer (protobuf bytes → IR) and the symbolic shape inference
// that runs on whatever graph comes out.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/import/importer.h"
#include "engine/passes/passes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto graph = surge::engine::import::ImportOnnxFromBytes(std::span<const uint8_t>(data, size), "");
  if (graph.ok()) (void)surge::engine::passes::InferShapes(*graph).ok();
  return 0;
}
