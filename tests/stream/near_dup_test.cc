#include "stream/near_dup.h"

#include <gtest/gtest.h>

#include <random>

#include "stream/flat_map.h"
#include "stream/hash.h"
#include "stream/sketch.h"

namespace surge::stream {
namespace {

uint64_t NaiveSimHash(const std::vector<uint64_t>& h) {
  int v[64] = {};
  for (uint64_t x : h) {
    for (int i = 0; i < 64; ++i) v[i] += ((x >> i) & 1) ? 1 : -1;
  }
  uint64_t fp = 0;
  for (int i = 0; i < 64; ++i) fp |= static_cast<uint64_t>(v[i] > 0) << i;
  return fp;
}

TEST(SimHashOfHashesTest, MatchesTheDefinition) {
  std::mt19937_64 rng(5);
  for (size_t n : {0u, 1u, 2u, 7u, 64u, 300u, 1000u}) {
    std::vector<uint64_t> h(n);
    for (auto& x : h) x = rng();
    EXPECT_EQ(SimHashOfHashes(h.data(), n), NaiveSimHash(h)) << n;
  }
  // Near-identical feature sets give close fingerprints.
  std::vector<uint64_t> a, b;
  for (int i = 0; i < 20; ++i) a.push_back(HashBytes("w" + std::to_string(i)));
  b = a;
  b[3] = HashBytes("other");
  EXPECT_LE(__builtin_popcountll(SimHashOfHashes(a.data(), a.size()) ^
                                 SimHashOfHashes(b.data(), b.size())),
            12);
}

TEST(NearDupIndexTest, CountsCopiesOfRecentOriginals) {
  NearDupIndex idx(3, 1000, 60000);
  const uint64_t fp = 0x0123456789abcdefULL;
  EXPECT_EQ(idx.Observe(fp, 0), 0u);         // an original
  EXPECT_EQ(idx.Observe(fp ^ 0x7, 10), 1u);  // 3 bits away: a copy
  EXPECT_EQ(idx.Observe(fp ^ 0x1, 20), 2u);
  EXPECT_EQ(idx.Observe(fp ^ 0xF, 30), 0u);  // 4 bits away: an original of its own
  EXPECT_EQ(idx.size(), 2u);
  // Older than the window: forgotten.
  EXPECT_EQ(idx.Observe(fp, 70000), 0u);
}

TEST(NearDupIndexTest, BoundedAndRestorable) {
  NearDupIndex idx(3, 100, 1'000'000);
  std::mt19937_64 rng(9);
  for (int i = 0; i < 5000; ++i) idx.Observe(rng(), i);
  EXPECT_LE(idx.size(), 100u);
  const size_t bytes = idx.memory_bytes();
  for (int i = 0; i < 5000; ++i) idx.Observe(rng(), 5000 + i);
  EXPECT_EQ(idx.memory_bytes(), bytes);
  const uint64_t fp = 42;
  idx.Observe(fp, 20000);
  idx.Observe(fp ^ 1, 20001);
  std::string snap;
  ByteWriter w(&snap);
  idx.Serialize(&w);
  NearDupIndex back(3, 100, 1'000'000);
  ByteReader r(snap, "near-dup");
  ASSERT_TRUE(back.Deserialize(&r).ok());
  EXPECT_EQ(back.size(), idx.size());
  EXPECT_EQ(back.Observe(fp ^ 2, 20002), 2u);  // the copy count came back too
  NearDupIndex other(2, 100, 1'000'000);
  ByteReader r2(snap, "near-dup");
  EXPECT_EQ(other.Deserialize(&r2).code(), StatusCode::kInvalidArgument);
}

TEST(FlatMapTest, InsertFindGrow) {
  FlatMap64<int> m(4);
  for (uint64_t k = 0; k < 10000; ++k) {
    auto [v, inserted] = m.Insert(k * 7919, static_cast<int>(k));
    EXPECT_TRUE(inserted);
    EXPECT_EQ(*v, static_cast<int>(k));
  }
  EXPECT_EQ(m.size(), 10000u);
  for (uint64_t k = 0; k < 10000; ++k) ASSERT_NE(m.Find(k * 7919), nullptr);
  EXPECT_EQ(*m.Find(0), 0);  // key 0 is a key like any other
  EXPECT_EQ(m.Find(1), nullptr);
  EXPECT_FALSE(m.Insert(7919, 5).second);
  size_t n = 0;
  m.ForEach([&](uint64_t, int) { ++n; });
  EXPECT_EQ(n, 10000u);
  m.Clear();
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.Find(7919), nullptr);
}

TEST(CountSketchTest, NeverUnderestimatesAndRoundTrips) {
  CountSketch s(10, 2);
  for (int i = 0; i < 50; ++i) s.Increment(7);
  for (uint64_t k = 100; k < 3000; ++k) s.Increment(k);
  EXPECT_GE(s.Estimate(7), 50u);
  EXPECT_LT(s.Estimate(7), 60u);
  std::string bytes;
  ByteWriter w(&bytes);
  s.Serialize(&w);
  CountSketch t(10, 2);
  ByteReader r(bytes, "sketch");
  ASSERT_TRUE(t.Deserialize(&r).ok());
  EXPECT_EQ(t.Estimate(7), s.Estimate(7));
  s.Halve();
  EXPECT_LE(s.Estimate(7), 30u);
  CountSketch u(11, 2);
  ByteReader r2(bytes, "sketch");
  EXPECT_FALSE(u.Deserialize(&r2).ok());
}

}  // namespace
}  // namespace surge::stream
