#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cmath>

namespace surge {
namespace {

TEST(Tensor, OwnedAlignedAndZeroed) {
  Tensor t(DType::kFloat32, {3, 5});
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.nbytes(), 60u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % kAlignment, 0u);
  for (float v : t.span<float>()) EXPECT_EQ(v, 0.0f);
}

TEST(Tensor, ReshapeChecksCount) {
  Tensor t(DType::kInt64, {2, 6});
  EXPECT_TRUE(t.Reshaped({3, 4}).ok());
  auto bad = t.Reshaped({5});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[2,6]"), std::string::npos);
}

TEST(Tensor, HalfRoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 1e-5f, 3.14159f}) {
    float back = HalfToFloat(FloatToHalf(f));
    EXPECT_NEAR(back, f, std::fabs(f) * 1e-3 + 1e-7) << f;
    float bb = BFloat16ToFloat(FloatToBFloat16(f));
    EXPECT_NEAR(bb, f, std::fabs(f) * 1e-2 + 1e-7) << f;
  }
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(1e6f))));
}

TEST(Tensor, ParseShape) {
  EXPECT_EQ(*ParseShape("8x128"), (Shape{8, 128}));
  EXPECT_FALSE(ParseShape("8xx").ok());
  EXPECT_FALSE(ParseShape("-1").ok());
}

TEST(DType, Names) {
  EXPECT_EQ(*ParseDType("fp16"), DType::kFloat16);
  EXPECT_FALSE(ParseDType("complex").ok());
  EXPECT_FALSE(DTypeFromOnnx(14).ok());
}

}  // namespace
}  // namespace surge
