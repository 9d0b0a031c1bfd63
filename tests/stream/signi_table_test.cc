#include "stream/signi_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "stream/hash.h"

namespace surge::stream {
namespace {

TEST(EwmaTest, AlphaFromHalfLife) {
  // After `h` buckets the weight of an old observation has halved.
  for (double h : {1.0, 4.0, 30.0}) {
    double a = AlphaForHalfLife(h);
    EXPECT_NEAR(std::pow(1 - a, h), 0.5, 1e-12) << h;
  }
}

TEST(EwmaTest, UpdateFollowsTheFormulas) {
  EwmStat s{4, 10};
  const double a = 0.25;
  s.Update(8, a);
  // d = 4; mean = 4 + 0.25 * 4 = 5; var = 0.75 * (10 + 0.25 * 16) = 10.5.
  EXPECT_FLOAT_EQ(s.mean, 5);
  EXPECT_FLOAT_EQ(s.var, 10.5);
  EXPECT_NEAR(s.Score(5 + 3 * (std::sqrt(10.5) + 1), 1), 3.0, 1e-6);
  // The variance used is at least the mean (Poisson floor).
  EwmStat low{100, 1};
  EXPECT_NEAR(low.Score(100 + 3 * 11, 1), 3.0, 1e-6);
}

TEST(EwmaTest, ConvergesToTheMomentsOfAStationaryStream) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> n(50, 5);
  EwmStat s;
  const double a = AlphaForHalfLife(50);
  s.mean = 50;
  double mean_acc = 0, var_acc = 0;
  int count = 0;
  for (int i = 0; i < 20000; ++i) {
    s.Update(n(rng), a);
    if (i > 1000) {
      mean_acc += s.mean;
      var_acc += s.var;
      ++count;
    }
  }
  EXPECT_NEAR(mean_acc / count, 50, 0.5);
  EXPECT_NEAR(var_acc / count, 25, 2.5);
}

TEST(SigniTableTest, ScoresABurstAgainstItsHistory) {
  SigniTable t({12, 2});
  const uint64_t steady = HashBytes("steady"), burst = HashBytes("burst");
  const double alpha = AlphaForHalfLife(4), beta = 2;
  for (int b = 0; b < 30; ++b) {
    for (int i = 0; i < 20; ++i) t.Add(steady, 1);
    t.Add(burst, 1);
    t.EndBucket(alpha);
  }
  for (int i = 0; i < 20; ++i) t.Add(steady, 1);
  for (int i = 0; i < 40; ++i) t.Add(burst, 1);
  auto s = t.Get(steady, beta);
  auto x = t.Get(burst, beta);
  EXPECT_DOUBLE_EQ(s.count, 20);
  EXPECT_NEAR(s.mean, 20, 1e-3);
  EXPECT_LT(std::abs(s.score), 0.1);
  EXPECT_DOUBLE_EQ(x.count, 40);
  EXPECT_NEAR(x.mean, 1, 1e-3);
  EXPECT_NEAR(x.score, 13, 1e-3);  // (40 - 1) / (sqrt(max(0, 1)) + 2)
}

TEST(SigniTableTest, WarmUpAveragesTheFirstBuckets) {
  SigniTable t({8, 1});
  const uint64_t k = 42;
  for (int v : {10, 20, 30}) {
    t.Add(k, static_cast<float>(v));
    t.EndBucket(0.01);
  }
  // alpha 1, 1/2, 1/3: the plain mean of 10, 20, 30.
  EXPECT_NEAR(t.Get(k, 1).mean, 20, 1e-4);
}

TEST(SigniTableTest, MemoryIsFixedWhateverTheVocabulary) {
  SigniTable t({10, 2});
  const size_t bytes = t.memory_bytes();
  EXPECT_EQ(bytes, 2u * 1024 * 12);
  for (uint64_t i = 0; i < 200000; ++i) t.Add(Mix64(i), 1);
  t.EndBucket(0.1);
  EXPECT_EQ(t.memory_bytes(), bytes);
}

TEST(SigniTableTest, CollisionsOnlyInflateCountsAndTheMinimumRowLimitsThem) {
  SigniTable t({4, 3});  // 16 cells per row: heavy collisions
  const uint64_t k = HashBytes("k");
  for (uint64_t i = 0; i < 64; ++i) t.Add(Mix64(i + 1000), 1);
  t.Add(k, 5);
  auto e = t.Get(k, 1);
  EXPECT_GE(e.count, 5);
  EXPECT_LT(e.count, 5 + 64);
}

TEST(SigniTableTest, SeedStartsANewKeysHistory) {
  SigniTable t({8, 2});
  t.Seed(7, 30, 30);
  t.Add(7, 30);
  EXPECT_NEAR(t.Get(7, 2).score, 0, 1e-6);
}

TEST(SigniTableTest, SerialisesAndRestores) {
  SigniTable t({10, 2});
  for (uint64_t i = 0; i < 500; ++i) t.Add(Mix64(i), static_cast<float>(i % 7));
  t.EndBucket(0.2);
  for (uint64_t i = 0; i < 100; ++i) t.Add(Mix64(i), 2);
  std::string bytes;
  ByteWriter w(&bytes);
  t.Serialize(&w);
  SigniTable u({10, 2});
  ByteReader r(bytes, "table");
  ASSERT_TRUE(u.Deserialize(&r).ok());
  EXPECT_TRUE(r.done());
  EXPECT_EQ(u.buckets_seen(), 1);
  for (uint64_t i = 0; i < 500; ++i) {
    auto a = t.Get(Mix64(i), 1), b = u.Get(Mix64(i), 1);
    EXPECT_EQ(a.count, b.count);
    EXPECT_EQ(a.mean, b.mean);
    EXPECT_EQ(a.var, b.var);
  }
  SigniTable other({11, 2});
  ByteReader r2(bytes, "table");
  Status st = other.Deserialize(&r2);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("2^10"), std::string::npos) << st.message();
  ByteReader r3(std::string_view(bytes).substr(0, bytes.size() / 2), "table");
  EXPECT_EQ(u.Deserialize(&r3).code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace surge::stream
