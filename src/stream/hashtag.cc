#include "stream/hashtag.h"

#include <algorithm>
#include <map>

#include "text/unicode.h"
#include "text/utf8.h"

namespace surge::stream {
namespace {

// A separator: nothing that joins words into a name.
bool IsSeparatorChar(char32_t c) {
  if (c < 0x80) {
    return !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
  }
  if (c >= 0xFF10 && c <= 0xFF19) return false;  // full-width digits
  if ((c >= 0xFF21 && c <= 0xFF3A) || (c >= 0xFF41 && c <= 0xFF5A)) return false;
  uint8_t f = text::unicode::Flags(c);
  if (f & (text::unicode::kPunct | text::unicode::kWhitespace | text::unicode::kRemove)) {
    return true;
  }
  // Letters of other scripts and ideographs join; symbols, arrows, emoji and the like do not.
  if (c >= 0x2000 && c <= 0x2BFF) return true;
  if (c >= 0x1F000 && c <= 0x1FAFF) return true;  // emoji and pictographs
  if (c >= 0xFE00 && c <= 0xFE0F) return true;
  if (c == 0x3000 || (c >= 0x3001 && c <= 0x303F)) return true;
  return false;
}

struct Occ {
  size_t text;
  size_t begin, end;  // bytes
};

int Support(const std::vector<Occ>& occ) {
  int n = 0;
  size_t last = SIZE_MAX;
  for (const Occ& o : occ) {
    if (o.text != last) ++n;
    last = o.text;
  }
  return n;
}

size_t CodePoints(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    i += text::DecodeUtf8At(s, i).length;
    ++n;
  }
  return n;
}

// The code point ending at byte `end` of `s` (start position in *start).
char32_t Before(std::string_view s, size_t end, size_t* start) {
  size_t i = end;
  while (i > 0) {
    --i;
    unsigned char c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) != 0x80) break;
  }
  text::DecodedChar d = text::DecodeUtf8At(s, i);
  if (i + d.length != end) {  // invalid sequence: take one byte
    *start = end - 1;
    return 0xFFFD;
  }
  *start = i;
  return d.valid ? d.cp : 0xFFFD;
}

}  // namespace

bool IsNameChar(char32_t c) { return !IsSeparatorChar(c); }

Phrase BestPhrase(std::span<const std::string_view> texts, std::span<const SeedTerm> seeds,
                  const PhraseOptions& o) {
  Phrase best;
  for (const SeedTerm& seed : seeds) {
    if (seed.text.empty()) continue;
    std::vector<Occ> occ;
    for (size_t t = 0; t < texts.size(); ++t) {
      for (size_t pos = texts[t].find(seed.text); pos != std::string_view::npos;
           pos = texts[t].find(seed.text, pos + 1)) {
        occ.push_back({t, pos, pos + seed.text.size()});
      }
    }
    int support = Support(occ);
    if (support < o.min_support) continue;
    size_t chars = CodePoints(seed.text);
    for (;;) {
      if (static_cast<int>(chars) >= o.max_chars) break;
      // Most common neighbour on each side, counted once per text.
      std::map<char32_t, std::pair<int, size_t>> left, right;  // cp -> (texts, last text + 1)
      for (const Occ& x : occ) {
        std::string_view s = texts[x.text];
        if (x.begin > 0) {
          size_t st;
          char32_t c = Before(s, x.begin, &st);
          auto& e = left[c];
          if (e.second != x.text + 1) {
            ++e.first;
            e.second = x.text + 1;
          }
        }
        if (x.end < s.size()) {
          text::DecodedChar d = text::DecodeUtf8At(s, x.end);
          auto& e = right[d.valid ? d.cp : 0xFFFD];
          if (e.second != x.text + 1) {
            ++e.first;
            e.second = x.text + 1;
          }
        }
      }
      auto pick = [&](const std::map<char32_t, std::pair<int, size_t>>& m, char32_t* cp) {
        int n = 0;
        for (const auto& [c, e] : m) {
          if (IsSeparatorChar(c) || c == 0xFFFD) continue;
          if (e.first > n) {
            n = e.first;
            *cp = c;
          }
        }
        return n;
      };
      char32_t lc = 0, rc = 0;
      int ln = pick(left, &lc), rn = pick(right, &rc);
      bool go_left = ln >= rn;
      int n = go_left ? ln : rn;
      if (n < o.min_support || n < o.keep * support) break;
      std::vector<Occ> next;
      for (const Occ& x : occ) {
        std::string_view s = texts[x.text];
        if (go_left) {
          if (x.begin == 0) continue;
          size_t st;
          if (Before(s, x.begin, &st) == lc) next.push_back({x.text, st, x.end});
        } else {
          if (x.end >= s.size()) continue;
          text::DecodedChar d = text::DecodeUtf8At(s, x.end);
          if (d.valid && d.cp == rc) next.push_back({x.text, x.begin, x.end + d.length});
        }
      }
      occ = std::move(next);
      support = Support(occ);
      ++chars;
    }
    if (occ.empty()) continue;
    std::string text(texts[occ[0].text].substr(occ[0].begin, occ[0].end - occ[0].begin));
    double w = 0;
    for (const SeedTerm& s : seeds) {
      if (!s.text.empty() && text.find(s.text) != std::string::npos) w += s.weight;
    }
    double score = support * w;
    bool better = score > best.score ||
                  (score == best.score && (text.size() > best.text.size() ||
                                           (text.size() == best.text.size() && text < best.text)));
    if (better) best = {text, support, score};
  }
  return best;
}

std::string NormalizeHashtag(std::string_view phrase, int max_chars) {
  std::u32string cps;
  for (size_t i = 0; i < phrase.size();) {
    text::DecodedChar d = text::DecodeUtf8At(phrase, i);
    i += d.length;
    char32_t c = d.valid ? d.cp : 0xFFFD;
    if (c >= 0xFF01 && c <= 0xFF5E) c = c - 0xFF01 + 0x21;
    if (c == 0x3000) c = ' ';
    if (c == '#' || c == 0xFFFD) continue;
    bool space = c < 0x80 ? (c == ' ' || c == '\t' || c == '\n' || c == '\r')
                          : (text::unicode::Flags(c) & text::unicode::kWhitespace) != 0;
    if (space) {
      if (!cps.empty() && cps.back() != ' ') cps.push_back(' ');
      continue;
    }
    if (c < 0x20 || (c >= 0x80 && (text::unicode::Flags(c) & text::unicode::kRemove))) continue;
    cps.push_back(c);
  }
  auto trim = [](char32_t c) {
    return c == ' ' ||
           (c < 0x80 ? !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
                     : (text::unicode::Flags(c) & text::unicode::kPunct) != 0);
  };
  size_t b = 0, e = cps.size();
  while (b < e && trim(cps[b])) ++b;
  while (e > b && trim(cps[e - 1])) --e;
  if (e - b > static_cast<size_t>(std::max(1, max_chars))) {
    e = b + max_chars;
    while (e > b && trim(cps[e - 1])) --e;
  }
  if (b == e) return "";
  std::string out = "#";
  for (size_t i = b; i < e; ++i) text::AppendUtf8(cps[i], &out);
  out.push_back('#');
  return out;
}

}  // namespace surge::stream
