#include "stream/new_words.h"

#include <algorithm>

#include "core/logging.h"
#include "stream/hash.h"

namespace surge::stream {

std::string_view LowerAscii(std::string_view s, std::string* scratch) {
  size_t i = 0;
  while (i < s.size() && !(s[i] >= 'A' && s[i] <= 'Z')) ++i;
  if (i == s.size()) return s;
  scratch->assign(s);
  for (; i < scratch->size(); ++i) {
    char& c = (*scratch)[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return *scratch;
}

namespace {

text::NewWordOptions DetectorOptions(const text::Segmenter* seg, const NewWordLearnerOptions& o) {
  text::NewWordOptions d;
  d.min_len = 2;
  d.max_len = 8;
  d.window_posts = o.window_posts;
  d.sketch_width = 1u << 17;
  d.max_tracked = 8000;
  d.min_count = o.min_count;
  d.min_npmi = o.min_npmi;
  d.min_entropy = o.min_entropy;
  // A phrase the dictionary already has is a single word for the segmenter: nothing to add.
  d.is_known = [seg](std::string_view w) {
    auto f = seg->Lookup(w);
    return f.has_value() && *f > 0;
  };
  return d;
}

}  // namespace

NewWordLearner::NewWordLearner(const text::Segmenter* segmenter, NewWordLearnerOptions options)
    : seg_(segmenter),
      o_(options),
      detector_(DetectorOptions(segmenter, options)),
      current_(std::make_shared<NewWordSet>()) {}

bool NewWordLearner::Offer(std::string_view text) {
  if (o_.sample_every > 1 && (offered_++ % o_.sample_every) != 0) return false;
  detector_.AddPost(text);
  return ++since_refresh_ >= o_.refresh_every;
}

void NewWordLearner::Refresh() {
  since_refresh_ = 0;
  ++refreshes_;
  auto set = std::make_shared<NewWordSet>();
  std::string scratch;
  for (const auto& c : detector_.Candidates(o_.max_words)) {
    std::vector<std::string> words = seg_->LCut(c.word);
    if (words.size() < 2 || words.size() > 16) continue;  // one word already, or implausible
    NewWordSet::Entry e;
    for (const auto& w : words) e.words.push_back(HashBytes(LowerAscii(w, &scratch)));
    e.text = c.word;
    e.hash = HashBytes(LowerAscii(c.word, &scratch));
    set->by_first[e.words[0]].push_back(std::move(e));
    ++set->size;
  }
  for (auto& [k, v] : set->by_first) {
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return a.words.size() != b.words.size() ? a.words.size() > b.words.size() : a.text < b.text;
    });
  }
  SURGE_LOG_DEBUG("new words: {} phrases published", set->size);
  std::lock_guard<std::mutex> lock(mu_);
  current_ = std::move(set);
}

std::shared_ptr<const NewWordSet> NewWordLearner::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

}  // namespace surge::stream
