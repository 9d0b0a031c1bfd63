#include "engine/backends/cpu/memory_plan.h"

#include <algorithm>
#include <numeric>

#include "core/aligned_buffer.h"

namespace surge::engine::cpu {
namespace {

struct Slot {
  int64_t bytes = 0;
  int first = 0, last = 0;
  std::vector<int> members;
};

bool Overlaps(int a0, int a1, int b0, int b1) { return a0 <= b1 && b0 <= a1; }

}  // namespace

MemoryPlan PlanMemory(std::span<const BufferRequest> requests) {
  const int n = static_cast<int>(requests.size());
  // Union in-place chains into slots. A donor gives its slot to at most one taker, and only when
  // its life ends exactly where the taker's begins.
  std::vector<int> slot_of(n, -1);
  std::vector<bool> donated(n, false);
  std::vector<Slot> slots;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return requests[a].first < requests[b].first; });
  for (int i : order) {
    const BufferRequest& r = requests[i];
    const int d = r.inplace;
    if (d >= 0 && d < n && slot_of[d] >= 0 && !donated[d] && requests[d].last == r.first &&
        slots[slot_of[d]].last == requests[d].last) {
      donated[d] = true;
      Slot& s = slots[slot_of[d]];
      s.bytes = std::max(s.bytes, r.bytes);
      s.last = std::max(s.last, r.last);
      s.members.push_back(i);
      slot_of[i] = slot_of[d];
      continue;
    }
    slot_of[i] = static_cast<int>(slots.size());
    slots.push_back({r.bytes, r.first, r.last, {i}});
  }
  // Greedy by size: each slot takes the lowest aligned offset that clears every placed slot whose
  // lifetime overlaps its own.
  std::vector<int> by_size(slots.size());
  std::iota(by_size.begin(), by_size.end(), 0);
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](int a, int b) { return slots[a].bytes > slots[b].bytes; });
  std::vector<int64_t> slot_offset(slots.size(), -1);
  std::vector<int> placed;
  MemoryPlan plan;
  for (int s : by_size) {
    const int64_t size = static_cast<int64_t>(AlignUp(static_cast<size_t>(slots[s].bytes)));
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int p : placed) {
      if (Overlaps(slots[s].first, slots[s].last, slots[p].first, slots[p].last)) {
        busy.emplace_back(slot_offset[p],
                          slot_offset[p] + static_cast<int64_t>(AlignUp(slots[p].bytes)));
      }
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + size <= b) break;
      offset = std::max(offset, e);
    }
    slot_offset[s] = offset;
    placed.push_back(s);
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
  }
  plan.offsets.assign(n, 0);
  for (int i = 0; i < n; ++i) plan.offsets[i] = slot_offset[slot_of[i]];
  return plan;
}

bool PlanIsValid(std::span<const BufferRequest> requests, const MemoryPlan& plan) {
  const size_t n = requests.size();
  if (plan.offsets.size() != n) return false;
  for (size_t i = 0; i < n; ++i) {
    if (plan.offsets[i] % static_cast<int64_t>(kAlignment) != 0) return false;
    if (plan.offsets[i] + requests[i].bytes > plan.arena_bytes) return false;
    for (size_t j = i + 1; j < n; ++j) {
      const BufferRequest& a = requests[i];
      const BufferRequest& b = requests[j];
      if (!Overlaps(a.first, a.last, b.first, b.last)) continue;
      const bool disjoint = plan.offsets[i] + a.bytes <= plan.offsets[j] ||
                            plan.offsets[j] + b.bytes <= plan.offsets[i];
      if (disjoint || a.bytes == 0 || b.bytes == 0) continue;
      const bool handoff = (b.inplace == static_cast<int>(i) && a.last == b.first) ||
                           (a.inplace == static_cast<int>(j) && b.last == a.first);
      if (!handoff) return false;
    }
  }
  return true;
}

}  // namespace surge::engine::cpu
