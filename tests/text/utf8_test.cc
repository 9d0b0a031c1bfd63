#include "text/utf8.h"

#include <gtest/gtest.h>

namespace surge::text {
namespace {

TEST(Utf8, DecodesMixedScripts) {
  std::string s = "a中😀";
  auto d = DecodeUtf8(s);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[1].cp, U'中');
  EXPECT_EQ(d[1].offset, 1u);
  EXPECT_EQ(d[2].cp, U'😀');
  EXPECT_EQ(d[2].length, 4);
  std::string back;
  for (auto c : d) AppendUtf8(c.cp, &back);
  EXPECT_EQ(back, s);
}

TEST(Utf8, InvalidBytesBecomeReplacementOneByteEach) {
  std::string s = "a\xE4\xB8x\xFF\xC0\xAF";  // truncated 3-byte, 0xFF, overlong
  auto d = DecodeUtf8(s);
  ASSERT_EQ(d.size(), 7u);
  EXPECT_TRUE(d[0].valid);
  EXPECT_FALSE(d[1].valid);
  EXPECT_EQ(d[1].cp, kReplacementChar);
  EXPECT_EQ(d[3].cp, U'x');
  EXPECT_FALSE(IsValidUtf8(s));
  EXPECT_TRUE(IsValidUtf8("中文"));
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));  // surrogate
}

}  // namespace
}  // namespace surge::text
