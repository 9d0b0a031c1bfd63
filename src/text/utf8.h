// UTF-8 decoding shared by the text front end. Invalid input has defined behaviour: every invalid
// or truncated sequence decodes to U+FFFD and consumes exactly one byte, so offsets always advance
// and every byte of the input belongs to exactly one decoded code point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace surge::text {

inline constexpr char32_t kReplacementChar = 0xFFFD;

struct DecodedChar {
  char32_t cp;      // U+FFFD for invalid bytes
  uint32_t offset;  // byte offset of the first byte in the input
  uint8_t length;   // bytes consumed (1..4)
  bool valid;       // false when the bytes were not well-formed UTF-8
};

// Decodes one code point at `pos` (pos < s.size()).
inline DecodedChar DecodeUtf8At(std::string_view s, size_t pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
  size_t left = s.size() - pos;
  unsigned char c = p[0];
  DecodedChar bad{kReplacementChar, static_cast<uint32_t>(pos), 1, false};
  if (c < 0x80) return {c, static_cast<uint32_t>(pos), 1, true};
  int n;
  char32_t cp;
  char32_t min;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
    min = 0x10000;
  } else
    return bad;
  if (left < static_cast<size_t>(n)) return bad;
  for (int i = 1; i < n; ++i) {
    if ((p[i] & 0xC0) != 0x80) return bad;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return bad;
  return {cp, static_cast<uint32_t>(pos), static_cast<uint8_t>(n), true};
}

// Decodes a whole string.
std::vector<DecodedChar> DecodeUtf8(std::string_view s);

// True when every byte of `s` is part of well-formed UTF-8.
bool IsValidUtf8(std::string_view s);

// Appends the UTF-8 encoding of `cp` (a valid scalar value) to `out`.
void AppendUtf8(char32_t cp, std::string* out);

}  // namespace surge::text
