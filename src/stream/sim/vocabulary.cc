#include "stream/sim/vocabulary.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/mmap_file.h"
#include "text/segmenter.h"
#include "text/utf8.h"

namespace surge::stream::sim {
namespace {

struct DictWord {
  std::string_view word;
  int64_t freq;
  std::string_view tag;
  size_t chars;
};

// Number of code points when every one is a CJK unified ideograph, else 0.
size_t HanLength(std::string_view w) {
  size_t n = 0;
  for (size_t i = 0; i < w.size();) {
    const text::DecodedChar c = text::DecodeUtf8At(w, i);
    if (!c.valid || c.cp < 0x4E00 || c.cp > 0x9FFF) return 0;
    i += c.length;
    ++n;
  }
  return n;
}

Status ParseDict(std::string_view text, const std::string& path, std::vector<DictWord>* out) {
  size_t line_no = 0;
  for (size_t p = 0; p < text.size();) {
    size_t nl = text.find('\n', p);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(p, nl - p);
    p = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t s1 = line.find(' ');
    const size_t s2 = s1 == std::string_view::npos ? s1 : line.find(' ', s1 + 1);
    DictWord w;
    w.word = line.substr(0, s1);
    const std::string_view f =
        s1 == std::string_view::npos
            ? std::string_view()
            : line.substr(s1 + 1,
                          s2 == std::string_view::npos ? std::string_view::npos : s2 - s1 - 1);
    auto [ptr, ec] = std::from_chars(f.data(), f.data() + f.size(), w.freq);
    if (w.word.empty() || f.empty() || ec != std::errc() || ptr != f.data() + f.size()) {
      return DataLossError("dictionary '{}' line {}: expected \"word freq [tag]\", got \"{}\"",
                           path, line_no, line);
    }
    w.tag = s2 == std::string_view::npos ? std::string_view() : line.substr(s2 + 1);
    w.chars = HanLength(w.word);
    out->push_back(w);  // chars == 0: not all Han (kept for the phrase check only)
  }
  return Status::Ok();
}

bool ContainsAny(std::string_view w, const std::vector<std::string>& parts) {
  for (const auto& p : parts) {
    if (w.find(p) != std::string_view::npos) return true;
  }
  return false;
}

std::vector<double> SqrtFreqWeights(const std::vector<const DictWord*>& words) {
  std::vector<double> w;
  w.reserve(words.size());
  for (const auto* d : words)
    w.push_back(std::sqrt(static_cast<double>(std::max<int64_t>(d->freq, 1))));
  return w;
}

Status SetList(WordPool* pool, const std::vector<std::string>& words, std::string_view what,
               double zipf = 0) {
  if (words.empty()) return InvalidArgumentError("scenario: the {} list is empty", what);
  pool->Set(words,
            zipf > 0 ? ZipfWeights(words.size(), zipf) : std::vector<double>(words.size(), 1.0));
  return Status::Ok();
}

}  // namespace

void WordPool::Set(std::vector<std::string> w, const std::vector<double>& weights) {
  words = std::move(w);
  table = AliasTable(weights);
}

Result<Vocabulary> BuildVocabulary(const Scenario& s) {
  const std::string path =
      s.dict_path.empty() ? std::string(text::kDefaultJiebaDir) + "/dict.txt" : s.dict_path;
  SURGE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  std::vector<DictWord> dict;
  dict.reserve(400000);
  SURGE_RETURN_IF_ERROR(ParseDict(text, path, &dict));

  // Words (and dictionary words containing them) that must never come from the dictionary.
  std::vector<std::string> banned_parts = s.lexicon.pos;
  for (const auto* list : {&s.lexicon.neg, &s.lexicon.exclude, &s.evergreen.words}) {
    banned_parts.insert(banned_parts.end(), list->begin(), list->end());
  }
  for (const auto& b : s.bumps)
    banned_parts.insert(banned_parts.end(), b.words.begin(), b.words.end());
  for (const auto& e : s.events) banned_parts.push_back(e.phrase);
  for (const auto& c : s.spam) banned_parts.push_back(c.phrase);
  std::unordered_set<std::string> banned_exact(s.lexicon.neu.begin(), s.lexicon.neu.end());
  banned_exact.insert(s.lexicon.adjectives.begin(), s.lexicon.adjectives.end());
  auto allowed = [&](std::string_view w) {
    return !banned_exact.count(std::string(w)) && !ContainsAny(w, banned_parts);
  };

  for (const auto& d : dict) {
    for (const auto& e : s.events) {
      if (d.word == e.phrase) {
        return InvalidArgumentError(
            "event '{}': phrase '{}' is a word of the dictionary '{}'; an "
            "event phrase must be new (several dictionary words)",
            e.id, e.phrase, path);
      }
    }
  }

  Vocabulary v;
  std::unordered_set<std::string> claimed;
  for (const auto& c : s.categories) claimed.insert(c.seed_words.begin(), c.seed_words.end());
  // One pass over the dictionary's nouns: each goes to the first category (in order) that it
  // fits, through a seed word it contains or one of the category's characters.
  auto is_noun = [](std::string_view tag) { return tag == "n" || tag == "nz" || tag == "vn"; };
  std::unordered_map<std::string, int> seed_category;
  std::unordered_map<char32_t, int> char_category;
  for (size_t ci = 0; ci < s.categories.size(); ++ci) {
    for (const auto& w : s.categories[ci].seed_words)
      seed_category.emplace(w, static_cast<int>(ci));
    const std::string& chars = s.categories[ci].dict_chars;
    for (size_t i = 0; i < chars.size();) {
      const text::DecodedChar c = text::DecodeUtf8At(chars, i);
      char_category.emplace(c.cp, static_cast<int>(ci));
      i += c.length;
    }
  }
  std::vector<std::vector<const DictWord*>> extra(s.categories.size());
  std::vector<uint32_t> starts;
  for (const auto& d : dict) {
    if (!is_noun(d.tag) || d.chars < 2 || d.chars > 4) continue;
    starts.clear();
    for (size_t i = 0; i < d.word.size();) {
      starts.push_back(static_cast<uint32_t>(i));
      i += text::DecodeUtf8At(d.word, i).length;
    }
    starts.push_back(static_cast<uint32_t>(d.word.size()));
    int best = INT32_MAX;
    if (d.freq >= 50) {
      for (size_t a = 0; a < d.chars; ++a) {
        for (size_t b = a + 2; b <= d.chars; ++b) {
          if (b - a == d.chars) continue;  // proper substrings only
          auto it =
              seed_category.find(std::string(d.word.substr(starts[a], starts[b] - starts[a])));
          if (it != seed_category.end()) best = std::min(best, it->second);
        }
      }
    }
    if (d.freq >= 300) {
      for (size_t a = 0; a < d.chars; ++a) {
        auto it = char_category.find(text::DecodeUtf8At(d.word, starts[a]).cp);
        if (it != char_category.end()) best = std::min(best, it->second);
      }
    }
    if (best == INT32_MAX || claimed.count(std::string(d.word)) || !allowed(d.word)) continue;
    extra[best].push_back(&d);
  }
  for (size_t ci = 0; ci < s.categories.size(); ++ci) {
    const CategorySpec& c = s.categories[ci];
    std::vector<std::string> words = c.seed_words;
    auto& ex = extra[ci];
    std::stable_sort(ex.begin(), ex.end(),
                     [](const DictWord* a, const DictWord* b) { return a->freq > b->freq; });
    if (ex.size() > static_cast<size_t>(c.dict_words)) ex.resize(c.dict_words);
    for (const auto* d : ex) words.emplace_back(d->word);
    WordPool pool;
    pool.Set(words, ZipfWeights(words.size(), 0.9, 3.0));
    v.category.push_back(std::move(pool));
  }
  for (const auto& ex : extra) {
    for (const auto* d : ex) claimed.emplace(d->word);
  }

  auto collect = [&](auto pred) {
    std::vector<const DictWord*> out;
    for (const auto& d : dict) {
      if (pred(d) && !claimed.count(std::string(d.word)) && allowed(d.word)) out.push_back(&d);
    }
    return out;
  };
  auto to_pool = [](const std::vector<const DictWord*>& ws, WordPool* pool,
                    std::string_view what) -> Status {
    if (ws.empty()) {
      return FailedPreconditionError(
          "the dictionary gave no {} (is it jieba's dict.txt with POS "
          "tags?)",
          what);
    }
    std::vector<std::string> words;
    for (const auto* d : ws) words.emplace_back(d->word);
    pool->Set(std::move(words), SqrtFreqWeights(ws));
    return Status::Ok();
  };
  SURGE_RETURN_IF_ERROR(to_pool(collect([](const DictWord& d) {
                                  return d.tag == "n" && d.freq >= 3000 && d.chars >= 2 &&
                                         d.chars <= 3;
                                }),
                                &v.general, "general nouns (tag n)"));
  SURGE_RETURN_IF_ERROR(to_pool(
      collect([](const DictWord& d) { return d.tag == "v" && d.freq >= 3000 && d.chars == 2; }),
      &v.verbs, "verbs (tag v)"));
  SURGE_RETURN_IF_ERROR(to_pool(
      collect([](const DictWord& d) { return d.tag == "d" && d.freq >= 2000 && d.chars == 2; }),
      &v.adverbs, "adverbs (tag d)"));

  SURGE_RETURN_IF_ERROR(SetList(&v.adjectives, s.lexicon.adjectives, "lexicon.adjectives"));
  SURGE_RETURN_IF_ERROR(SetList(&v.pos, s.lexicon.pos, "lexicon.pos"));
  SURGE_RETURN_IF_ERROR(SetList(&v.neg, s.lexicon.neg, "lexicon.neg"));
  SURGE_RETURN_IF_ERROR(SetList(&v.neu, s.lexicon.neu, "lexicon.neu"));
  SURGE_RETURN_IF_ERROR(SetList(&v.emoji, s.lexicon.emoji, "lexicon.emoji"));
  if (!s.evergreen.words.empty()) {
    SURGE_RETURN_IF_ERROR(SetList(&v.evergreen, s.evergreen.words, "evergreen.words",
                                  std::max(s.evergreen.zipf, 1e-9)));
  }
  for (const auto& b : s.bumps) {
    WordPool pool;
    SURGE_RETURN_IF_ERROR(SetList(&pool, b.words, "bumps[].words"));
    v.bumps.push_back(std::move(pool));
  }
  return v;
}

}  // namespace surge::stream::sim
