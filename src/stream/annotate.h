// The annotate stage: posts in, AnnotatedBlocks out (records.h). Stateless per post apart from
// the shared new-word set, so any number of workers (threads, or processes in one consumer
// group) can run it.
//
// Per post:
//  * parse (raw JSON records; a bad record becomes a dead letter with its reason and position
//    and the block goes on without it);
//  * words: Segmenter (jieba-exact, HMM on by default); terms are the words KeywordExtractor does
//    not filter (no stop words, numbers, single characters or punctuation), hashed ASCII
//    lower-cased, weighted tf * idf (new words get the extractor's new-word idf), at most
//    max_terms per post, the top_terms heaviest flagged kTop (they form term pairs in detect);
//  * new words: runs of words equal to a published NewWordSet phrase become one more term
//    (kNewWord, spanning the run);
//  * SimHash of the post's words (letters, digits and ideographs; punctuation and emoji left out)
//    for near-duplicate detection;
//  * author quality in (0, 1]: verified accounts 1; otherwise follower factor
//    min(1, 0.4 + 0.3 * log10(1 + followers)) times account-age factor (younger than young_days:
//    0.3 + 0.7 * age / young_days; unknown age: 0.8), at least 0.05;
//  * category and sentiment: the model's heads when a model is loaded, else the built-in lexicon
//    (lexicon.h; category "unknown" when no keyword hits);
//  * with a model (on every post, or on one post in model_every): keyword weights per word = the
//  highest keyword probability among the
//    WordPiece tokens overlapping the word (through the tokenizer's byte offsets), which scales
//    the term weight (0.25 + p) and so decides top terms; the [CLS] embedding (L2-normalised) is
//    kept per post for clustering.
//
// Thread safety: AnnotateResources is shared and immutable (the new-word set is swapped
// atomically); an Annotator belongs to one thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "stream/dead_letter.h"
#include "stream/lexicon.h"
#include "stream/model.h"
#include "stream/new_words.h"
#include "stream/records.h"
#include "text/keywords.h"
#include "text/segmenter.h"

namespace surge::stream {

struct AnnotateOptions {
  std::string dict_path;  // jieba dictionary (empty: Debian's)
  std::string idf_path;   // idf table (empty: jieba's)
  std::vector<std::string> user_dicts;
  bool hmm = true;
  int max_terms = 16;
  int top_terms = 5;
  int young_days = 30;
  bool new_words = true;
  NewWordLearnerOptions new_word;
  std::string model_dir;  // empty: lexical only
  ModelOptions model;
  // Run the model on one post in `model_every` (chosen by the post-id hash, so every worker
  // picks the same posts); the others keep the lexical terms and carry no category, sentiment
  // or embedding. Topic category, sentiment and embeddings are aggregates, so a sample serves
  // them when the model cannot keep up with the stream on the hardware at hand. 1: every post.
  int model_every = 1;
};

class AnnotateResources {
 public:
  static Result<std::shared_ptr<AnnotateResources>> Create(const AnnotateOptions& options);

  const AnnotateOptions& options() const { return o_; }
  const text::Segmenter& segmenter() const { return *segmenter_; }
  const text::KeywordExtractor& keywords() const { return *keywords_; }
  const Lexicon& lexicon() const { return *lexicon_; }
  const ModelRunner* model() const { return model_.get(); }
  const std::shared_ptr<const std::vector<std::string>>& categories() const { return categories_; }
  // Null when new words are off.
  NewWordLearner* learner() const { return learner_.get(); }

 private:
  AnnotateResources() = default;
  AnnotateOptions o_;
  std::unique_ptr<text::Segmenter> segmenter_;
  std::unique_ptr<text::KeywordExtractor> keywords_;
  const Lexicon* lexicon_ = nullptr;
  std::shared_ptr<const ModelRunner> model_;
  std::shared_ptr<const std::vector<std::string>> categories_;
  std::unique_ptr<NewWordLearner> learner_;
};

struct AnnotateCounters {
  int64_t posts = 0;
  int64_t dead_letters = 0;
  int64_t model_batches = 0;
  int64_t model_posts = 0;  // posts the model ran on
};

class Annotator {
 public:
  static Result<std::unique_ptr<Annotator>> Create(std::shared_ptr<const AnnotateResources> res);

  // Annotates every record of `in` into `out` (cleared first). Bad records go to `dead` (may be
  // null: counted only) named with `source`. Fails only when the model fails on a whole batch.
  Status Annotate(const RecordBlock& in, std::string_view source, DeadLetterSink* dead,
                  AnnotatedBlock* out);
  // Annotates one parsed post (appends to `out`).
  void AnnotatePost(const Post& post, AnnotatedBlock* out);

  const AnnotateCounters& counters() const { return counters_; }

 private:
  explicit Annotator(std::shared_ptr<const AnnotateResources> res);
  struct WordInfo {
    uint64_t hash = 0;
    float idf = 0;
    uint8_t flags = 0;     // 1: filtered (not a term), 2: SimHash feature, 4: valid entry
    int8_t category = -1;  // lexicon category
    int8_t polarity = 0;   // lexicon sentiment
  };
  const WordInfo& Lookup(uint64_t hash, std::string_view word);
  Status RunModel(AnnotatedBlock* out, size_t first_post);

  std::shared_ptr<const AnnotateResources> res_;
  PostParser parser_;
  Post post_;
  std::unique_ptr<ModelSession> session_;
  std::vector<WordInfo> cache_;  // direct-mapped by hash
  std::vector<text::WordSpan> words_;
  std::vector<uint64_t> word_hashes_;
  std::vector<uint64_t> features_;  // hashes of the SimHash features
  std::vector<TermOcc> terms_;
  std::string lower_;
  std::vector<std::string_view> texts_;
  std::vector<size_t> rows_;  // posts the model runs on
  ModelOutputs model_out_;
  AnnotateCounters counters_;
};

// One annotate worker as a stage: blocks of records in, one TermBatch per detect partition out.
// What a scaled-out annotate process runs between its post source and the terms channel:
//
//   AnnotateStage stage(res, partitions);           // partitions = the terms topic's
//   for (;;) {
//     RecordBlock in; source->Read(&in, 4096);
//     std::vector<TermBatch> out; stage.Process(in, source->name(), dead, &out);
//     for (auto& b : out) writer->SendTo(b.partition, b.partition, std::move(b));
//     writer->Flush(); source->Commit(out.empty() ? Offsets{} : out[0].block->offsets);
//   }
//
// Process() also feeds the stage's new-word learner (when the resources have one), so each
// worker learns phrases from what it sees. Batches of a block share the AnnotatedBlock; the
// codec (codec.h) writes only each partition's part.
class AnnotateStage {
 public:
  AnnotateStage(std::unique_ptr<Annotator> annotator, std::shared_ptr<const AnnotateResources> res,
                int32_t partitions);
  static Result<std::unique_ptr<AnnotateStage>> Create(std::shared_ptr<const AnnotateResources> res,
                                                       int32_t partitions);

  Status Process(const RecordBlock& in, std::string_view source, DeadLetterSink* dead,
                 std::vector<TermBatch>* out);
  // The second half of Process, for a block annotated elsewhere (the embedded pipeline annotates
  // in parallel and routes in input order).
  void Route(std::shared_ptr<const AnnotatedBlock> block, std::vector<TermBatch>* out);
  int32_t partitions() const { return partitions_; }
  const Annotator& annotator() const { return *annotator_; }

 private:
  std::unique_ptr<Annotator> annotator_;
  std::shared_ptr<const AnnotateResources> res_;
  int32_t partitions_;
};

}  // namespace surge::stream
