// Activation memory planning: given buffers with lifetimes (in step indices), assigns offsets in
// one arena so that no two buffers that are live at the same step overlap. Greedy by size
// (largest first, lowest fitting offset), every offset aligned to 64 bytes. A buffer may name an
// in-place donor whose lifetime ends where its own starts; they then share one slot.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace surge::engine::cpu {

struct BufferRequest {
  int64_t bytes = 0;
  int first = 0;     // step that writes it
  int last = 0;      // last step that reads it (>= first)
  int inplace = -1;  // index of a request whose slot it may take over, or -1
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per request
  int64_t arena_bytes = 0;
};

MemoryPlan PlanMemory(std::span<const BufferRequest> requests);

// True when no two requests that are live at a common step overlap in the plan (in-place pairs
// excepted: a donor and its taker share the step where one ends and the other starts).
bool PlanIsValid(std::span<const BufferRequest> requests, const MemoryPlan& plan);

}  // namespace surge::engine::cpu
