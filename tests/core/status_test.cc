#include "core/status.h"

#include <gtest/gtest.h>

namespace surge {
namespace {

Result<int> Half(int x) {
  if (x % 2) return InvalidArgumentError("{} is odd", x);
  return x / 2;
}

Result<int> Quarter(int x) {
  SURGE_ASSIGN_OR_RETURN(int h, Half(x));
  SURGE_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckPositive(int x) {
  if (x <= 0) return OutOfRangeError("{} is not positive", x);
  return Status::Ok();
}

Status Both(int a, int b) {
  SURGE_RETURN_IF_ERROR(CheckPositive(a));
  SURGE_RETURN_IF_ERROR(CheckPositive(b));
  return Status::Ok();
}

TEST(Status, OkAndError) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = NotFoundError("model '{}'", "bert");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: model 'bert'");
  EXPECT_EQ(s.WithContext("load").message(), "load: model 'bert'");
  Status copy = s;
  EXPECT_EQ(copy.message(), s.message());
}

TEST(Status, MacrosPropagate) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
  EXPECT_TRUE(Both(1, 2).ok());
  EXPECT_EQ(Both(1, -2).code(), StatusCode::kOutOfRange);
}

TEST(StatusDeathTest, CheckAborts) {
  EXPECT_DEATH(SURGE_CHECK(1 + 1 == 3, "math is {}", "broken"), "math is broken");
}

}  // namespace
}  // namespace surge
