#include "text/keywords.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>

#include "core/mmap_file.h"
#include "text/utf8.h"

namespace surge::text {

const char* const kExtraStopWords[] = {
    // jieba 0.42.1 KeywordExtractor.STOP_WORDS.
    "the", "of", "is", "and", "to", "in", "that", "we", "for", "an", "are", "by", "be", "as", "on",
    "with", "can", "if", "from", "which", "you", "it", "this", "then", "at", "have", "all", "not",
    "one", "has", "or",
    // More English function words and URL parts.
    "a", "i", "me", "my", "our", "your", "he", "she", "they", "them", "his", "her", "its", "was",
    "were", "been", "being", "do", "does", "did", "but", "so", "no", "yes", "just", "will", "would",
    "should", "could", "about", "into", "than", "too", "very", "there", "their", "what", "when",
    "where", "who", "why", "how", "up", "out", "rt", "via", "http", "https", "www", "com", "cn",
    "html", "amp",
    // Chinese function words, pronouns and connectives.
    "我们", "你们", "他们", "她们", "它们", "自己", "大家", "这个", "那个", "这些", "那些", "这样",
    "那样", "这里", "那里", "什么", "怎么", "怎样", "为什么", "因为", "所以", "但是", "而且",
    "如果", "虽然", "然后", "还是", "或者", "就是", "只是", "可以", "可能", "应该", "没有", "不是",
    "已经", "一个", "一些", "一下", "一样", "一起", "以及", "以后", "之后", "之前", "时候", "还有",
    "而已", "的话", "其实", "真的", "非常", "觉得", "知道", "现在", "今天", "昨天", "明天", "这么",
    "那么", "多少", "不会", "不要", "需要", "只有", "通过", "进行", "关于", "对于", "起来", "出来",
    "看看", "一直", "也是", "就是说", "哈哈", "哈哈哈", "啊啊",
    // Weibo boilerplate.
    "转发", "微博", "评论", "网页链接", "全文", "原图", "视频", "显示地图", "秒拍", "分享",
    nullptr};

namespace {

bool IsNumberChar(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 0xFF10 && c <= 0xFF19) || c == '.' || c == ',' ||
         c == '%' || c == '+' || c == '-' || c == ':' || c == '/' || c == 0xFF0E || c == 0xFF0C ||
         c == 0xFF05 || c == 0x3002;
}

bool IsWordChar(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return (c >= 0xC0 && c <= 0x24F && c != 0xD7 && c != 0xF7) ||  // Latin letters
         (c >= 0x370 && c <= 0x52F) ||                           // Greek, Cyrillic
         (c >= 0x600 && c <= 0x6FF) ||                           // Arabic
         (c >= 0x3040 && c <= 0x30FF) ||                         // kana
         (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x20000 && c <= 0x2FFFF) ||  // Han
         (c >= 0xAC00 && c <= 0xD7AF) ||                                    // Hangul
         (c >= 0xFF10 && c <= 0xFF19) || (c >= 0xFF21 && c <= 0xFF3A) ||
         (c >= 0xFF41 && c <= 0xFF5A);  // full-width letters and digits
}

std::string AsciiLower(std::string_view s) {
  std::string r(s);
  for (char& c : r) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return r;
}

}  // namespace

Result<std::unique_ptr<KeywordExtractor>> KeywordExtractor::Create(const Segmenter* segmenter,
                                                                   const KeywordOptions& options) {
  if (segmenter == nullptr) return InvalidArgumentError("KeywordExtractor needs a segmenter");
  std::unique_ptr<KeywordExtractor> k(new KeywordExtractor());
  k->segmenter_ = segmenter;
  std::string idf_path = options.idf_path.empty()
                             ? std::string(kDefaultJiebaDir) + "/analyse/idf.txt"
                             : options.idf_path;
  auto file = MappedFile::Open(idf_path);
  if (!file.ok()) return file.status().WithContext("loading idf table");
  std::string_view s(reinterpret_cast<const char*>(file->data()), file->size());
  std::vector<double> values;
  values.reserve(s.size() / 16);
  k->idf_.reserve(s.size() / 16);
  size_t pos = 0, line_no = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    if (nl == std::string_view::npos) nl = s.size();
    std::string_view line = s.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty()) continue;
    size_t sp = line.rfind(' ');
    double v = 0;
    bool ok = sp != std::string_view::npos && sp > 0;
    if (ok) {
      auto r = std::from_chars(line.data() + sp + 1, line.data() + line.size(), v);
      ok = r.ec == std::errc() && r.ptr == line.data() + line.size() && std::isfinite(v);
    }
    if (!ok) {
      return DataLossError("invalid idf entry in {} at line {} (expected 'word idf')", idf_path,
                           line_no);
    }
    k->idf_[std::string(line.substr(0, sp))] = v;
  }
  if (k->idf_.empty()) return DataLossError("idf table {} is empty", idf_path);
  for (const auto& [w, v] : k->idf_) values.push_back(v);
  // jieba: sorted(values)[len // 2].
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  k->median_idf_ = values[values.size() / 2];
  k->new_word_idf_ = options.new_word_idf > 0 ? options.new_word_idf
                                              : *std::max_element(values.begin(), values.end());

  for (const char* const* w = kExtraStopWords; *w != nullptr; ++w) k->stop_words_.emplace(*w);
  if (!options.stop_words_path.empty()) {
    auto text = ReadFileToString(options.stop_words_path);
    if (!text.ok()) return text.status().WithContext("loading stop words");
    std::string_view t = *text;
    for (size_t p = 0; p < t.size();) {
      size_t nl = t.find('\n', p);
      if (nl == std::string_view::npos) nl = t.size();
      std::string_view w = t.substr(p, nl - p);
      if (!w.empty() && w.back() == '\r') w.remove_suffix(1);
      if (!w.empty()) k->stop_words_.emplace(AsciiLower(w));
      p = nl + 1;
    }
  }
  return k;
}

void KeywordExtractor::AddNewWords(const std::vector<std::string>& words) {
  std::unique_lock lock(new_words_mu_);
  for (const auto& w : words) new_words_.insert(w);
}

bool KeywordExtractor::Filtered(std::string_view word) const {
  size_t chars = 0;
  bool all_number = true, any_word_char = false;
  for (size_t p = 0; p < word.size();) {
    DecodedChar c = DecodeUtf8At(word, p);
    p += c.length;
    ++chars;
    if (!IsNumberChar(c.cp)) all_number = false;
    if (IsWordChar(c.cp)) any_word_char = true;
  }
  if (chars < 2 || all_number || !any_word_char) return true;
  return stop_words_.count(AsciiLower(word)) != 0;
}

double KeywordExtractor::Idf(std::string_view word) const {
  {
    std::shared_lock lock(new_words_mu_);
    if (new_words_.count(word) != 0) return new_word_idf_;
  }
  auto it = idf_.find(word);
  return it == idf_.end() ? median_idf_ : it->second;
}

std::vector<Keyword> KeywordExtractor::TfIdf(std::string_view text, size_t top_k) const {
  std::vector<WordSpan> spans;
  segmenter_->Cut(text, &spans);
  std::vector<Keyword> kws;
  std::unordered_map<std::string_view, size_t> index;
  double total = 0;
  for (const WordSpan& s : spans) {
    std::string_view w = text.substr(s.offset, s.size);
    if (s.size < 2 || Filtered(w) || !IsValidUtf8(w)) continue;
    auto [it, fresh] = index.emplace(w, kws.size());
    if (fresh) kws.push_back({std::string(w), 0.0});
    kws[it->second].weight += 1.0;
    total += 1.0;
  }
  for (Keyword& k : kws) k.weight *= Idf(k.word) / total;
  std::stable_sort(kws.begin(), kws.end(),
                   [](const Keyword& a, const Keyword& b) { return a.weight > b.weight; });
  if (top_k > 0 && kws.size() > top_k) kws.resize(top_k);
  return kws;
}

std::vector<Keyword> KeywordExtractor::TextRank(std::string_view text, size_t top_k) const {
  constexpr size_t kSpan = 5;
  constexpr double kD = 0.85;
  std::vector<WordSpan> spans;
  segmenter_->Cut(text, &spans);
  std::vector<std::string_view> words;
  std::vector<bool> keep;
  for (const WordSpan& s : spans) {
    std::string_view w = text.substr(s.offset, s.size);
    words.push_back(w);
    keep.push_back(s.size >= 2 && IsValidUtf8(w) && !Filtered(w));
  }
  // Co-occurrence counts within the window, in first-seen order (jieba's dict order).
  std::map<std::pair<std::string_view, std::string_view>, int> pair_index;
  std::vector<std::pair<std::pair<std::string_view, std::string_view>, int>> pairs;
  for (size_t i = 0; i < words.size(); ++i) {
    if (!keep[i]) continue;
    for (size_t j = i + 1; j < i + kSpan && j < words.size(); ++j) {
      if (!keep[j]) continue;
      auto key = std::make_pair(words[i], words[j]);
      auto [it, fresh] = pair_index.emplace(key, static_cast<int>(pairs.size()));
      if (fresh) pairs.push_back({key, 0});
      ++pairs[it->second].second;
    }
  }
  // Undirected weighted graph; nodes in insertion order, edge lists as jieba builds them.
  std::unordered_map<std::string_view, size_t> node_index;
  std::vector<std::string_view> nodes;
  struct Edge {
    size_t to;
    double w;
  };
  std::vector<std::vector<Edge>> adj;
  auto node = [&](std::string_view w) {
    auto [it, fresh] = node_index.emplace(w, nodes.size());
    if (fresh) {
      nodes.push_back(w);
      adj.emplace_back();
    }
    return it->second;
  };
  for (const auto& [key, count] : pairs) {
    size_t a = node(key.first), b = node(key.second);
    adj[a].push_back({b, static_cast<double>(count)});
    adj[b].push_back({a, static_cast<double>(count)});
  }
  size_t n = nodes.size();
  std::vector<Keyword> out;
  if (n == 0) return out;
  std::vector<double> ws(n, 1.0 / static_cast<double>(n)), out_sum(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (const Edge& e : adj[i]) out_sum[i] += e.w;
  }
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return nodes[a] < nodes[b]; });
  for (int iter = 0; iter < 10; ++iter) {
    for (size_t i : order) {
      double s = 0;
      for (const Edge& e : adj[i]) s += e.w / out_sum[e.to] * ws[e.to];
      ws[i] = (1 - kD) + kD * s;
    }
  }
  double min_rank = std::numeric_limits<double>::max();
  double max_rank = std::numeric_limits<double>::min();
  for (double w : ws) {
    min_rank = std::min(min_rank, w);
    max_rank = std::max(max_rank, w);
  }
  for (size_t i = 0; i < n; ++i) {
    out.push_back(
        {std::string(nodes[i]), (ws[i] - min_rank / 10.0) / (max_rank - min_rank / 10.0)});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Keyword& a, const Keyword& b) { return a.weight > b.weight; });
  if (top_k > 0 && out.size() > top_k) out.resize(top_k);
  return out;
}

}  // namespace surge::text
