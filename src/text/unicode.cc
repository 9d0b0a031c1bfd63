#include "text/unicode.h"

#include <algorithm>

namespace surge::text::unicode {
namespace internal {
#include "text/unicode_tables.inc"

namespace {
// Looks `cp` up in one of the generated sorted maps; 0 when absent.
int Lookup(const char32_t* keys, uint32_t count, const uint32_t* index, const char32_t* pool,
           char32_t cp, char32_t* out) {
  const char32_t* end = keys + count;
  const char32_t* it = std::lower_bound(keys, end, cp);
  if (it == end || *it != cp) return 0;
  uint32_t entry = index[it - keys];
  int n = static_cast<int>(entry & 7);
  std::copy_n(pool + (entry >> 3), n, out);
  return n;
}
}  // namespace
}  // namespace internal

int Decompose(char32_t cp, char32_t* out) {
  constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
  constexpr char32_t kTCount = 28, kNCount = 21 * 28, kSCount = 11172;
  if (cp >= kSBase && cp < kSBase + kSCount) {
    char32_t s = cp - kSBase;
    out[0] = kLBase + s / kNCount;
    out[1] = kVBase + (s % kNCount) / kTCount;
    char32_t t = s % kTCount;
    if (t == 0) return 2;
    out[2] = kTBase + t;
    return 3;
  }
  int n = internal::Lookup(internal::kNfdKeys, internal::kNfdCount, internal::kNfdIndex,
                           internal::kNfdPool, cp, out);
  if (n == 0) {
    out[0] = cp;
    return 1;
  }
  return n;
}

int ToLower(char32_t cp, char32_t* out) {
  if (cp < 0x80) {
    out[0] = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    return 1;
  }
  int n = internal::Lookup(internal::kLowerKeys, internal::kLowerCount, internal::kLowerIndex,
                           internal::kLowerPool, cp, out);
  if (n == 0) {
    out[0] = cp;
    return 1;
  }
  return n;
}

}  // namespace surge::text::unicode
