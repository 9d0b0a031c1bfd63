// jieba's character HMM (finalseg): four states B(egin) E(nd) M(iddle) S(ingle), log start,
// transition and emission probabilities, and the Viterbi decoder that labels a run of Han
// characters. The tables are read from jieba's own prob_start.py / prob_trans.py / prob_emit.py
// (Python dict literals) at load time, so no converted copy of jieba's data is kept.
//
// Decoding reproduces jieba 0.42.1 bit for bit: the same summation order, -3.14e100 for missing
// entries, and the same tie-breaking (on equal scores the alphabetically larger state wins,
// as Python's max() over (score, state) tuples does).
//
// Thread safety: immutable after Load(); Viterbi() is safe to call concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace surge::text {

class HmmModel {
 public:
  // State indices, in alphabetical order so that index comparison is jieba's tie-break.
  enum State : uint8_t { kB = 0, kE = 1, kM = 2, kS = 3 };
  static constexpr double kMinFloat = -3.14e100;

  // Loads prob_start.py, prob_trans.py and prob_emit.py from `dir` (jieba's finalseg folder).
  static Result<HmmModel> Load(const std::string& dir);
  // Builds from the three files' contents (for tests and embedded data).
  static Result<HmmModel> FromSources(std::string_view start_py, std::string_view trans_py,
                                      std::string_view emit_py);

  // Labels cps[0..n) with states; `states` gets n entries. `scratch` is reused between calls.
  void Viterbi(const char32_t* cps, size_t n, std::vector<uint8_t>* states,
               std::vector<double>* scratch, std::vector<uint8_t>* back) const;

  size_t num_emit_chars() const { return emit_.size() / 4; }

 private:
  const double* EmitRow(char32_t cp) const {
    if (cp < emit_index_.size()) {
      uint32_t row = emit_index_[cp];
      if (row != 0) return &emit_[(row - 1) * 4];
    }
    return kMissingRow;
  }
  static const double kMissingRow[4];

  double start_[4] = {kMinFloat, kMinFloat, kMinFloat, kMinFloat};
  double trans_[4][4];
  std::vector<uint32_t> emit_index_;  // code point -> row + 1 (0 = no entry)
  std::vector<double> emit_;          // rows of 4 log probabilities
};

}  // namespace surge::text
