#include "stream/annotate.h"

#include <algorithm>
#include <cmath>

#include "core/logging.h"
#include "stream/hash.h"
#include "stream/hashtag.h"
#include "stream/near_dup.h"
#include "text/utf8.h"

namespace surge::stream {
namespace {

constexpr size_t kCacheBits = 16;
constexpr uint8_t kFiltered = 1, kFeature = 2, kValid = 4;

// A SimHash feature: a word with a letter, digit or ideograph (punctuation, spaces, symbols and
// emoji are left out, so that they cannot tell near-duplicates apart).
bool IsFeature(std::string_view w) {
  for (size_t i = 0; i < w.size();) {
    text::DecodedChar d = text::DecodeUtf8At(w, i);
    if (d.valid && IsNameChar(d.cp)) return true;
    i += d.length;
  }
  return false;
}

float AuthorQuality(const Post& p, int young_days, bool* young) {
  *young = false;
  if (p.user.verified) return 1.0f;
  double f = std::min(1.0, 0.4 + 0.3 * std::log10(1.0 + static_cast<double>(p.user.followers)));
  double a = 0.8;
  if (p.user.created_ms > 0) {
    double age_days = static_cast<double>(p.ts_ms - p.user.created_ms) / 86400000.0;
    if (age_days < young_days) {
      *young = true;
      a = 0.3 + 0.7 * std::max(0.0, age_days) / young_days;
    } else {
      a = 1.0;
    }
  }
  return static_cast<float>(std::max(0.05, f * a));
}

uint32_t Clamp32(int64_t v) { return static_cast<uint32_t>(std::clamp<int64_t>(v, 0, UINT32_MAX)); }

}  // namespace

Result<std::shared_ptr<AnnotateResources>> AnnotateResources::Create(const AnnotateOptions& o) {
  std::shared_ptr<AnnotateResources> r(new AnnotateResources());
  r->o_ = o;
  if (o.max_terms < 1 || o.max_terms > 64) {
    return InvalidArgumentError("max_terms per post must be 1..64, got {}", o.max_terms);
  }
  if (o.top_terms < 0 || o.top_terms > 12) {
    return InvalidArgumentError("top_terms per post must be 0..12, got {}", o.top_terms);
  }
  text::SegmenterOptions so;
  so.dict_path = o.dict_path;
  so.user_dict_paths = o.user_dicts;
  SURGE_ASSIGN_OR_RETURN(r->segmenter_, text::Segmenter::Create(so));
  text::KeywordOptions ko;
  ko.idf_path = o.idf_path;
  SURGE_ASSIGN_OR_RETURN(r->keywords_, text::KeywordExtractor::Create(r->segmenter_.get(), ko));
  r->lexicon_ = &Lexicon::BuiltIn();
  if (!o.model_dir.empty()) {
    SURGE_ASSIGN_OR_RETURN(r->model_, ModelRunner::Load(o.model_dir, o.model));
    r->categories_ = std::make_shared<std::vector<std::string>>(r->model_->contract().categories);
  } else {
    SURGE_LOG_INFO(
        "annotate: no model, lexical path only (words, tf-idf keywords, new words, SimHash; "
        "category and sentiment from a small built-in lexicon; no embeddings)");
    r->categories_ = std::make_shared<std::vector<std::string>>(r->lexicon_->categories());
  }
  if (o.new_words) {
    r->learner_ = std::make_unique<NewWordLearner>(r->segmenter_.get(), o.new_word);
  }
  return r;
}

Result<std::unique_ptr<Annotator>> Annotator::Create(std::shared_ptr<const AnnotateResources> res) {
  std::unique_ptr<Annotator> a(new Annotator(res));
  if (res->model()) {
    SURGE_ASSIGN_OR_RETURN(a->session_, res->model()->NewSession());
  }
  return a;
}

Annotator::Annotator(std::shared_ptr<const AnnotateResources> res)
    : res_(std::move(res)), cache_(size_t{1} << kCacheBits) {}

const Annotator::WordInfo& Annotator::Lookup(uint64_t hash, std::string_view word) {
  WordInfo& e = cache_[hash & ((size_t{1} << kCacheBits) - 1)];
  if ((e.flags & kValid) && e.hash == hash) return e;
  const auto& kw = res_->keywords();
  e.hash = hash;
  e.flags = kValid;
  if (kw.Filtered(word)) {
    e.flags |= kFiltered;
    e.idf = 0;
  } else {
    e.idf = static_cast<float>(kw.Idf(word));
  }
  if (IsFeature(word)) e.flags |= kFeature;
  int c = res_->lexicon().Category(hash);
  e.category = static_cast<int8_t>(c >= 0 && c < 127 ? c : -1);
  e.polarity = static_cast<int8_t>(res_->lexicon().Polarity(hash));
  return e;
}

void Annotator::AnnotatePost(const Post& p, AnnotatedBlock* out) {
  const AnnotateOptions& o = res_->options();
  AnnotatedPost a;
  a.key = HashBytes(p.id);
  a.author = HashBytes(p.user.id);
  a.repost_of = p.repost_of ? HashBytes(*p.repost_of) : 0;
  a.ts_ms = p.ts_ms;
  bool young = false;
  a.quality = AuthorQuality(p, o.young_days, &young);
  if (young) a.flags |= AnnotatedPost::kYoungAccount;
  if (p.user.verified) a.flags |= AnnotatedPost::kVerified;
  a.followers = Clamp32(p.user.followers);
  a.reposts = Clamp32(p.reposts);
  a.comments = Clamp32(p.comments);
  a.likes = Clamp32(p.likes);
  std::string_view id = std::string_view(p.id).substr(0, 0xFFFF);
  a.id_off = static_cast<uint32_t>(out->arena.size());
  a.id_len = static_cast<uint16_t>(id.size());
  out->arena.append(id);
  std::string_view user = std::string_view(p.user.id).substr(0, 0xFFFF);
  a.user_off = static_cast<uint32_t>(out->arena.size());
  a.user_len = static_cast<uint16_t>(user.size());
  out->arena.append(user);
  a.text_off = static_cast<uint32_t>(out->arena.size());
  a.text_len = static_cast<uint32_t>(p.text.size());
  out->arena.append(p.text);
  out->max_ts_ms = std::max(out->max_ts_ms, p.ts_ms);

  const std::string_view text = p.text;
  words_.clear();
  res_->segmenter().Cut(text, &words_, o.hmm);
  const size_t nw = std::min<size_t>(words_.size(), 0xFFFF);
  word_hashes_.resize(nw);
  features_.clear();
  terms_.clear();
  const Lexicon& lex = res_->lexicon();
  int votes[32] = {};
  int polarity = 0;
  const int ncat = std::min<int>(32, static_cast<int>(lex.categories().size()));
  for (size_t i = 0; i < nw; ++i) {
    std::string_view w = text.substr(words_[i].offset, words_[i].size);
    std::string_view lw = LowerAscii(w, &lower_);
    uint64_t h = HashBytes(lw);
    word_hashes_[i] = h;
    const WordInfo& info = Lookup(h, lw);
    if (info.flags & kFeature) features_.push_back(h);
    // Sentiment words are often filtered words too (single characters such as 赞).
    if (!res_->model()) polarity += info.polarity;
    if (info.flags & kFiltered) continue;
    if (!res_->model() && info.category >= 0 && info.category < ncat) ++votes[info.category];
    bool merged = false;
    for (TermOcc& t : terms_) {
      if (t.hash == h) {
        t.weight += info.idf;
        merged = true;
        break;
      }
    }
    if (merged) continue;
    TermOcc t;
    t.hash = h;
    t.weight = info.idf;
    t.text_off = a.text_off + words_[i].offset;
    t.text_len = static_cast<uint16_t>(std::min<uint32_t>(words_[i].size, 0xFFFF));
    t.ordinal = static_cast<uint16_t>(i);
    terms_.push_back(t);
  }
  // New words: a run of words equal to a published phrase.
  if (NewWordLearner* learner = res_->learner()) {
    auto set = learner->Current();
    if (set->size) {
      const float idf = static_cast<float>(res_->keywords().new_word_idf());
      for (size_t i = 0; i < nw; ++i) {
        auto it = set->by_first.find(word_hashes_[i]);
        if (it == set->by_first.end()) continue;
        for (const auto& e : it->second) {
          if (i + e.words.size() > nw) continue;
          if (!std::equal(e.words.begin(), e.words.end(), word_hashes_.begin() + i)) continue;
          bool dup = false;
          for (const TermOcc& t : terms_) dup |= t.hash == e.hash;
          if (dup) break;
          TermOcc t;
          t.hash = e.hash;
          t.weight = idf * 1.5f;
          uint32_t begin = words_[i].offset;
          uint32_t end =
              words_[i + e.words.size() - 1].offset + words_[i + e.words.size() - 1].size;
          t.text_off = a.text_off + begin;
          t.text_len = static_cast<uint16_t>(std::min<uint32_t>(end - begin, 0xFFFF));
          t.ordinal = static_cast<uint16_t>(i);
          t.span = static_cast<uint8_t>(e.words.size());
          t.flags = TermOcc::kNewWord;
          terms_.push_back(t);
          break;
        }
      }
    }
  }
  // Heaviest first; ties by first occurrence.
  std::stable_sort(terms_.begin(), terms_.end(),
                   [](const TermOcc& x, const TermOcc& y) { return x.weight > y.weight; });
  if (terms_.size() > static_cast<size_t>(o.max_terms)) terms_.resize(o.max_terms);
  for (size_t i = 0; i < terms_.size() && i < static_cast<size_t>(o.top_terms); ++i) {
    terms_[i].flags |= TermOcc::kTop;
  }
  a.term_begin = static_cast<uint32_t>(out->terms.size());
  a.term_count = static_cast<uint16_t>(terms_.size());
  out->terms.insert(out->terms.end(), terms_.begin(), terms_.end());
  a.simhash = SimHashOfHashes(features_.data(), features_.size());
  if (!res_->model()) {
    int best = -1, best_votes = 0;
    for (int c = 0; c < ncat; ++c) {
      if (votes[c] > best_votes) {
        best = c;
        best_votes = votes[c];
      }
    }
    a.category = static_cast<int16_t>(best);
    a.sentiment = polarity > 0   ? std::array<float, 3>{1, 0, 0}
                  : polarity < 0 ? std::array<float, 3>{0, 0, 1}
                                 : std::array<float, 3>{0, 1, 0};
  }
  out->posts.push_back(a);
  ++counters_.posts;
}

Status Annotator::Annotate(const RecordBlock& in, std::string_view source, DeadLetterSink* dead,
                           AnnotatedBlock* out) {
  *out = AnnotatedBlock{};
  out->sequence = in.sequence;
  out->read_wall_ns = in.read_wall_ns;
  out->categories = res_->categories();
  out->posts.reserve(in.size());
  out->terms.reserve(in.size() * 12);
  out->arena.reserve(in.data.size() + in.posts.size() * 128);
  for (const SourceError& e : in.errors) {
    ++counters_.dead_letters;
    if (dead) dead->Add({e.kind, e.message, source, e.line, e.position, e.raw});
    out->offsets.Advance(e.position);
  }
  for (const RawRecord& r : in.raw) {
    out->offsets.Advance(r.position, r.size + 1);
    std::string_view bytes = in.Bytes(r);
    Status st = parser_.ParseInto(bytes, &post_);
    if (!st.ok()) {
      ++counters_.dead_letters;
      if (dead) dead->Add({PostErrorKind(st), st.message(), source, r.line, r.position, bytes});
      continue;
    }
    AnnotatePost(post_, out);
  }
  for (size_t i = 0; i < in.posts.size(); ++i) {
    if (i < in.post_positions.size()) out->offsets.Advance(in.post_positions[i]);
    AnnotatePost(in.posts[i], out);
  }
  if (session_ && !out->posts.empty()) SURGE_RETURN_IF_ERROR(RunModel(out, 0));
  return Status::Ok();
}

Status Annotator::RunModel(AnnotatedBlock* out, size_t first_post) {
  const uint64_t every = static_cast<uint64_t>(std::max(1, res_->options().model_every));
  rows_.clear();
  texts_.clear();
  for (size_t i = first_post; i < out->posts.size(); ++i) {
    if (every > 1 && out->posts[i].key % every != 0) continue;
    rows_.push_back(i);
    texts_.push_back(out->PostText(out->posts[i]));
  }
  const int H = res_->model()->hidden();
  out->embedding_dim = H;
  out->embeddings.assign(out->posts.size() * H, 0.f);
  if (rows_.empty()) return Status::Ok();
  SURGE_RETURN_IF_ERROR(session_->Run(texts_, &model_out_));
  ++counters_.model_batches;
  counters_.model_posts += static_cast<int64_t>(rows_.size());
  const int C = model_out_.categories;
  const size_t top = static_cast<size_t>(res_->options().top_terms);
  for (size_t i = 0; i < rows_.size(); ++i) {
    AnnotatedPost& p = out->posts[rows_[i]];
    p.flags |= AnnotatedPost::kModel;
    const float* cat = model_out_.category.data() + i * C;
    p.category = static_cast<int16_t>(std::max_element(cat, cat + C) - cat);
    for (int k = 0; k < 3; ++k) p.sentiment[k] = model_out_.sentiment[i * 3 + k];
    std::copy_n(model_out_.embedding.data() + i * H, H, out->embeddings.data() + rows_[i] * H);
    // Keyword weights: a term's probability is the highest of the tokens overlapping it.
    const auto& toks = model_out_.keywords[i];
    TermOcc* t = out->terms.data() + p.term_begin;
    for (size_t k = 0; k < p.term_count; ++k) {
      uint32_t begin = t[k].text_off - p.text_off, end = begin + t[k].text_len;
      float best = 0;
      for (const TokenWeight& tw : toks) {
        if (tw.begin < end && tw.end > begin) best = std::max(best, tw.prob);
      }
      t[k].weight *= 0.25f + best;
      t[k].flags &= static_cast<uint8_t>(~TermOcc::kTop);
    }
    std::stable_sort(t, t + p.term_count,
                     [](const TermOcc& x, const TermOcc& y) { return x.weight > y.weight; });
    for (size_t k = 0; k < p.term_count && k < top; ++k) t[k].flags |= TermOcc::kTop;
  }
  return Status::Ok();
}

AnnotateStage::AnnotateStage(std::unique_ptr<Annotator> annotator,
                             std::shared_ptr<const AnnotateResources> res, int32_t partitions)
    : annotator_(std::move(annotator)), res_(std::move(res)), partitions_(partitions) {}

Result<std::unique_ptr<AnnotateStage>> AnnotateStage::Create(
    std::shared_ptr<const AnnotateResources> res, int32_t partitions) {
  if (partitions < 1) {
    return InvalidArgumentError("the terms channel needs >= 1 partitions, got {}", partitions);
  }
  SURGE_ASSIGN_OR_RETURN(auto a, Annotator::Create(res));
  return std::make_unique<AnnotateStage>(std::move(a), std::move(res), partitions);
}

Status AnnotateStage::Process(const RecordBlock& in, std::string_view source, DeadLetterSink* dead,
                              std::vector<TermBatch>* out) {
  auto block = std::make_shared<AnnotatedBlock>();
  SURGE_RETURN_IF_ERROR(annotator_->Annotate(in, source, dead, block.get()));
  Route(std::move(block), out);
  return Status::Ok();
}

void AnnotateStage::Route(std::shared_ptr<const AnnotatedBlock> block,
                          std::vector<TermBatch>* out) {
  if (NewWordLearner* learner = res_->learner()) {
    for (const AnnotatedPost& p : block->posts) {
      if (learner->Offer(block->PostText(p))) learner->Refresh();
    }
  }
  for (int32_t p = 0; p < partitions_; ++p) {
    TermBatch tb;
    tb.block = block;
    tb.partition = p;
    tb.partitions = partitions_;
    tb.watermark_ms = block->max_ts_ms == INT64_MIN ? INT64_MIN : block->max_ts_ms;
    out->push_back(std::move(tb));
  }
}

}  // namespace surge::stream
