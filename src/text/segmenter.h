// Chinese word segmentation that gives exactly the words of jieba 0.42.1's
// `jieba.lcut(text, HMM=True)` (and `HMM=False`), reimplemented for speed.
//
// Algorithm (as jieba): the text is split into blocks of "Han-class" characters
// (U+4E00..U+9FD5, ASCII letters and digits, and + # & . _ % -); every other character becomes a
// one-character word, except "\r\n", which stays one word. Each block is cut by building the DAG
// of dictionary words (prefix dictionary, frequencies), choosing the route of maximum
// sum of log(freq/total) from right to left, and - with HMM on - feeding runs of consecutive
// single characters that are not themselves a dictionary word to the BMES character HMM (Viterbi).
//
// Invalid UTF-8: every invalid or truncated byte sequence is taken one byte at a time (see
// text/utf8.h); each such byte is a one-character word of its own, U+FFFD. Cut() reports it as a
// one-byte span over the original byte; LCut() returns it as "\xEF\xBF\xBD" (U+FFFD). Valid text
// around it is cut exactly as if the byte were U+FFFD.
//
// Run-time words: AddWord()/LoadUserDict() follow jieba's add_word/load_userdict, including the
// frequency that jieba's suggest_freq() picks when none is given and the total count update.
// Readers never block on writers: every Cut() works on an immutable snapshot (the shared base
// dictionary plus a small copy-on-write overlay of added words), and a writer publishes a new
// snapshot atomically. A Cut() that started before an AddWord() may still use the old snapshot.
//
// Thread safety: all const methods may run concurrently with each other and with AddWord(),
// AddWords() and LoadUserDict(). Writers are serialised internally.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace surge::text {

inline constexpr std::string_view kDefaultJiebaDir = "/usr/lib/python3/dist-packages/jieba";

struct SegmenterOptions {
  // jieba's main dictionary ("word freq tag" lines). Empty = <kDefaultJiebaDir>/dict.txt.
  std::string dict_path;
  // Folder with prob_start.py, prob_trans.py, prob_emit.py. Empty = <kDefaultJiebaDir>/finalseg.
  std::string hmm_dir;
  // User dictionaries loaded after the main one, in order (jieba's load_userdict format).
  std::vector<std::string> user_dict_paths;
};

// A word as a byte span of the input passed to Cut().
struct WordSpan {
  uint32_t offset;
  uint32_t size;
};

// A word to add at run time; no frequency means "what jieba's suggest_freq(word) gives".
struct NewWord {
  std::string word;
  std::optional<int64_t> freq;
};

class Segmenter {
 public:
  // Loads the dictionary and the HMM tables. Errors name the missing or corrupt file.
  static Result<std::unique_ptr<Segmenter>> Create(const SegmenterOptions& options = {});
  ~Segmenter();

  // A segmenter that starts from this one's current dictionary and words, then changes
  // independently. Cheap: the base dictionary and HMM tables are shared, not copied.
  std::unique_ptr<Segmenter> Clone() const;

  // Appends the words of `text` to `out` as byte spans (in order, covering every byte exactly
  // once). `text` must be shorter than 4 GiB. Allocation-free in steady state (per-thread scratch).
  void Cut(std::string_view text, std::vector<WordSpan>* out, bool hmm = true) const;
  // Convenience: the words as strings (like jieba.lcut).
  std::vector<std::string> LCut(std::string_view text, bool hmm = true) const;

  // jieba's add_word(word, freq): sets FREQ[word] = freq (suggested when absent), adds freq to
  // the total, adds missing prefixes with frequency 0; freq 0 also forces the HMM to split the
  // word. The word must be non-empty valid UTF-8 and the frequency non-negative.
  Status AddWord(std::string_view word, std::optional<int64_t> freq = std::nullopt);
  // Adds several words, in order, publishing one snapshot (cheaper than repeated AddWord).
  Status AddWords(const std::vector<NewWord>& words);
  // jieba's load_userdict: lines "word [freq] [tag]" (regex ^(.+?)( [0-9]+)?( [a-z]+)?$),
  // UTF-8, an optional BOM, blank lines skipped. All-or-nothing: on error nothing is added.
  Status LoadUserDict(const std::string& path);
  Status LoadUserDictText(std::string_view contents, std::string_view source_name);

  // jieba's suggest_freq(word, tune=False) against the current snapshot.
  int64_t SuggestFreq(std::string_view word) const;
  // FREQ.get(word): the frequency, 0 for pure prefixes, nullopt when absent.
  std::optional<int64_t> Lookup(std::string_view word) const;
  // Sum of all frequencies (jieba's `total`).
  int64_t total() const;

  struct Stats {
    size_t dict_nodes = 0;
    size_t dict_bytes = 0;
    size_t added_words = 0;
    double load_seconds = 0;
  };
  Stats stats() const;

  struct Snapshot;

 private:
  Segmenter();
  std::shared_ptr<const Snapshot> Current() const;
  void Publish(std::shared_ptr<const Snapshot> s);
  Status AddWordTo(Snapshot* s, std::string_view word, std::optional<int64_t> freq) const;

  mutable std::mutex snapshot_mu_;  // guards snapshot_ (the pointer, not the data)
  std::shared_ptr<const Snapshot> snapshot_;
  std::mutex writer_mu_;  // serialises writers
  double load_seconds_ = 0;
};

}  // namespace surge::text
