#include "text/segmenter.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "core/logging.h"
#include "core/mmap_file.h"
#include "text/hmm_model.h"
#include "text/jieba_dict.h"
#include "text/utf8.h"

namespace surge::text {
namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using WordFreqMap = std::unordered_map<std::string, int64_t, StringHash, std::equal_to<>>;
using WordSet = std::unordered_set<std::string, StringHash, std::equal_to<>>;

// jieba's re_han_default: [\u4E00-\u9FD5a-zA-Z0-9+#&\._%\-]
constexpr bool AsciiHanClass(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '#' || c == '&' || c == '.' || c == '_' || c == '%' || c == '-';
}
inline bool IsHan(char32_t c) { return c >= 0x4E00 && c <= 0x9FD5; }
inline bool IsHanClass(char32_t c) { return IsHan(c) || (c < 128 && AsciiHanClass(c)); }
inline bool IsAsciiAlnum(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
inline bool IsAsciiDigit(char32_t c) { return c >= '0' && c <= '9'; }

struct Scratch {
  std::vector<char32_t> cps;
  std::vector<uint32_t> offs;
  std::vector<uint32_t> dag_start;
  std::vector<uint32_t> dag_end;
  std::vector<double> dag_logf;
  std::vector<double> route_val;
  std::vector<uint32_t> route_next;
  std::vector<uint8_t> states;
  std::vector<double> viterbi;
  std::vector<uint8_t> back;
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

}  // namespace

struct Segmenter::Snapshot {
  std::shared_ptr<const PrefixDict> base;
  std::shared_ptr<const HmmModel> hmm;
  WordFreqMap overlay;  // added words and their new prefixes; overrides `base`
  WordSet force_split;  // words added with frequency 0
  // Every prefix of every added word, and a bitset of their first code points (BMP; other
  // planes always pass), so that a DAG walk only consults the overlay where it can match.
  WordSet overlay_prefixes;
  std::vector<uint64_t> overlay_first;
  int64_t total = 0;
  double log_total = 0;
  size_t added_words = 0;

  bool MayStartOverlayWord(char32_t c) const {
    if (overlay.empty()) return false;
    if (c >= 0x10000) return true;
    return (overlay_first[c >> 6] >> (c & 63)) & 1;
  }

  std::optional<int64_t> Lookup(std::string_view w) const {
    if (!overlay.empty()) {
      auto it = overlay.find(w);
      if (it != overlay.end()) return it->second;
    }
    PrefixDict::NodeId n = base->Find(w);
    if (n == PrefixDict::kNone) return std::nullopt;
    return base->Freq(n);
  }
};

namespace {

// One cut over one snapshot; all state lives in the thread's scratch.
class CutRun {
 public:
  CutRun(const Segmenter::Snapshot& s, std::string_view text, std::vector<WordSpan>* out)
      : s_(s), text_(text), out_(out), sc_(ThreadScratch()) {}

  void Run(bool hmm) {
    Decode();
    const char32_t* cps = sc_.cps.data();
    size_t n = sc_.cps.size();
    size_t i = 0;
    while (i < n) {
      if (IsHanClass(cps[i])) {
        size_t j = i + 1;
        while (j < n && IsHanClass(cps[j])) ++j;
        if (hmm) {
          CutBlockHmm(i, j);
        } else {
          CutBlockNoHmm(i, j);
        }
        i = j;
      } else if (cps[i] == '\r' && i + 1 < n && cps[i + 1] == '\n') {
        Emit(i, i + 2);
        i += 2;
      } else {
        Emit(i, i + 1);
        ++i;
      }
    }
  }

 private:
  void Decode() {
    SURGE_CHECK(text_.size() < std::numeric_limits<uint32_t>::max(),
                "Segmenter::Cut input of {} bytes exceeds 4 GiB", text_.size());
    sc_.cps.clear();
    sc_.offs.clear();
    sc_.cps.reserve(text_.size());
    sc_.offs.reserve(text_.size() + 1);
    const auto* p = reinterpret_cast<const unsigned char*>(text_.data());
    size_t size = text_.size();
    for (size_t pos = 0; pos < size;) {
      if (p[pos] < 0x80) {
        sc_.cps.push_back(p[pos]);
        sc_.offs.push_back(static_cast<uint32_t>(pos));
        ++pos;
        continue;
      }
      DecodedChar c = DecodeUtf8At(text_, pos);
      sc_.cps.push_back(c.cp);
      sc_.offs.push_back(static_cast<uint32_t>(pos));
      pos += c.length;
    }
    sc_.offs.push_back(static_cast<uint32_t>(size));
  }

  void Emit(size_t a, size_t b) { out_->push_back({sc_.offs[a], sc_.offs[b] - sc_.offs[a]}); }
  std::string_view Bytes(size_t a, size_t b) const {
    return text_.substr(sc_.offs[a], sc_.offs[b] - sc_.offs[a]);
  }

  // jieba's get_DAG + calc for cps[b..e): fills route_next (absolute end index, inclusive).
  void Route(size_t b, size_t e) {
    const PrefixDict& dict = *s_.base;
    const char32_t* cps = sc_.cps.data();
    size_t n = e - b;
    sc_.dag_start.resize(n + 1);
    sc_.dag_end.clear();
    sc_.dag_logf.clear();
    for (size_t k = b; k < e; ++k) {
      sc_.dag_start[k - b] = static_cast<uint32_t>(sc_.dag_end.size());
      size_t first = sc_.dag_end.size();
      PrefixDict::NodeId node = PrefixDict::kRoot;
      bool overlay = s_.MayStartOverlayWord(cps[k]);
      for (size_t i = k; i < e; ++i) {
        bool in = false;
        int64_t freq = 0;
        double logf = 0;
        if (node != PrefixDict::kNone) {
          node = dict.Child(node, cps[i]);
          if (node != PrefixDict::kNone) {
            in = true;
            logf = dict.LogFreq(node);
            freq = logf >= 0 ? 1 : 0;  // only "non-zero" matters here
          }
        }
        if (overlay) {
          std::string_view frag = Bytes(k, i + 1);
          auto it = s_.overlay.end();
          if (s_.overlay_prefixes.count(frag) == 0) {
            overlay = false;  // no added word starts with frag
          } else {
            it = s_.overlay.find(frag);
          }
          if (it != s_.overlay.end()) {
            in = true;
            freq = it->second;
            logf = std::log(static_cast<double>(freq > 0 ? freq : 1));
          }
        }
        if (!in) break;
        if (freq != 0) {
          sc_.dag_end.push_back(static_cast<uint32_t>(i));
          sc_.dag_logf.push_back(logf);
        }
      }
      if (sc_.dag_end.size() == first) {
        sc_.dag_end.push_back(static_cast<uint32_t>(k));
        sc_.dag_logf.push_back(0.0);  // log(FREQ.get(char) or 1)
      }
    }
    sc_.dag_start[n] = static_cast<uint32_t>(sc_.dag_end.size());

    sc_.route_val.resize(n + 1);
    sc_.route_next.resize(n + 1);
    sc_.route_val[n] = 0;
    const double log_total = s_.log_total;
    for (size_t idx = n; idx-- > 0;) {
      double best = -std::numeric_limits<double>::infinity();
      uint32_t best_x = 0;
      for (uint32_t d = sc_.dag_start[idx]; d < sc_.dag_start[idx + 1]; ++d) {
        uint32_t x = sc_.dag_end[d];
        double v = sc_.dag_logf[d] - log_total + sc_.route_val[x + 1 - b];
        // Python max over (value, x) tuples: ties go to the larger x (edges are ascending).
        if (v >= best) {
          best = v;
          best_x = x;
        }
      }
      sc_.route_val[idx] = best;
      sc_.route_next[idx] = best_x;
    }
  }

  void CutBlockNoHmm(size_t b, size_t e) {
    Route(b, e);
    const char32_t* cps = sc_.cps.data();
    size_t x = b;
    size_t buf = SIZE_MAX;
    while (x < e) {
      size_t y = sc_.route_next[x - b] + 1;
      if (y - x == 1 && IsAsciiAlnum(cps[x])) {
        if (buf == SIZE_MAX) buf = x;
      } else {
        if (buf != SIZE_MAX) {
          Emit(buf, x);
          buf = SIZE_MAX;
        }
        Emit(x, y);
      }
      x = y;
    }
    if (buf != SIZE_MAX) Emit(buf, e);
  }

  void CutBlockHmm(size_t b, size_t e) {
    Route(b, e);
    size_t x = b;
    size_t buf = SIZE_MAX;
    while (x < e) {
      size_t y = sc_.route_next[x - b] + 1;
      if (y - x == 1) {
        if (buf == SIZE_MAX) buf = x;
      } else {
        if (buf != SIZE_MAX) {
          FlushBuf(buf, x);
          buf = SIZE_MAX;
        }
        Emit(x, y);
      }
      x = y;
    }
    if (buf != SIZE_MAX) FlushBuf(buf, e);
  }

  void FlushBuf(size_t a, size_t z) {
    if (z - a == 1) {
      Emit(a, z);
      return;
    }
    std::optional<int64_t> f = s_.Lookup(Bytes(a, z));
    if (!f.has_value() || *f == 0) {
      FinalsegCut(a, z);
    } else {
      for (size_t i = a; i < z; ++i) Emit(i, i + 1);
    }
  }

  // jieba.finalseg.cut: Viterbi on runs of U+4E00..U+9FD5; other runs split by
  // re_skip = ([a-zA-Z0-9]+(?:\.\d+)?%?), keeping the text between matches as one word.
  void FinalsegCut(size_t a, size_t z) {
    const char32_t* cps = sc_.cps.data();
    size_t p = a;
    while (p < z) {
      if (IsHan(cps[p])) {
        size_t q = p + 1;
        while (q < z && IsHan(cps[q])) ++q;
        HmmCut(p, q);
        p = q;
        continue;
      }
      size_t q = p;
      while (q < z && !IsHan(cps[q])) ++q;
      size_t pending = p;
      size_t r = p;
      while (r < q) {
        if (!IsAsciiAlnum(cps[r])) {
          ++r;
          continue;
        }
        if (pending < r) Emit(pending, r);
        size_t m = r;
        while (m < q && IsAsciiAlnum(cps[m])) ++m;
        if (m + 1 < q && cps[m] == '.' && IsAsciiDigit(cps[m + 1])) {
          m += 2;
          while (m < q && IsAsciiDigit(cps[m])) ++m;
        }
        if (m < q && cps[m] == '%') ++m;
        Emit(r, m);
        r = m;
        pending = m;
      }
      if (pending < q) Emit(pending, q);
      p = q;
    }
  }

  void HmmCut(size_t a, size_t z) {
    size_t n = z - a;
    s_.hmm->Viterbi(sc_.cps.data() + a, n, &sc_.states, &sc_.viterbi, &sc_.back);
    size_t begin = 0, next = 0;
    for (size_t i = 0; i < n; ++i) {
      uint8_t st = sc_.states[i];
      if (st == HmmModel::kB) {
        begin = i;
      } else if (st == HmmModel::kE) {
        HmmWord(a + begin, a + i + 1);
        next = i + 1;
      } else if (st == HmmModel::kS) {
        HmmWord(a + i, a + i + 1);
        next = i + 1;
      }
    }
    if (next < n) HmmWord(a + next, z);
  }

  void HmmWord(size_t a, size_t b) {
    if (!s_.force_split.empty() && b - a > 1 && s_.force_split.count(Bytes(a, b)) != 0) {
      for (size_t i = a; i < b; ++i) Emit(i, i + 1);
    } else {
      Emit(a, b);
    }
  }

  const Segmenter::Snapshot& s_;
  std::string_view text_;
  std::vector<WordSpan>* out_;
  Scratch& sc_;
};

void CutWith(const Segmenter::Snapshot& s, std::string_view text, bool hmm,
             std::vector<WordSpan>* out) {
  CutRun(s, text, out).Run(hmm);
}

int64_t SuggestFreqIn(const Segmenter::Snapshot& s, std::string_view word) {
  const double ftotal = static_cast<double>(s.total);
  double freq = 1.0;
  std::vector<WordSpan> segs;
  CutWith(s, word, /*hmm=*/false, &segs);
  for (const WordSpan& w : segs) {
    int64_t f = s.Lookup(word.substr(w.offset, w.size)).value_or(1);
    freq *= static_cast<double>(f) / ftotal;
  }
  int64_t suggested = static_cast<int64_t>(freq * static_cast<double>(s.total)) + 1;
  return std::max(suggested, s.Lookup(word).value_or(1));
}

bool IsAsciiSpaceByte(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool AllOf(std::string_view s, char lo, char hi) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < lo || c > hi) return false;
  }
  return true;
}

}  // namespace

Segmenter::Segmenter() = default;
Segmenter::~Segmenter() = default;

Result<std::unique_ptr<Segmenter>> Segmenter::Create(const SegmenterOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  std::string dict_path =
      options.dict_path.empty() ? std::string(kDefaultJiebaDir) + "/dict.txt" : options.dict_path;
  std::string hmm_dir =
      options.hmm_dir.empty() ? std::string(kDefaultJiebaDir) + "/finalseg" : options.hmm_dir;
  SURGE_ASSIGN_OR_RETURN(PrefixDict dict, PrefixDict::Load(dict_path));
  auto hmm = HmmModel::Load(hmm_dir);
  if (!hmm.ok()) return hmm.status().WithContext("loading jieba HMM tables from " + hmm_dir);

  auto snap = std::make_shared<Snapshot>();
  snap->total = dict.total();
  snap->log_total = std::log(static_cast<double>(snap->total));
  snap->base = std::make_shared<const PrefixDict>(std::move(dict));
  snap->hmm = std::make_shared<const HmmModel>(std::move(hmm).value());
  std::unique_ptr<Segmenter> seg(new Segmenter());
  seg->snapshot_ = std::move(snap);
  for (const std::string& path : options.user_dict_paths) {
    SURGE_RETURN_IF_ERROR(seg->LoadUserDict(path));
  }
  seg->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  SURGE_LOG_DEBUG("segmenter: loaded {} ({} trie nodes) in {:.3f} s", dict_path,
                  seg->snapshot_->base->num_nodes(), seg->load_seconds_);
  return seg;
}

std::unique_ptr<Segmenter> Segmenter::Clone() const {
  std::unique_ptr<Segmenter> c(new Segmenter());
  c->snapshot_ = Current();  // snapshots are immutable; writers copy before changing
  c->load_seconds_ = load_seconds_;
  return c;
}

std::shared_ptr<const Segmenter::Snapshot> Segmenter::Current() const {
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  return snapshot_;
}

void Segmenter::Publish(std::shared_ptr<const Snapshot> s) {
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  snapshot_ = std::move(s);
}

void Segmenter::Cut(std::string_view text, std::vector<WordSpan>* out, bool hmm) const {
  std::shared_ptr<const Snapshot> s = Current();
  CutWith(*s, text, hmm, out);
}

std::vector<std::string> Segmenter::LCut(std::string_view text, bool hmm) const {
  std::vector<WordSpan> spans;
  Cut(text, &spans, hmm);
  std::vector<std::string> words;
  words.reserve(spans.size());
  for (const WordSpan& w : spans) {
    if (w.size == 1 && static_cast<unsigned char>(text[w.offset]) >= 0x80) {
      words.emplace_back("\xEF\xBF\xBD");
    } else {
      words.emplace_back(text.substr(w.offset, w.size));
    }
  }
  return words;
}

Status Segmenter::AddWordTo(Snapshot* s, std::string_view word, std::optional<int64_t> freq) const {
  if (word.empty()) return InvalidArgumentError("AddWord: the word is empty");
  if (!IsValidUtf8(word)) return InvalidArgumentError("AddWord: the word is not valid UTF-8");
  if (freq.has_value() && *freq < 0) {
    return InvalidArgumentError("AddWord: frequency {} of '{}' is negative (must be >= 0)", *freq,
                                word);
  }
  int64_t f = freq.has_value() ? *freq : SuggestFreqIn(*s, word);
  if (f > std::numeric_limits<int64_t>::max() - s->total) {
    return OutOfRangeError("AddWord: frequency {} of '{}' overflows the total", f, word);
  }
  bool existed = s->Lookup(word).value_or(0) != 0;
  s->overlay[std::string(word)] = f;
  s->total += f;
  s->log_total = std::log(static_cast<double>(s->total));
  if (s->overlay_first.empty()) s->overlay_first.assign(0x10000 / 64, 0);
  char32_t first = DecodeUtf8At(word, 0).cp;
  if (first < 0x10000) s->overlay_first[first >> 6] |= uint64_t{1} << (first & 63);
  for (size_t p = 0; p < word.size();) {
    p += DecodeUtf8At(word, p).length;
    std::string_view prefix = word.substr(0, p);
    s->overlay_prefixes.emplace(prefix);
    if (!s->Lookup(prefix).has_value()) s->overlay.emplace(std::string(prefix), 0);
  }
  if (f == 0) s->force_split.emplace(word);
  if (!existed && f != 0) ++s->added_words;
  return Status::Ok();
}

Status Segmenter::AddWord(std::string_view word, std::optional<int64_t> freq) {
  return AddWords({NewWord{std::string(word), freq}});
}

Status Segmenter::AddWords(const std::vector<NewWord>& words) {
  std::lock_guard<std::mutex> lock(writer_mu_);
  auto next = std::make_shared<Snapshot>(*Current());
  for (const NewWord& w : words) SURGE_RETURN_IF_ERROR(AddWordTo(next.get(), w.word, w.freq));
  Publish(std::move(next));
  return Status::Ok();
}

Status Segmenter::LoadUserDict(const std::string& path) {
  auto contents = ReadFileToString(path);
  if (!contents.ok()) return contents.status().WithContext("loading user dictionary");
  return LoadUserDictText(*contents, path);
}

Status Segmenter::LoadUserDictText(std::string_view contents, std::string_view source_name) {
  std::vector<NewWord> words;
  size_t pos = 0, line_no = 0;
  while (pos < contents.size()) {
    size_t nl = contents.find('\n', pos);
    if (nl == std::string_view::npos) nl = contents.size();
    std::string_view line = contents.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    while (!line.empty() && IsAsciiSpaceByte(line.front())) line.remove_prefix(1);
    while (!line.empty() && IsAsciiSpaceByte(line.back())) line.remove_suffix(1);
    if (!IsValidUtf8(line)) {
      return InvalidArgumentError("user dictionary {} must be UTF-8 (line {} is not)", source_name,
                                  line_no);
    }
    while (line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);
    if (line.empty()) continue;
    // ^(.+?)( [0-9]+)?( [a-z]+)?$ : the shortest word whose remainder matches.
    std::string_view word = line;
    std::optional<std::string_view> freq_text;
    size_t sp = line.rfind(' ');
    if (sp != std::string_view::npos && sp > 0) {
      std::string_view tail = line.substr(sp + 1);
      if (AllOf(tail, 'a', 'z')) {
        word = line.substr(0, sp);
        size_t sp2 = word.rfind(' ');
        if (sp2 != std::string_view::npos && sp2 > 0 && AllOf(word.substr(sp2 + 1), '0', '9')) {
          freq_text = word.substr(sp2 + 1);
          word = word.substr(0, sp2);
        }
      } else if (AllOf(tail, '0', '9')) {
        freq_text = tail;
        word = line.substr(0, sp);
      }
    }
    std::optional<int64_t> freq;
    if (freq_text.has_value()) {
      if (freq_text->size() > 18) {
        return InvalidArgumentError("user dictionary {} line {}: frequency {} is too large",
                                    source_name, line_no, *freq_text);
      }
      int64_t v = 0;
      for (char c : *freq_text) v = v * 10 + (c - '0');
      freq = v;
    }
    words.push_back({std::string(word), freq});
  }
  Status st = AddWords(words);
  if (!st.ok()) return st.WithContext(fmt::format("user dictionary {}", source_name));
  return Status::Ok();
}

int64_t Segmenter::SuggestFreq(std::string_view word) const {
  if (word.empty() || !IsValidUtf8(word)) return 1;
  return SuggestFreqIn(*Current(), word);
}

std::optional<int64_t> Segmenter::Lookup(std::string_view word) const {
  return Current()->Lookup(word);
}

int64_t Segmenter::total() const { return Current()->total; }

Segmenter::Stats Segmenter::stats() const {
  auto s = Current();
  Stats st;
  st.dict_nodes = s->base->num_nodes();
  st.dict_bytes = s->base->memory_bytes();
  st.added_words = s->added_words;
  st.load_seconds = load_seconds_;
  return st;
}

}  // namespace surge::text
