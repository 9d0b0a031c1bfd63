// libFuzzer target for everything that reads plan bytes: the sectioned container (header, section
// table, bounds, checksums) and the graph codec (which the checksums would otherwise shield from
// most mutations, so it is also fed the raw input directly).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/aligned_buffer.h"
#include "engine/plan/plan_file.h"
#include "engine/runtime/graph_codec.h"

using surge::engine::DecodeGraph;
using surge::engine::plan::PlanFile;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto plan = PlanFile::FromBytes(bytes);
  if (plan.ok()) {
    auto graph = (*plan)->Section(surge::engine::plan::kGraphSection);
    auto weights = (*plan)->Section(surge::engine::plan::kWeightsSection);
    if (graph.ok() && weights.ok()) (void)DecodeGraph(*graph, *weights).ok();
  }
  // The first byte picks where the graph bytes end and the (64-byte-aligned) weights begin.
  if (size > 1) {
    const size_t split = 1 + (size - 1) * data[0] / 255;
    surge::AlignedBuffer weights(size - split);
    if (size > split) std::memcpy(weights.data(), data + split, size - split);
    (void)DecodeGraph(bytes.subspan(1, split - 1), {weights.data(), size - split}).ok();
  }
  return 0;
}
