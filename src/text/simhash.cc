#include "text/simhash.h"

#include <xxhash.h>

#include <algorithm>

#include "text/utf8.h"

namespace surge::text {
namespace {

// Letters, digits and ideographs; everything else (spaces, punctuation, symbols, emoji) is
// dropped before shingling.
bool IsWordChar(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z');
  return (c >= 0xC0 && c <= 0x24F && c != 0xD7 && c != 0xF7) || (c >= 0x370 && c <= 0x52F) ||
         (c >= 0x600 && c <= 0x6FF) || (c >= 0x3040 && c <= 0x30FF) ||
         (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x20000 && c <= 0x2FFFF) ||
         (c >= 0xAC00 && c <= 0xD7AF) || c == kReplacementChar;
}

char32_t Normalize(char32_t c) {
  if (c >= 0xFF01 && c <= 0xFF5E) c -= 0xFEE0;  // full-width ASCII
  if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
  return c;
}

}  // namespace

uint64_t SimHash(std::span<const WeightedFeature> features) {
  double v[64] = {};
  for (const WeightedFeature& f : features) {
    uint64_t h = XXH3_64bits(f.feature.data(), f.feature.size());
    for (int i = 0; i < 64; ++i) v[i] += ((h >> i) & 1) ? f.weight : -f.weight;
  }
  uint64_t fp = 0;
  for (int i = 0; i < 64; ++i) {
    if (v[i] > 0) fp |= uint64_t{1} << i;
  }
  return fp;
}

uint64_t SimHashWords(std::span<const std::string_view> words) {
  std::vector<WeightedFeature> f;
  f.reserve(words.size());
  for (std::string_view w : words) f.push_back({w, 1.0});
  return SimHash(f);
}

uint64_t SimHashText(std::string_view text, int shingle) {
  shingle = std::max(shingle, 1);
  // Concatenate the normalised word characters, remembering where each one starts.
  std::string compact;
  std::vector<uint32_t> starts;
  compact.reserve(text.size());
  for (size_t p = 0; p < text.size();) {
    DecodedChar c = DecodeUtf8At(text, p);
    p += c.length;
    char32_t n = Normalize(c.cp);
    if (!IsWordChar(n)) continue;
    starts.push_back(static_cast<uint32_t>(compact.size()));
    AppendUtf8(n, &compact);
  }
  starts.push_back(static_cast<uint32_t>(compact.size()));
  size_t chars = starts.size() - 1;
  std::vector<WeightedFeature> f;
  if (chars <= static_cast<size_t>(shingle)) {
    f.push_back({compact, 1.0});
  } else {
    f.reserve(chars - shingle + 1);
    for (size_t i = 0; i + shingle <= chars; ++i) {
      f.push_back(
          {std::string_view(compact).substr(starts[i], starts[i + shingle] - starts[i]), 1.0});
    }
  }
  return SimHash(f);
}

SimHashIndex::SimHashIndex(int blocks) : blocks_(blocks), tables_(blocks) {
  int bit = 0;
  for (int b = 0; b < blocks; ++b) {
    int width = 64 / blocks + (b < 64 % blocks ? 1 : 0);
    shift_[b] = bit;
    mask_[b] = width == 64 ? ~uint64_t{0} : ((uint64_t{1} << width) - 1);
    bit += width;
  }
}

Result<SimHashIndex> SimHashIndex::Create(int max_distance) {
  if (max_distance < 0 || max_distance > 3) {
    return InvalidArgumentError("SimHashIndex: max_distance {} is outside 0..3", max_distance);
  }
  return SimHashIndex(max_distance + 1);
}

void SimHashIndex::Insert(uint64_t id, uint64_t fingerprint) {
  for (int b = 0; b < blocks_; ++b) tables_[b][Block(fingerprint, b)].push_back({id, fingerprint});
  ++size_;
}

bool SimHashIndex::Remove(uint64_t id, uint64_t fingerprint) {
  bool found = false;
  for (int b = 0; b < blocks_; ++b) {
    auto it = tables_[b].find(Block(fingerprint, b));
    if (it == tables_[b].end()) continue;
    auto& v = it->second;
    size_t before = v.size();
    v.erase(std::remove_if(v.begin(), v.end(),
                           [&](const Entry& e) { return e.id == id && e.fp == fingerprint; }),
            v.end());
    if (b == 0 && v.size() != before) {
      found = true;
      size_ -= before - v.size();
    }
    if (v.empty()) tables_[b].erase(it);
  }
  return found;
}

std::vector<SimHashIndex::Match> SimHashIndex::Query(uint64_t fingerprint) const {
  std::vector<Match> out;
  const int k = blocks_ - 1;
  for (int b = 0; b < blocks_; ++b) {
    auto it = tables_[b].find(Block(fingerprint, b));
    if (it == tables_[b].end()) continue;
    for (const Entry& e : it->second) {
      int d = HammingDistance(e.fp, fingerprint);
      if (d > k) continue;
      // Report each entry once: from the first block on which it agrees.
      bool earlier = false;
      for (int c = 0; c < b; ++c) {
        if (Block(e.fp, c) == Block(fingerprint, c)) {
          earlier = true;
          break;
        }
      }
      if (!earlier) out.push_back({e.id, d});
    }
  }
  std::sort(out.begin(), out.end(), [](const Match& a, const Match& b) {
    return a.distance != b.distance ? a.distance < b.distance : a.id < b.id;
  });
  return out;
}

}  // namespace surge::text
