#include "engine/backends/cpu/memory_plan.h"

#include <gtest/gtest.h>

#include <random>

namespace surge::engine::cpu {
namespace {

TEST(MemoryPlan, DisjointLifetimesShareMemory) {
  // a: steps 0-1, b: 1-2, c: 2-3 — a and c never overlap and can share.
  std::vector<BufferRequest> r{{1000, 0, 1, -1}, {1000, 1, 2, -1}, {1000, 2, 3, -1}};
  MemoryPlan p = PlanMemory(r);
  EXPECT_TRUE(PlanIsValid(r, p));
  EXPECT_EQ(p.offsets[0], p.offsets[2]);
  EXPECT_NE(p.offsets[0], p.offsets[1]);
  EXPECT_EQ(p.arena_bytes, 2 * 1024);
}

TEST(MemoryPlan, OffsetsAre64ByteAligned) {
  std::vector<BufferRequest> r{{3, 0, 5, -1}, {5, 0, 5, -1}, {70, 0, 5, -1}};
  MemoryPlan p = PlanMemory(r);
  for (int64_t o : p.offsets) EXPECT_EQ(o % 64, 0);
  EXPECT_TRUE(PlanIsValid(r, p));
}

TEST(MemoryPlan, InPlaceTakesTheDonorsSlot) {
  std::vector<BufferRequest> r{{4096, 0, 1, -1}, {4096, 1, 2, 0}, {4096, 0, 2, -1}};
  MemoryPlan p = PlanMemory(r);
  EXPECT_TRUE(PlanIsValid(r, p));
  EXPECT_EQ(p.offsets[0], p.offsets[1]);
  EXPECT_EQ(p.arena_bytes, 2 * 4096);
  // Without the in-place hint the same requests need three slots.
  r[1].inplace = -1;
  EXPECT_EQ(PlanMemory(r).arena_bytes, 3 * 4096);
}

TEST(MemoryPlan, InPlaceIsRefusedWhenTheDonorLivesOn) {
  std::vector<BufferRequest> r{{256, 0, 3, -1}, {256, 1, 2, 0}};
  MemoryPlan p = PlanMemory(r);
  EXPECT_TRUE(PlanIsValid(r, p));
  EXPECT_NE(p.offsets[0], p.offsets[1]);
}

TEST(MemoryPlan, ValidatorCatchesOverlaps) {
  std::vector<BufferRequest> r{{128, 0, 2, -1}, {128, 1, 3, -1}};
  MemoryPlan bad{{0, 64}, 256};
  EXPECT_FALSE(PlanIsValid(r, bad));
  MemoryPlan good{{0, 128}, 256};
  EXPECT_TRUE(PlanIsValid(r, good));
}

TEST(MemoryPlan, RandomRequestsNeverOverlapWhileLive) {
  std::mt19937 gen(42);
  for (int trial = 0; trial < 200; ++trial) {
    std::uniform_int_distribution<int> count(1, 60), step(0, 40), len(0, 8), size(1, 100000);
    std::vector<BufferRequest> r(count(gen));
    for (size_t i = 0; i < r.size(); ++i) {
      r[i].first = step(gen);
      r[i].last = r[i].first + len(gen);
      r[i].bytes = size(gen);
      if (i > 0 && gen() % 4 == 0) r[i].inplace = static_cast<int>(gen() % i);
    }
    MemoryPlan p = PlanMemory(r);
    ASSERT_TRUE(PlanIsValid(r, p)) << "trial " << trial;
    int64_t total = 0;
    for (const auto& q : r) total += (q.bytes + 63) / 64 * 64;
    EXPECT_LE(p.arena_bytes, total);
  }
}

}  // namespace
}  // namespace surge::engine::cpu
