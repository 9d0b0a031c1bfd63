#include "text/utf8.h"

namespace surge::text {

// Decodes a whole string.
std::vector<DecodedChar> DecodeUtf8(std::string_view s) {
  std::vector<DecodedChar> out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    DecodedChar d = DecodeUtf8At(s, pos);
    out.push_back(d);
    pos += d.length;
  }
  return out;
}

// True when every byte of `s` is part of well-formed UTF-8.
bool IsValidUtf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    DecodedChar d = DecodeUtf8At(s, pos);
    if (!d.valid) return false;
    pos += d.length;
  }
  return true;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace surge::text
