#include "text/unicode.h"

#include <gtest/gtest.h>

namespace surge::text::unicode {
namespace {

std::u32string Lower(char32_t c) {
  char32_t buf[kMaxLowercase];
  int n = ToLower(c, buf);
  return std::u32string(buf, buf + n);
}

std::u32string Nfd(char32_t c) {
  char32_t buf[kMaxDecomposition];
  int n = Decompose(c, buf);
  return std::u32string(buf, buf + n);
}

TEST(Unicode, CleanTextFlags) {
  EXPECT_TRUE(Flags(0x00) & kRemove);
  EXPECT_TRUE(Flags(0x7F) & kRemove);
  EXPECT_TRUE(Flags(0x85) & kRemove);    // NEL is Cc: removed before it could count as space
  EXPECT_TRUE(Flags(0x200D) & kRemove);  // ZWJ is Cf
  EXPECT_TRUE(Flags(0xFEFF) & kRemove);
  EXPECT_TRUE(Flags(0xE000) & kRemove);  // private use
  EXPECT_TRUE(Flags(0xFFFD) & kRemove);
  EXPECT_FALSE(Flags(0x0378) & kRemove);  // unassigned code points are kept, as in HF
  EXPECT_FALSE(Flags('\t') & kRemove);
  EXPECT_FALSE(Flags(U'中') & kRemove);
}

TEST(Unicode, WhitespaceIsRustWhiteSpace) {
  for (char32_t c : {U' ', U'\t', U'\n', U'\r', U'\u00A0', U'\u3000', U'\u2028', U'\u202F'}) {
    EXPECT_TRUE(Flags(c) & kWhitespace) << static_cast<uint32_t>(c);
  }
  EXPECT_FALSE(Flags(0x1C) & kWhitespace);  // Python isspace() says yes, Rust says no
  EXPECT_FALSE(Flags(0x200B) & kWhitespace);
}

TEST(Unicode, Punctuation) {
  for (char32_t c : {U'!', U'$', U'+', U'^', U'`', U'~', U'，', U'。', U'《', U'」', U'¡'}) {
    EXPECT_TRUE(Flags(c) & kPunct) << static_cast<uint32_t>(c);
  }
  EXPECT_FALSE(Flags(U'a') & kPunct);
  EXPECT_FALSE(Flags(U'©') & kPunct);  // So, not P*
  EXPECT_FALSE(Flags(U'😀') & kPunct);
}

TEST(Unicode, LowercaseIncludingMultiCharMappings) {
  EXPECT_EQ(Lower(U'A'), U"a");
  EXPECT_EQ(Lower(U'Ａ'), U"ａ");
  EXPECT_EQ(Lower(U'İ'), U"i\u0307");
  EXPECT_EQ(Lower(U'Σ'), U"σ");  // no final-sigma context rule
  EXPECT_EQ(Lower(U'ẞ'), U"ß");
  EXPECT_EQ(Lower(U'ǅ'), U"ǆ");
  EXPECT_EQ(Lower(U'中'), U"中");
  EXPECT_TRUE(Flags(U'İ') & kHasLower);
}

TEST(Unicode, CanonicalDecomposition) {
  EXPECT_EQ(Nfd(U'é'), U"e\u0301");
  EXPECT_EQ(Nfd(U'ǖ'), U"u\u0308\u0304");  // recursive
  EXPECT_EQ(Nfd(U'한'), U"\u1112\u1161\u11AB");
  EXPECT_EQ(Nfd(U'가'), U"\u1100\u1161");
  EXPECT_EQ(Nfd(0xF900), U"\u8C48");  // CJK compatibility ideograph
  EXPECT_EQ(Nfd(U'ﬁ'), U"ﬁ");         // compatibility only: unchanged
  EXPECT_TRUE(Flags(0x0301) & kMn);
  EXPECT_TRUE(Flags(U'é') & kHasNfd);
  EXPECT_TRUE(Flags(U'한') & kHasNfd);
}

TEST(Unicode, ChineseRangesFollowTheRustCrate) {
  EXPECT_TRUE(IsBertChineseChar(0x4E00));
  EXPECT_TRUE(IsBertChineseChar(0x2B81F));
  EXPECT_FALSE(IsBertChineseChar(0x2B820));  // Python transformers says yes
  EXPECT_FALSE(IsBertChineseChar(0x2B91F));
  EXPECT_TRUE(IsBertChineseChar(0x2B920));
  EXPECT_FALSE(IsBertChineseChar(U'あ'));
  EXPECT_FALSE(IsBertChineseChar(U'한'));
  EXPECT_FALSE(IsBertChineseChar(0x3000));
}

TEST(Unicode, OutOfRangeCodePointsHaveNoFlags) { EXPECT_EQ(Flags(0x110000), 0); }

}  // namespace
}  // namespace surge::text::unicode
