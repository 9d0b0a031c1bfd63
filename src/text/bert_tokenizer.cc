#include "text/bert_tokenizer.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/logging.h"
#include "text/unicode.h"
#include "text/utf8.h"

namespace surge::text {
namespace {

enum AsciiAction : uint8_t { kWordChar = 0, kBreak = 1, kPunctChar = 2, kDrop = 3 };

bool IsAsciiPunct(unsigned char c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
         (c >= 123 && c <= 126);
}

Result<std::string> ReadFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open {} '{}'", what, path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return DataLossError("cannot read {} '{}'", what, path);
  return ss.str();
}

// Drops trailing whitespace (Unicode White_Space), as HF does for vocab.txt lines.
void TrimEnd(std::string* s) {
  while (!s->empty()) {
    size_t start = s->size() - 1;
    while (start > 0 && (static_cast<unsigned char>((*s)[start]) & 0xC0) == 0x80) --start;
    DecodedChar d = DecodeUtf8At(*s, start);
    if (!d.valid || start + d.length != s->size() || !(unicode::Flags(d.cp) & unicode::kWhitespace))
      return;
    s->resize(start);
  }
}

}  // namespace

// Per-thread buffers reused across calls so that the steady state does not allocate.
struct BertTokenizer::Scratch {
  struct Source {
    uint32_t byte_begin;
    uint32_t byte_end;
    uint32_t char_index;
  };
  std::string word;            // the current normalised word (UTF-8)
  std::vector<Source> source;  // for each byte of `word`, the original character it came from
  size_t word_chars = 0;
  std::vector<WordPiecePiece> pieces;
  Encoding first;
  Encoding second;

  static Scratch& Get() {
    thread_local Scratch scratch;
    return scratch;
  }
};

// Tokenizes one sequence: normalisation, pre-tokenisation and WordPiece in a single pass.
class BertTokenizer::Run {
 public:
  Run(const BertTokenizer& tok, Scratch& s, int32_t type_id, Encoding* out)
      : tok_(tok), s_(s), type_id_(type_id), out_(out) {
    s_.word.clear();
    s_.source.clear();
    s_.word_chars = 0;
  }

  void Process(std::string_view text) {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    const bool has_added = !tok_.added_.empty();
    uint32_t char_index = 0;
    size_t pos = 0;
    while (pos < n) {
      unsigned char c = p[pos];
      if (has_added && tok_.added_first_[c] && MatchAdded(text, &pos, &char_index)) continue;
      if (c < 0x80) {
        switch (tok_.ascii_action_[c]) {
          case kWordChar:
            s_.word.push_back(tok_.ascii_map_[c]);
            s_.source.push_back(
                {static_cast<uint32_t>(pos), static_cast<uint32_t>(pos + 1), char_index});
            ++s_.word_chars;
            break;
          case kBreak:
            Flush();
            break;
          case kPunctChar:
            Flush();
            s_.word.push_back(static_cast<char>(c));
            s_.source.push_back(
                {static_cast<uint32_t>(pos), static_cast<uint32_t>(pos + 1), char_index});
            s_.word_chars = 1;
            Flush();
            break;
          default:
            break;
        }
        ++pos;
        ++char_index;
        continue;
      }
      DecodedChar d = DecodeUtf8At(text, pos);
      Scratch::Source src{static_cast<uint32_t>(pos), static_cast<uint32_t>(pos + d.length),
                          char_index};
      pos += d.length;
      ++char_index;
      NonAscii(d.cp, src);
    }
    Flush();
  }

 private:
  bool MatchAdded(std::string_view text, size_t* pos, uint32_t* char_index) {
    std::string_view rest = text.substr(*pos);
    for (const auto& [str, id] : tok_.added_) {
      if (!rest.starts_with(str)) continue;
      Flush();
      uint32_t chars = 0;
      for (unsigned char c : str) chars += (c & 0xC0) != 0x80;
      out_->Push(id, type_id_, false,
                 {static_cast<uint32_t>(*pos), static_cast<uint32_t>(*pos + str.size())},
                 {*char_index, *char_index + chars});
      *pos += str.size();
      *char_index += chars;
      return true;
    }
    return false;
  }

  void NonAscii(char32_t cp, const Scratch::Source& src) {
    const BertOptions& o = tok_.options_;
    uint8_t f = unicode::Flags(cp);
    if (o.clean_text && (f & unicode::kRemove)) return;
    if (f & unicode::kWhitespace) {
      Flush();
      return;
    }
    if (o.handle_chinese_chars && unicode::IsBertChineseChar(cp)) {
      Flush();
      Normalized(cp, f, src);
      Flush();
      return;
    }
    Normalized(cp, f, src);
  }

  // Steps 3-5 for one original code point.
  void Normalized(char32_t cp, uint8_t f, const Scratch::Source& src) {
    char32_t decomposed[unicode::kMaxDecomposition];
    int n = 1;
    decomposed[0] = cp;
    if (tok_.strip_accents_ && (f & unicode::kHasNfd)) n = unicode::Decompose(cp, decomposed);
    for (int i = 0; i < n; ++i) {
      char32_t x = decomposed[i];
      uint8_t fx = (n == 1) ? f : unicode::Flags(x);
      if (tok_.strip_accents_ && (fx & unicode::kMn)) continue;
      if (tok_.options_.lowercase && (fx & unicode::kHasLower)) {
        char32_t lower[unicode::kMaxLowercase];
        int m = unicode::ToLower(x, lower);
        for (int j = 0; j < m; ++j) Emit(lower[j], unicode::Flags(lower[j]), src);
      } else {
        Emit(x, fx, src);
      }
    }
  }

  // Step 5 for one normalised code point.
  void Emit(char32_t cp, uint8_t f, const Scratch::Source& src) {
    if (f & unicode::kWhitespace) {
      Flush();
      return;
    }
    bool punct =
        (f & unicode::kPunct) || (cp < 0x80 && IsAsciiPunct(static_cast<unsigned char>(cp)));
    if (punct) Flush();
    AppendUtf8(cp, &s_.word);
    s_.source.resize(s_.word.size(), src);
    ++s_.word_chars;
    if (punct) Flush();
  }

  void Flush() {
    if (s_.word.empty()) return;
    s_.pieces.clear();
    tok_.wordpiece_->Tokenize(s_.word, s_.word_chars, &s_.pieces);
    for (const WordPiecePiece& piece : s_.pieces) {
      const Scratch::Source& first = s_.source[piece.begin];
      const Scratch::Source& last = s_.source[piece.end - 1];
      out_->Push(piece.id, type_id_, false, {first.byte_begin, last.byte_end},
                 {first.char_index, last.char_index + 1});
    }
    s_.word.clear();
    s_.source.clear();
    s_.word_chars = 0;
  }

  const BertTokenizer& tok_;
  Scratch& s_;
  int32_t type_id_;
  Encoding* out_;
};

Result<std::unique_ptr<BertTokenizer>> BertTokenizer::FromVocab(std::vector<std::string> vocab,
                                                                BertOptions options) {
  WordPieceOptions wp_options;
  wp_options.unk_token = options.unk_token;
  wp_options.continuing_prefix = options.continuing_prefix;
  wp_options.max_input_chars_per_word = options.max_input_chars_per_word;
  SURGE_ASSIGN_OR_RETURN(auto wordpiece, WordPiece::Create(std::move(vocab), wp_options));
  std::unique_ptr<BertTokenizer> tok(new BertTokenizer());
  tok->wordpiece_ = std::move(wordpiece);
  tok->options_ = std::move(options);
  const BertOptions& o = tok->options_;
  tok->strip_accents_ = o.strip_accents.value_or(o.lowercase);
  tok->cls_id_ = tok->wordpiece_->TokenToId(o.cls_token);
  tok->sep_id_ = tok->wordpiece_->TokenToId(o.sep_token);
  if (tok->cls_id_ < 0 || tok->sep_id_ < 0) {
    return InvalidArgumentError("BERT vocabulary lacks '{}' or '{}' (both are required)",
                                o.cls_token, o.sep_token);
  }
  int32_t pad = tok->wordpiece_->TokenToId(o.pad_token);
  tok->pad_id_ = pad < 0 ? 0 : pad;

  std::vector<std::string> added;
  if (o.added_tokens) {
    added = *o.added_tokens;
  } else {
    for (const std::string* s :
         {&o.pad_token, &o.unk_token, &o.cls_token, &o.sep_token, &o.mask_token}) {
      if (tok->wordpiece_->TokenToId(*s) >= 0) added.push_back(*s);
    }
  }
  for (const std::string& s : added) {
    int32_t id = tok->wordpiece_->TokenToId(s);
    if (s.empty() || id < 0) {
      return InvalidArgumentError("added token '{}' is not in the vocabulary", s);
    }
    tok->added_.emplace_back(s, id);
    tok->added_first_[static_cast<unsigned char>(s[0])] = true;
  }
  std::stable_sort(tok->added_.begin(), tok->added_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });

  for (int c = 0; c < 128; ++c) {
    uint8_t action = kWordChar;
    bool whitespace = (c >= 9 && c <= 13) || c == ' ';
    bool control = c < 32 || c == 127;
    if (o.clean_text && (c == '\t' || c == '\n' || c == '\r')) {
      action = kBreak;
    } else if (o.clean_text && control) {
      action = kDrop;
    } else if (whitespace) {
      action = kBreak;
    } else if (IsAsciiPunct(static_cast<unsigned char>(c))) {
      action = kPunctChar;
    }
    tok->ascii_action_[c] = action;
    tok->ascii_map_[c] = static_cast<char>((o.lowercase && c >= 'A' && c <= 'Z') ? c + 32 : c);
  }
  return tok;
}

Result<std::unique_ptr<BertTokenizer>> BertTokenizer::FromVocabFile(const std::string& path,
                                                                    BertOptions options) {
  SURGE_ASSIGN_OR_RETURN(std::string text, ReadFile(path, "vocabulary"));
  std::vector<std::string> vocab;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(start, nl - start);
    TrimEnd(&line);
    vocab.push_back(std::move(line));
    start = nl + 1;
  }
  auto tok = FromVocab(std::move(vocab), std::move(options));
  if (!tok.ok()) return tok.status().WithContext(fmt::format("vocabulary '{}'", path));
  return tok;
}

Result<std::unique_ptr<BertTokenizer>> BertTokenizer::FromTokenizerJson(const std::string& path) {
  SURGE_ASSIGN_OR_RETURN(std::string text, ReadFile(path, "tokenizer.json"));
  return FromTokenizerJsonString(text, path);
}

Result<std::unique_ptr<BertTokenizer>> BertTokenizer::FromTokenizerJsonString(
    std::string_view json_text, std::string_view origin) {
  using nlohmann::json;
  json doc = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("tokenizer.json '{}': {}", origin, why);
  };
  if (doc.is_discarded() || !doc.is_object()) return bad("not a JSON object");
  const json& model = doc.value("model", json());
  if (!model.is_object() || model.value("type", "") != "WordPiece") {
    return bad("model.type must be \"WordPiece\"");
  }
  const json& vocab_json = model.value("vocab", json());
  if (!vocab_json.is_object() || vocab_json.empty())
    return bad("model.vocab must be a non-empty object");
  std::vector<std::string> vocab(vocab_json.size());
  std::vector<bool> seen(vocab_json.size(), false);
  for (const auto& [token, id] : vocab_json.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= static_cast<int64_t>(vocab.size()) || seen[id.get<int64_t>()]) {
      return bad(fmt::format("vocab ids must be 0..{} without gaps (token '{}')", vocab.size() - 1,
                             token));
    }
    seen[id.get<int64_t>()] = true;
    vocab[id.get<int64_t>()] = token;
  }
  BertOptions o;
  try {
    o.unk_token = model.value("unk_token", o.unk_token);
    o.continuing_prefix = model.value("continuing_subword_prefix", o.continuing_prefix);
    o.max_input_chars_per_word = model.value("max_input_chars_per_word", 100);
    const json& norm = doc.value("normalizer", json());
    if (norm.is_object()) {
      if (norm.value("type", "") != "BertNormalizer") {
        return bad("only a BertNormalizer normalizer is supported");
      }
      o.lowercase = norm.value("lowercase", true);
      o.clean_text = norm.value("clean_text", true);
      o.handle_chinese_chars = norm.value("handle_chinese_chars", true);
      const json& sa = norm.value("strip_accents", json());
      if (sa.is_boolean()) o.strip_accents = sa.get<bool>();
    } else if (!norm.is_null()) {
      return bad("normalizer must be an object or null");
    } else {
      o.lowercase = false;
      o.strip_accents = false;
      o.clean_text = false;
      o.handle_chinese_chars = false;
    }
    const json& pre = doc.value("pre_tokenizer", json());
    if (!pre.is_object() || pre.value("type", "") != "BertPreTokenizer") {
      return bad("pre_tokenizer must be BertPreTokenizer");
    }
    std::vector<std::string> added;
    for (const json& t : doc.value("added_tokens", json::array())) {
      if (t.value("normalized", false) || t.value("lstrip", false) || t.value("rstrip", false) ||
          t.value("single_word", false)) {
        return bad(
            fmt::format("added token '{}' uses normalized/lstrip/rstrip/single_word, "
                        "which is not supported",
                        t.value("content", "")));
      }
      added.push_back(t.value("content", ""));
    }
    o.added_tokens = std::move(added);
    const json& post = doc.value("post_processor", json());
    bool add_specials = true;
    if (post.is_object() && post.value("type", "") == "BertProcessing") {
      o.cls_token = post.at("cls").at(0).get<std::string>();
      o.sep_token = post.at("sep").at(0).get<std::string>();
    } else if (post.is_object() && post.value("type", "") == "TemplateProcessing") {
      const json& single = post.at("single");
      if (single.size() != 3 || !single[0].contains("SpecialToken") ||
          !single[2].contains("SpecialToken")) {
        return bad("TemplateProcessing must have the form \"[CLS] $A [SEP]\"");
      }
      o.cls_token = single[0]["SpecialToken"].at("id").get<std::string>();
      o.sep_token = single[2]["SpecialToken"].at("id").get<std::string>();
    } else if (post.is_null()) {
      add_specials = false;
    } else {
      return bad("post_processor must be BertProcessing, TemplateProcessing or null");
    }
    const json& padding = doc.value("padding", json());
    if (padding.is_object()) o.pad_token = padding.value("pad_token", o.pad_token);
    auto tok = FromVocab(std::move(vocab), std::move(o));
    if (!tok.ok()) return tok.status().WithContext(fmt::format("tokenizer.json '{}'", origin));
    (*tok)->add_specials_ = add_specials;
    return tok;
  } catch (const json::exception& e) {
    return bad(e.what());
  }
}

void BertTokenizer::AppendTokens(std::string_view text, int32_t type_id, Encoding* out) const {
  Run(*this, Scratch::Get(), type_id, out).Process(text);
}

Status BertTokenizer::EncodeTo(std::string_view a, const std::string_view* b,
                               const EncodeOptions& options, Encoding* out) const {
  if (a.size() > kMaxTextBytes || (b && b->size() > kMaxTextBytes)) {
    return InvalidArgumentError("text of {} bytes is over the {}-byte limit of 32-bit offsets",
                                std::max(a.size(), b ? b->size() : 0), kMaxTextBytes);
  }
  const bool specials = options.add_special_tokens && add_specials_;
  const int num_special = specials ? (b ? 3 : 2) : 0;
  if (options.max_length < 0 || (options.max_length > 0 && options.max_length < num_special)) {
    return InvalidArgumentError(
        "max_length {} is too small: it must be 0 (no truncation) or at "
        "least {} to hold the special tokens",
        options.max_length, num_special);
  }
  const size_t budget =
      options.max_length > 0 ? static_cast<size_t>(options.max_length - num_special) : SIZE_MAX;
  out->Clear();
  Scratch& scratch = Scratch::Get();
  if (b == nullptr) {
    if (specials) out->Push(cls_id_, 0, true, {0, 0}, {0, 0});
    Run(*this, scratch, 0, out).Process(a);
    size_t keep = out->size() - (specials ? 1 : 0);
    if (keep > budget) {
      size_t n = budget + (specials ? 1 : 0);
      out->ids.resize(n);
      out->type_ids.resize(n);
      out->attention_mask.resize(n);
      out->special_tokens_mask.resize(n);
      out->offsets.resize(n);
      out->char_offsets.resize(n);
    }
    if (specials) out->Push(sep_id_, 0, true, {0, 0}, {0, 0});
    return Status::Ok();
  }
  Encoding& first = scratch.first;
  Encoding& second = scratch.second;
  first.Clear();
  second.Clear();
  Run(*this, scratch, 0, &first).Process(a);
  Run(*this, scratch, 1, &second).Process(*b);
  size_t n1 = first.size(), n2 = second.size();
  if (n1 + n2 > budget) std::tie(n1, n2) = LongestFirstLengths(n1, n2, budget);
  if (specials) out->Push(cls_id_, 0, true, {0, 0}, {0, 0});
  for (size_t i = 0; i < n1; ++i) {
    out->Push(first.ids[i], 0, false, first.offsets[i], first.char_offsets[i]);
  }
  if (specials) out->Push(sep_id_, 0, true, {0, 0}, {0, 0});
  for (size_t i = 0; i < n2; ++i) {
    out->Push(second.ids[i], 1, false, second.offsets[i], second.char_offsets[i]);
  }
  if (specials) out->Push(sep_id_, 1, true, {0, 0}, {0, 0});
  return Status::Ok();
}

}  // namespace surge::text
