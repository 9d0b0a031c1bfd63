// libFuzzer target for the BERT tokenizer: normalisation and WordPiece on arbitrary bytes (invalid
// UTF-8 included), pairs with truncation, the tokenizer.json parser, and LinMaxMatch against the
// reference greedy WordPiece. Invariants: no crash, offsets inside the text and ordered, identical
// output of the two WordPiece algorithms.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/bert_tokenizer.h"
#include "text/utf8.h"
#include "text/wordpiece.h"

namespace {

using surge::text::BertOptions;
using surge::text::BertTokenizer;

// A vocabulary small enough that many words need several pieces or fail: every string over
// {a, b, c} up to length 3, "##" forms of some of them, a few CJK and accented tokens.
std::vector<std::string> Vocab() {
  std::vector<std::string> v = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "中",
                                "文",    "é",     "##é",   "e",     "##e",    "i",
                                "##i",   "!",     ",",     "ab",    "##ab",   "x"};
  const char letters[] = {'a', 'b', 'c'};
  std::vector<std::string> words = {""};
  for (int len = 1; len <= 3; ++len) {
    std::vector<std::string> next;
    for (const auto& w : words) {
      for (char c : letters) next.push_back(w + c);
    }
    for (size_t i = 0; i < next.size(); ++i) {
      if (i % 3 != 1) v.push_back(next[i]);
      if (i % 2 == 0) v.push_back("##" + next[i]);
    }
    words = next;
  }
  return v;
}

const BertTokenizer& Tokenizer(int variant) {
  static std::unique_ptr<BertTokenizer> toks[16];
  if (!toks[variant]) {
    BertOptions o;
    o.lowercase = variant & 1;
    o.strip_accents = (variant & 2) != 0;
    o.clean_text = (variant & 4) != 0;
    o.handle_chinese_chars = (variant & 8) != 0;
    o.max_input_chars_per_word = 12;
    toks[variant] = std::move(BertTokenizer::FromVocab(Vocab(), o)).value();
  }
  return *toks[variant];
}

void CheckOffsets(const surge::text::Encoding& e, std::string_view a, std::string_view b) {
  for (size_t i = 0; i < e.size(); ++i) {
    std::string_view text = e.type_ids[i] == 1 ? b : a;
    if (e.offsets[i].first > e.offsets[i].second || e.offsets[i].second > text.size() ||
        e.char_offsets[i].first > e.char_offsets[i].second ||
        e.char_offsets[i].second > text.size()) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);

  if (control == 0xFF) {  // the tokenizer.json parser on raw bytes
    auto tok = BertTokenizer::FromTokenizerJsonString(input, "fuzz");
    if (tok.ok()) (void)(*tok)->Encode("abc 中文 é!");
    return 0;
  }

  const BertTokenizer& tok = Tokenizer(control & 15);
  surge::text::Encoding enc;
  surge::text::EncodeOptions options;
  options.max_length = (control & 0x40) ? 3 + (control >> 4) % 4 : 0;
  if (control & 0x20) {
    size_t split = input.find('\x01');
    std::string_view a = input.substr(0, split);
    std::string_view b = split == std::string_view::npos ? "" : input.substr(split + 1);
    if (!tok.EncodeTo(a, &b, options, &enc).ok()) std::abort();
    CheckOffsets(enc, a, b);
  } else {
    if (!tok.EncodeTo(input, nullptr, options, &enc).ok()) std::abort();
    CheckOffsets(enc, input, "");
  }

  // LinMaxMatch vs greedy on the raw input as one word (valid UTF-8 only, as WordPiece expects).
  if (!input.empty() && surge::text::IsValidUtf8(input)) {
    size_t chars = 0;
    for (unsigned char c : input) chars += (c & 0xC0) != 0x80;
    std::vector<surge::text::WordPiecePiece> fast, greedy;
    tok.wordpiece().Tokenize(input, chars, &fast);
    tok.wordpiece().TokenizeGreedy(input, chars, &greedy);
    if (fast.size() != greedy.size()) std::abort();
    for (size_t i = 0; i < fast.size(); ++i) {
      if (fast[i].id != greedy[i].id || fast[i].begin != greedy[i].begin ||
          fast[i].end != greedy[i].end) {
        std::abort();
      }
    }
  }
  return 0;
}
