#include "text/jieba_dict.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "core/mmap_file.h"
#include "text/utf8.h"

namespace surge::text {
namespace {

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string_view StripAscii(std::string_view s) {
  while (!s.empty() && IsAsciiSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsAsciiSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool ParseFreq(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

struct RawEntry {
  std::string_view word;
  int64_t freq;
};

}  // namespace

PrefixDict::NodeId PrefixDict::Insert(NodeId parent, char32_t cp) {
  uint64_t key = MakeKey(parent, cp);
  size_t i = Slot(key);
  while (true) {
    Entry& e = table_[i];
    if (e.key == key) return static_cast<NodeId>(i + 1);
    if (e.key == 0) {
      e.key = key;
      ++num_nodes_;
      return static_cast<NodeId>(i + 1);
    }
    i = (i + 1) & mask_;
  }
}

Result<PrefixDict> PrefixDict::Parse(std::string_view contents, std::string_view source) {
  std::vector<RawEntry> raw;
  raw.reserve(contents.size() / 12 + 16);
  size_t node_bound = 0;
  std::string_view prev;
  size_t pos = 0;
  size_t line_no = 0;
  while (pos < contents.size()) {
    size_t nl = contents.find('\n', pos);
    if (nl == std::string_view::npos) nl = contents.size();
    std::string_view line = StripAscii(contents.substr(pos, nl - pos));
    pos = nl + 1;
    ++line_no;
    if (line.empty()) continue;
    size_t sp = line.find(' ');
    int64_t freq = 0;
    std::string_view word = line.substr(0, sp);
    bool ok = sp != std::string_view::npos && !word.empty();
    if (ok) {
      std::string_view rest = line.substr(sp + 1);
      ok = ParseFreq(rest.substr(0, rest.find(' ')), &freq);
    }
    if (!ok || !IsValidUtf8(word)) {
      return DataLossError(
          "invalid dictionary entry in {} at line {}: '{}' (expected 'word freq [tag]')", source,
          line_no, line.substr(0, 80));
    }
    // Distinct prefixes are bounded by the code points not shared with the previous word.
    size_t lcp = 0;
    while (lcp < prev.size() && lcp < word.size() && prev[lcp] == word[lcp]) ++lcp;
    while (lcp > 0 && lcp < word.size() && (static_cast<unsigned char>(word[lcp]) & 0xC0) == 0x80)
      --lcp;
    for (size_t b = lcp; b < word.size(); ++b) {
      node_bound += (static_cast<unsigned char>(word[b]) & 0xC0) != 0x80;
    }
    prev = word;
    raw.push_back({word, freq});
  }

  PrefixDict d;
  size_t capacity = std::bit_ceil(std::max<size_t>(16, node_bound + node_bound / 2 + 1));
  d.table_.resize(capacity);
  d.freqs_.assign(capacity, 0);
  d.mask_ = capacity - 1;
  d.shift_ = 64 - std::countr_zero(capacity);
  for (const RawEntry& r : raw) {
    NodeId node = kRoot;
    for (size_t p = 0; p < r.word.size();) {
      DecodedChar c = DecodeUtf8At(r.word, p);
      node = d.Insert(node, c.cp);
      p += c.length;
    }
    int64_t& f = d.freqs_[node - 1];
    if (f == 0 && r.freq != 0) ++d.num_words_;
    f = r.freq;
    d.total_ += r.freq;
  }
  for (size_t i = 0; i < capacity; ++i) {
    if (d.table_[i].key != 0 && d.freqs_[i] > 0) {
      d.table_[i].log_freq = std::log(static_cast<double>(d.freqs_[i]));
    }
  }
  return d;
}

Result<PrefixDict> PrefixDict::Load(const std::string& path) {
  auto file = MappedFile::Open(path);
  if (!file.ok()) {
    return file.status().WithContext("loading jieba dictionary");
  }
  std::string_view contents(reinterpret_cast<const char*>(file->data()), file->size());
  return Parse(contents, path);
}

PrefixDict::NodeId PrefixDict::Find(std::string_view utf8) const {
  if (utf8.empty()) return kNone;
  NodeId node = kRoot;
  for (size_t p = 0; p < utf8.size();) {
    DecodedChar c = DecodeUtf8At(utf8, p);
    if (!c.valid) return kNone;
    node = Child(node, c.cp);
    if (node == kNone) return kNone;
    p += c.length;
  }
  return node;
}

}  // namespace surge::text
