// The rank stage: candidates of all detect shards in, one hot list per bucket out (sink.h).
//
// A bucket is ranked once every detect shard has sent its CandidateBatch for it (or for a later
// bucket). A batch for a bucket already ranked (a replay) is ignored.
//
// 1. Nodes: every candidate (term, or pair of terms) is a node with its bucket statistics.
// 2. Clustering, single pass: nodes in order of significance join the cluster they are most
//    similar to when that similarity reaches cluster_threshold, else found a new cluster.
//    Similarity of a node to a cluster = the larger of its similarity to the cluster's seed and
//    its mean similarity to the members; node similarity = the largest of
//      - post co-occurrence: the containment |A∩B| / min(|A|,|B|) of their posts, estimated from
//        the bottom-k samples (exact on the hash range both samples cover),
//      - shared terms (a pair and a term of it, two pairs sharing a term, text containment,
//        e.g. "AI推理革命" and "推理"): 0.5 when both are significant this bucket,
//      - embeddings (model path): cosine of the nodes' mean [CLS] embeddings, mapped from
//        [embed_floor, 1] to [0, 1].
// 3. Topics: each cluster continues the live topic it overlaps most (weighted term overlap, or
//    shared sample posts) when that reaches topic_match, so topic ids stay stable across
//    buckets; clusters that continue the same topic are merged into it, and two live topics a
//    cluster overlaps both are merged into the older one (duplicates merged). Other clusters with
//    a significant node become new topics "t<N>". A topic without clusters for topic_ttl buckets
//    ends.
// 4. Heat, in the spirit of Weibo's rule (discussion + reach) x interaction rate, boosted by
//    significance and velocity:
//      D  = the topic's discussion: the largest weighted count of its terms this bucket
//      heat = D * (1 + reach_weight * mean log1p(followers))
//               * (1 + interaction_weight * log1p(mean reposts + comments + likes))
//               * (1 + max score / score_scale)
//               * (1 + velocity_weight * clamp((D - D_prev) / max(D_prev, 1), 0, 2))
// 5. Spam campaigns stay off the list: a topic whose posts this bucket are mostly from young
//    accounts (young share >= spam_young), or mostly near-duplicates from low-quality authors
//    (duplicate share >= spam_dup and mean quality < spam_quality), or few authors posting again
//    and again (authors / posts < spam_author_ratio with mean quality < spam_quality), is marked
//    spam for spam_hold buckets.
// 6. The list: live, non-spam topics with heat >= min_heat, authors >= min_authors, and an excess
//    over expectation (max over its terms of count - ewma) of at least fade_fraction of its peak
//    excess (a fading topic leaves), best heat first, at most top_k; a topic enters the list only
//    with min_nodes terms or pairs in the bucket (a story moves several words at once; a lone
//    word that rises is rarely one) of which one is novel (significant, with a count of at least
//    novelty_ratio times its expectation: common words that many stories use rise by less), and
//    not when absorb_share of its posts belong to another
//    listed topic (it joins that one) or, summed, to several (a word every story uses); prev_rank
//    is the topic's rank on the previous list.
// 7. Hashtag: chosen from the topic's sample posts with BestPhrase (hashtag.h) seeded with its
//    terms, normalised with NormalizeHashtag, when the topic first enters a list; kept while the
//    topic lives. Category: the most voted label of the topic's posts ("unknown" without votes);
//    sentiment: the mean of its posts'.
//
// Thread safety: none; one rank stage per pipeline.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "stream/records.h"
#include "stream/sink.h"

namespace surge::stream {

struct RankOptions {
  int top_k = 10;
  int max_terms = 6;  // terms per update
  int max_samples = 3;
  int hashtag_max_chars = 20;
  double cluster_threshold = 0.3;
  double topic_match = 0.3;
  double embed_floor = 0.5;
  int topic_ttl = 3;
  double reach_weight = 0.1;
  double interaction_weight = 0.2;
  double score_scale = 10;
  double velocity_weight = 0.5;
  double min_heat = 0;
  int64_t min_authors = 5;
  int min_nodes = 2;          // terms and pairs a topic needs in its first listed bucket
  double novelty_ratio = 3;   // a new topic needs a significant word at this x its expectation
  double absorb_share = 0.4;  // share of a new topic's posts in others that makes it theirs
  double fade_fraction = 0.1;
  double spam_young = 0.4;
  double spam_dup = 0.5;
  double spam_quality = 0.6;
  double spam_author_ratio = 0.4;
  int64_t spam_min_posts = 10;
  int spam_hold = 10;

  Status Validate() const;
};

struct RankStats {
  int64_t buckets = 0;
  int64_t live_topics = 0;
  int64_t topics_created = 0;
  int64_t topics_merged = 0;
  int64_t spam_topics = 0;  // topics ever marked spam
  int64_t replayed_batches = 0;
};

class RankStage {
 public:
  static Result<std::unique_ptr<RankStage>> Create(const RankOptions& options, int32_t shards);
  ~RankStage();

  // Adds one shard's batch; hot lists of buckets that are now complete are appended to `out`.
  Status Process(CandidateBatch batch, std::vector<HotList>* out);
  // End of input: ranks every bucket still waiting, in order.
  void Finish(std::vector<HotList>* out);

  Offsets& offsets() { return offsets_; }
  void Snapshot(std::string* out) const;
  Status Restore(std::string_view snapshot);

  RankStats stats() const;
  // (read wall ns, posts) of the buckets ranked by the last call, for latency accounting.
  const std::vector<std::pair<int64_t, int64_t>>& last_read_wall() const { return read_wall_; }
  const RankOptions& options() const { return o_; }

  struct Topic;

 private:
  RankStage(const RankOptions& options, int32_t shards);
  void RankBucket(int64_t bucket, std::vector<CandidateBatch> batches, HotList* out);

  RankOptions o_;
  int32_t shards_;
  std::map<int64_t, std::vector<CandidateBatch>> pending_;
  std::vector<int64_t> shard_max_;  // latest bucket seen per shard
  int64_t done_ = INT64_MIN;        // last bucket ranked
  int64_t next_id_ = 1;
  std::map<int64_t, std::unique_ptr<Topic>> topics_;  // live, by numeric id
  std::map<std::string, int> prev_ranks_;             // topic id -> rank on the last list
  std::shared_ptr<const std::vector<std::string>> categories_;
  std::vector<std::pair<int64_t, int64_t>> read_wall_;
  RankStats stats_;
  Offsets offsets_;
};

}  // namespace surge::stream
