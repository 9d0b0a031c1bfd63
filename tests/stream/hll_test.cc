#include "stream/hll.h"

#include <gtest/gtest.h>

#include <cmath>

#include "stream/hash.h"

namespace surge::stream {
namespace {

TEST(HyperLogLogTest, EstimatesWithinItsErrorBound) {
  for (int p : {8, 10, 12}) {
    const double se = 1.04 / std::sqrt(double(1 << p));
    for (int n : {10, 100, 1000, 10000, 200000}) {
      HyperLogLog h(p);
      for (int i = 0; i < n; ++i) h.Add(HashBytes("user" + std::to_string(i)));
      // Four standard errors (and at least one unit for tiny counts).
      EXPECT_NEAR(h.Estimate(), n, std::max(1.0, 4 * se * n)) << "p=" << p << " n=" << n;
    }
  }
}

TEST(HyperLogLogTest, RepeatsDoNotCount) {
  HyperLogLog h(10);
  for (int r = 0; r < 50; ++r) {
    for (int i = 0; i < 300; ++i) h.Add(HashBytes("u" + std::to_string(i)));
  }
  EXPECT_NEAR(h.Estimate(), 300, 4 * 0.033 * 300);
  EXPECT_TRUE(HyperLogLog(10).empty());
  EXPECT_NEAR(HyperLogLog(10).Estimate(), 0, 1e-9);
}

TEST(HyperLogLogTest, MergeIsTheUnion) {
  HyperLogLog a(10), b(10), all(10);
  for (int i = 0; i < 6000; ++i) {
    uint64_t k = HashBytes("u" + std::to_string(i));
    (i < 4000 ? a : b).Add(k);
    if (i >= 2000 && i < 3000) b.Add(k);  // overlap
    all.Add(k);
  }
  ASSERT_TRUE(a.Merge(b).ok());
  EXPECT_DOUBLE_EQ(a.Estimate(), all.Estimate());
  HyperLogLog other(11);
  EXPECT_EQ(a.Merge(other).code(), StatusCode::kInvalidArgument);
}

TEST(HyperLogLogTest, SerialisesSparseAndDense) {
  for (int n : {5, 50000}) {
    HyperLogLog h(10);
    for (int i = 0; i < n; ++i) h.Add(Mix64(i));
    std::string bytes;
    ByteWriter w(&bytes);
    h.Serialize(&w);
    if (n == 5) {
      EXPECT_LT(bytes.size(), 30u);
    }
    ByteReader r(bytes, "hll");
    auto back = HyperLogLog::Deserialize(&r);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_DOUBLE_EQ(back->Estimate(), h.Estimate());
    EXPECT_TRUE(r.done());
  }
  std::string bad = {static_cast<char>(30), 0};
  ByteReader r(bad, "hll");
  auto st = HyperLogLog::Deserialize(&r);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("precision"), std::string::npos);
  std::string trunc = {static_cast<char>(10), 0, 1, 2};
  ByteReader r2(trunc, "hll");
  EXPECT_EQ(HyperLogLog::Deserialize(&r2).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace surge::stream
