#include "text/hmm_model.h"

#include <charconv>
#include <functional>

#include "core/mmap_file.h"
#include "text/utf8.h"

namespace surge::text {

const double HmmModel::kMissingRow[4] = {kMinFloat, kMinFloat, kMinFloat, kMinFloat};

namespace {

// Reads the subset of Python literal syntax jieba's tables use: nested dicts whose keys are
// one-character strings (plain or \u escaped) and whose leaves are floats.
class PyDictReader {
 public:
  using Leaf = std::function<Status(const std::vector<char32_t>& keys, double value)>;

  PyDictReader(std::string_view src, std::string_view name) : s_(src), name_(name) {}

  Status Run(const Leaf& leaf) {
    size_t p = s_.find("P=");
    if (p == std::string_view::npos) p = s_.find("P =");
    if (p == std::string_view::npos) return Error("no 'P = {' assignment");
    pos_ = s_.find('{', p);
    if (pos_ == std::string_view::npos) return Error("no '{' after 'P ='");
    std::vector<char32_t> keys;
    return ParseDict(&keys, leaf);
  }

 private:
  Status Error(std::string_view what) const {
    return DataLossError("cannot parse HMM table {} at byte {}: {}", name_, pos_, what);
  }
  void SkipWs() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool Eat(char c) {
    SkipWs();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  Status ParseKey(char32_t* out) {
    SkipWs();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return Error("expected a key");
    char quote = s_[pos_++];
    std::u32string key;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\') {
        if (pos_ + 1 >= s_.size()) return Error("truncated escape");
        char e = s_[pos_ + 1];
        int digits = e == 'u' ? 4 : e == 'U' ? 8 : e == 'x' ? 2 : 0;
        if (digits == 0) {
          key.push_back(static_cast<unsigned char>(e));
          pos_ += 2;
          continue;
        }
        if (pos_ + 2 + digits > s_.size()) return Error("truncated escape");
        uint32_t v = 0;
        auto r = std::from_chars(s_.data() + pos_ + 2, s_.data() + pos_ + 2 + digits, v, 16);
        if (r.ec != std::errc() || r.ptr != s_.data() + pos_ + 2 + digits) {
          return Error("bad escape");
        }
        key.push_back(v);
        pos_ += 2 + digits;
      } else {
        DecodedChar c = DecodeUtf8At(s_, pos_);
        if (!c.valid) return Error("invalid UTF-8");
        key.push_back(c.cp);
        pos_ += c.length;
      }
    }
    if (pos_ >= s_.size()) return Error("unterminated string");
    ++pos_;
    if (key.size() != 1) return Error("key is not one character");
    *out = key[0];
    return Status::Ok();
  }
  Status ParseDict(std::vector<char32_t>* keys, const Leaf& leaf) {
    if (!Eat('{')) return Error("expected '{'");
    if (Eat('}')) return Status::Ok();
    if (keys->size() > 4) return Error("nesting too deep");
    while (true) {
      char32_t k = 0;
      SURGE_RETURN_IF_ERROR(ParseKey(&k));
      if (!Eat(':')) return Error("expected ':'");
      keys->push_back(k);
      SkipWs();
      if (pos_ < s_.size() && s_[pos_] == '{') {
        SURGE_RETURN_IF_ERROR(ParseDict(keys, leaf));
      } else {
        double v = 0;
        auto r = std::from_chars(s_.data() + pos_, s_.data() + s_.size(), v);
        if (r.ec != std::errc()) return Error("expected a number");
        pos_ = static_cast<size_t>(r.ptr - s_.data());
        SURGE_RETURN_IF_ERROR(leaf(*keys, v));
      }
      keys->pop_back();
      if (Eat(',')) {
        if (Eat('}')) return Status::Ok();
        continue;
      }
      if (Eat('}')) return Status::Ok();
      return Error("expected ',' or '}'");
    }
  }

  std::string_view s_;
  std::string_view name_;
  size_t pos_ = 0;
};

int StateIndex(char32_t c) {
  switch (c) {
    case 'B':
      return HmmModel::kB;
    case 'E':
      return HmmModel::kE;
    case 'M':
      return HmmModel::kM;
    case 'S':
      return HmmModel::kS;
    default:
      return -1;
  }
}

}  // namespace

Result<HmmModel> HmmModel::FromSources(std::string_view start_py, std::string_view trans_py,
                                       std::string_view emit_py) {
  HmmModel m;
  for (auto& row : m.trans_) {
    for (double& v : row) v = kMinFloat;
  }
  auto bad_state = [](std::string_view table) {
    return DataLossError("HMM table {} has a key that is not one of B, E, M, S", table);
  };
  bool any = false;
  SURGE_RETURN_IF_ERROR(PyDictReader(start_py, "prob_start.py")
                            .Run([&](const std::vector<char32_t>& k, double v) -> Status {
                              int s = k.size() == 1 ? StateIndex(k[0]) : -1;
                              if (s < 0) return bad_state("prob_start.py");
                              m.start_[s] = v;
                              any = true;
                              return Status::Ok();
                            }));
  SURGE_RETURN_IF_ERROR(PyDictReader(trans_py, "prob_trans.py")
                            .Run([&](const std::vector<char32_t>& k, double v) -> Status {
                              int a = k.size() == 2 ? StateIndex(k[0]) : -1;
                              int b = k.size() == 2 ? StateIndex(k[1]) : -1;
                              if (a < 0 || b < 0) return bad_state("prob_trans.py");
                              m.trans_[a][b] = v;
                              return Status::Ok();
                            }));
  SURGE_RETURN_IF_ERROR(PyDictReader(emit_py, "prob_emit.py")
                            .Run([&](const std::vector<char32_t>& k, double v) -> Status {
                              int s = k.size() == 2 ? StateIndex(k[0]) : -1;
                              if (s < 0 || k[1] > 0x10FFFF) return bad_state("prob_emit.py");
                              char32_t cp = k[1];
                              if (cp >= m.emit_index_.size()) {
                                m.emit_index_.resize(std::max<size_t>(cp + 1, 0x10000), 0);
                              }
                              uint32_t& row = m.emit_index_[cp];
                              if (row == 0) {
                                m.emit_.insert(m.emit_.end(), kMissingRow, kMissingRow + 4);
                                row = static_cast<uint32_t>(m.emit_.size() / 4);
                              }
                              m.emit_[(row - 1) * 4 + s] = v;
                              return Status::Ok();
                            }));
  if (!any || m.emit_.empty()) {
    return DataLossError("HMM tables are empty (prob_start.py or prob_emit.py has no entries)");
  }
  return m;
}

Result<HmmModel> HmmModel::Load(const std::string& dir) {
  SURGE_ASSIGN_OR_RETURN(std::string start, ReadFileToString(dir + "/prob_start.py"));
  SURGE_ASSIGN_OR_RETURN(std::string trans, ReadFileToString(dir + "/prob_trans.py"));
  SURGE_ASSIGN_OR_RETURN(std::string emit, ReadFileToString(dir + "/prob_emit.py"));
  return FromSources(start, trans, emit);
}

void HmmModel::Viterbi(const char32_t* cps, size_t n, std::vector<uint8_t>* states,
                       std::vector<double>* scratch, std::vector<uint8_t>* back) const {
  // Predecessors of each state, as in jieba's PrevStatus.
  static constexpr uint8_t kPrev[4][2] = {{kE, kS}, {kB, kM}, {kM, kB}, {kS, kE}};
  states->resize(n);
  if (n == 0) return;
  scratch->resize(n * 4);
  back->resize(n * 4);
  double* v = scratch->data();
  uint8_t* bp = back->data();
  const double* em = EmitRow(cps[0]);
  for (int y = 0; y < 4; ++y) v[y] = start_[y] + em[y];
  for (size_t t = 1; t < n; ++t) {
    em = EmitRow(cps[t]);
    const double* pv = v + (t - 1) * 4;
    double* cv = v + t * 4;
    for (int y = 0; y < 4; ++y) {
      uint8_t a = kPrev[y][0], b = kPrev[y][1];
      double pa = pv[a] + trans_[a][y] + em[y];
      double pb = pv[b] + trans_[b][y] + em[y];
      // Python max over (prob, state): larger prob, then larger state letter.
      bool take_a = pa > pb || (pa == pb && a > b);
      cv[y] = take_a ? pa : pb;
      bp[t * 4 + y] = take_a ? a : b;
    }
  }
  const double* last = v + (n - 1) * 4;
  uint8_t state = (last[kS] >= last[kE]) ? kS : kE;
  for (size_t t = n; t-- > 0;) {
    (*states)[t] = state;
    if (t > 0) state = bp[t * 4 + state];
  }
}

}  // namespace surge::text
