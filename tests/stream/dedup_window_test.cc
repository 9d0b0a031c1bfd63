#include "stream/dedup_window.h"

#include <gtest/gtest.h>

namespace surge::stream {
namespace {

TEST(DedupWindowTest, ReplaysInsideTheWindowAreRecognised) {
  DedupWindow w(60000, 1000);
  EXPECT_TRUE(w.Insert(1, 1000));
  EXPECT_TRUE(w.Insert(2, 2000));
  EXPECT_FALSE(w.Insert(1, 3000));
  EXPECT_FALSE(w.Insert(2, 2000));
  EXPECT_EQ(w.size(), 2u);
}

TEST(DedupWindowTest, KeysLeaveWhenOlderThanTheWindow) {
  DedupWindow w(60000, 1000);
  EXPECT_TRUE(w.Insert(1, 0));
  EXPECT_TRUE(w.Insert(2, 30000));
  EXPECT_TRUE(w.Insert(3, 60001));  // key 1 is now older than the window
  EXPECT_FALSE(w.Contains(1));
  EXPECT_TRUE(w.Contains(2));
  EXPECT_TRUE(w.Insert(1, 60002));  // no longer recognised
}

TEST(DedupWindowTest, SizeIsBounded) {
  DedupWindow w(1'000'000'000, 100);
  for (uint64_t k = 0; k < 1000; ++k) EXPECT_TRUE(w.Insert(k, static_cast<int64_t>(k)));
  EXPECT_EQ(w.size(), 100u);
  EXPECT_EQ(w.evicted_early(), 900);
  EXPECT_FALSE(w.Insert(999, 1000));
  EXPECT_TRUE(w.Insert(0, 1000));
}

TEST(DedupWindowTest, SnapshotRoundTrip) {
  DedupWindow w(60000, 1000);
  for (uint64_t k = 0; k < 50; ++k) w.Insert(k * 7919, static_cast<int64_t>(k) * 1000);
  std::string bytes;
  ByteWriter bw(&bytes);
  w.Serialize(&bw);
  DedupWindow u(60000, 1000);
  ByteReader r(bytes, "dedup");
  ASSERT_TRUE(u.Deserialize(&r).ok());
  EXPECT_EQ(u.size(), w.size());
  for (uint64_t k = 0; k < 50; ++k) EXPECT_FALSE(u.Insert(k * 7919, 49000)) << k;
  ByteReader bad(std::string_view(bytes).substr(0, bytes.size() - 3), "dedup");
  DedupWindow v(60000, 1000);
  EXPECT_EQ(v.Deserialize(&bad).code(), StatusCode::kDataLoss);
  EXPECT_EQ(v.size(), 0u);  // nothing half-restored
}

}  // namespace
}  // namespace surge::stream
