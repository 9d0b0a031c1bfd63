#include "stream/rank.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/logging.h"
#include "stream/codec.h"
#include "stream/hashtag.h"
#include "stream/hll.h"

namespace surge::stream {
namespace {

constexpr uint8_t kRankSnapshotVersion = 1;
constexpr std::string_view kRankTag = "rank";

size_t CodePoints(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// How many times its expectation a candidate's count is (capped): what makes a word news rather
// than chatter, and so what identifies a story across buckets.
double Novelty(const Candidate& c) { return std::min(c.count / std::max(c.ewma, 1.0), 100.0); }

struct Node {
  const Candidate* c = nullptr;
  uint64_t terms[2] = {0, 0};
  int nterms = 1;
  double weight = 0;  // weighted count
};

// Containment of two nodes' post sets estimated from their bottom-k samples (ascending keys).
// Shared posts of two nodes from their bottom-k samples (ascending keys): on the hash range both
// samples cover they are exact, so |A∩B| and |A| are estimated there.
struct Overlap {
  size_t a = 0, b = 0, both = 0;  // samples of x, of y, and shared, on the common range
};
Overlap SampleOverlap(const Candidate& x, const Candidate& y) {
  Overlap o;
  const auto& a = x.samples;
  const auto& b = y.samples;
  if (a.empty() || b.empty()) return o;
  // A sample is complete when the node has no more posts than samples.
  uint64_t ta = x.posts > static_cast<int64_t>(a.size()) ? a.back().post_key : UINT64_MAX;
  uint64_t tb = y.posts > static_cast<int64_t>(b.size()) ? b.back().post_key : UINT64_MAX;
  uint64_t tau = std::min(ta, tb);
  while (o.a < a.size() && a[o.a].post_key <= tau) ++o.a;
  while (o.b < b.size() && b[o.b].post_key <= tau) ++o.b;
  for (size_t p = 0, q = 0; p < o.a && q < o.b;) {
    if (a[p].post_key == b[q].post_key) {
      ++o.both;
      ++p;
      ++q;
    } else if (a[p].post_key < b[q].post_key) {
      ++p;
    } else {
      ++q;
    }
  }
  return o;
}

// Containment |A∩B| / min(|A|, |B|), shrunk toward zero for small samples (two shared posts of
// two say little).
double Containment(const Candidate& x, const Candidate& y) {
  Overlap o = SampleOverlap(x, y);
  size_t m = std::min(o.a, o.b);
  if (m < 2) return 0;
  return static_cast<double>(o.both) / static_cast<double>(m + 1);
}

// The share of x's posts that are also y's, |A∩B| / |A|, shrunk the same way.
double Share(const Candidate& x, const Candidate& y) {
  Overlap o = SampleOverlap(x, y);
  if (o.a < 2) return 0;
  return static_cast<double>(o.both) / static_cast<double>(o.a + 1);
}

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.empty() || a.size() != b.size()) return 0;
  double d = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += double(a[i]) * b[i];
    na += double(a[i]) * a[i];
    nb += double(b[i]) * b[i];
  }
  return na > 0 && nb > 0 ? d / std::sqrt(na * nb) : 0;
}

bool SharesTerm(const Node& x, const Node& y) {
  for (int i = 0; i < x.nterms; ++i) {
    for (int j = 0; j < y.nterms; ++j) {
      if (x.terms[i] == y.terms[j]) return true;
    }
  }
  const std::string& s = x.c->text;
  const std::string& t = y.c->text;
  if (s.size() >= 4 && t.size() >= 4 && s != t &&
      (s.find(t) != std::string::npos || t.find(s) != std::string::npos)) {
    return true;
  }
  return false;
}

}  // namespace

struct RankStage::Topic {
  int64_t id = 0;
  std::string name;
  struct Term {
    double weight = 0;
    std::string text;
  };
  std::unordered_map<uint64_t, Term> terms;
  std::string hashtag;
  int64_t first_seen_ms = 0;
  int64_t last_bucket = 0;
  double peak_excess = 0;  // highest excess of a bucket over expectation
  double prev_d = 0;
  int64_t posts_total = 0;
  HyperLogLog authors{10};
  int64_t spam_until = INT64_MIN;
  bool significant = false;  // ever
  bool was_spam = false;
  bool listed = false;  // ever
  // The open bucket (not snapshotted: rebuilt per bucket).
  std::vector<int> nodes;
};

namespace {

// Folds `drop` into `keep` (a duplicate of the same story).
void Absorb(RankStage::Topic* keep, const RankStage::Topic& drop) {
  RankStage::Topic& k = *keep;
  for (const auto& [h, term] : drop.terms) {
    auto& x = k.terms[h];
    x.weight += term.weight;
    if (x.text.empty()) x.text = term.text;
  }
  (void)k.authors.Merge(drop.authors);
  k.posts_total += drop.posts_total;
  k.peak_excess = std::max(k.peak_excess, drop.peak_excess);
  k.first_seen_ms = std::min(k.first_seen_ms, drop.first_seen_ms);
  k.significant |= drop.significant;
  k.listed |= drop.listed;
  k.spam_until = std::max(k.spam_until, drop.spam_until);
  if (k.hashtag.empty()) k.hashtag = drop.hashtag;
  k.nodes.insert(k.nodes.end(), drop.nodes.begin(), drop.nodes.end());
}

// Same story by name: equal hashtags, or one's phrase inside the other's (two characters or more).
bool SameName(const std::string& a, const std::string& b) {
  if (a.size() < 2 || b.size() < 2) return false;
  std::string_view x(a), y(b);
  x = x.substr(1, x.size() - 2);
  y = y.substr(1, y.size() - 2);
  if (x == y) return true;
  if (x.size() < 6 || y.size() < 6) return false;
  return x.find(y) != std::string_view::npos || y.find(x) != std::string_view::npos;
}

}  // namespace

Status RankOptions::Validate() const {
  if (top_k < 1 || top_k > 1000)
    return InvalidArgumentError("top-k must be 1..1000, got {}", top_k);
  if (max_terms < 1 || max_samples < 0) {
    return InvalidArgumentError("terms per update must be >= 1 and samples >= 0");
  }
  if (hashtag_max_chars < 2 || hashtag_max_chars > 100) {
    return InvalidArgumentError("hashtag length must be 2..100 characters, got {}",
                                hashtag_max_chars);
  }
  if (topic_ttl < 0 || spam_hold < 0) return InvalidArgumentError("ttl and hold must be >= 0");
  return Status::Ok();
}

Result<std::unique_ptr<RankStage>> RankStage::Create(const RankOptions& options, int32_t shards) {
  SURGE_RETURN_IF_ERROR(options.Validate());
  if (shards < 1) return InvalidArgumentError("rank needs >= 1 detect shards, got {}", shards);
  return std::unique_ptr<RankStage>(new RankStage(options, shards));
}

RankStage::RankStage(const RankOptions& options, int32_t shards)
    : o_(options), shards_(shards), shard_max_(shards, INT64_MIN) {}

RankStage::~RankStage() = default;

Status RankStage::Process(CandidateBatch batch, std::vector<HotList>* out) {
  if (batch.shards != shards_ || batch.shard < 0 || batch.shard >= shards_) {
    return FailedPreconditionError(
        "rank expects {} detect shards but got a batch from shard {} of {}", shards_, batch.shard,
        batch.shards);
  }
  if (batch.bucket <= done_) {
    ++stats_.replayed_batches;
    return Status::Ok();
  }
  if (batch.categories) categories_ = batch.categories;
  int32_t shard = batch.shard;
  shard_max_[shard] = std::max(shard_max_[shard], batch.bucket);
  auto& slot = pending_[batch.bucket];
  bool replaced = false;
  for (auto& b : slot) {
    if (b.shard == shard) {
      b = std::move(batch);  // a replay of a bucket not ranked yet: same content
      replaced = true;
      ++stats_.replayed_batches;
      break;
    }
  }
  if (!replaced) slot.push_back(std::move(batch));
  int64_t complete = *std::min_element(shard_max_.begin(), shard_max_.end());
  read_wall_.clear();
  while (!pending_.empty() && pending_.begin()->first <= complete) {
    auto node = pending_.extract(pending_.begin());
    HotList list;
    RankBucket(node.key(), std::move(node.mapped()), &list);
    out->push_back(std::move(list));
  }
  return Status::Ok();
}

void RankStage::Finish(std::vector<HotList>* out) {
  read_wall_.clear();
  while (!pending_.empty()) {
    auto node = pending_.extract(pending_.begin());
    HotList list;
    RankBucket(node.key(), std::move(node.mapped()), &list);
    out->push_back(std::move(list));
  }
}

void RankStage::RankBucket(int64_t bucket, std::vector<CandidateBatch> batches, HotList* out) {
  done_ = bucket;
  ++stats_.buckets;
  const int64_t bucket_ms = batches.empty() ? 60000 : batches[0].bucket_ms;
  out->bucket = bucket;
  out->bucket_start_ms = bucket * bucket_ms;
  out->bucket_end_ms = (bucket + 1) * bucket_ms;
  for (auto& b : batches) {
    read_wall_.insert(read_wall_.end(), b.read_wall.begin(), b.read_wall.end());
  }

  // 1. Nodes.
  std::vector<Node> nodes;
  for (const auto& b : batches) {
    for (const Candidate& c : b.candidates) {
      Node n;
      n.c = &c;
      n.terms[0] = c.term_a;
      if (c.is_pair()) {
        n.terms[1] = c.term_b;
        n.nterms = 2;
      }
      n.weight = c.count;
      nodes.push_back(n);
    }
  }
  std::sort(nodes.begin(), nodes.end(), [](const Node& x, const Node& y) {
    if (x.c->significant != y.c->significant) return x.c->significant;
    if (x.c->score != y.c->score) return x.c->score > y.c->score;
    return x.c->key < y.c->key;
  });
  const size_t n = nodes.size();
  // Nodes whose posts come mostly from young accounts (a bot ring) only cluster with their like,
  // so a campaign cannot drag a real story off the list with it.
  std::vector<char> suspect(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Candidate& c = *nodes[i].c;
    suspect[i] = c.posts >= 5 && c.young >= o_.spam_young * static_cast<double>(c.posts);
  }
  // Embeddings count relative to this bucket's spread of cosines: a model (or an untrained one)
  // that maps every post near the same point must not merge everything.
  std::vector<double> cos(n * n, 0);
  double cos_mean = 0, cos_sd = 0;
  {
    double sum = 0, sum2 = 0;
    int64_t pairs = 0;
    for (size_t i = 0; i < n; ++i) {
      if (nodes[i].c->embedding.empty()) continue;
      for (size_t j = i + 1; j < n; ++j) {
        if (nodes[j].c->embedding.empty()) continue;
        double c = Cosine(nodes[i].c->embedding, nodes[j].c->embedding);
        cos[i * n + j] = cos[j * n + i] = c;
        sum += c;
        sum2 += c * c;
        ++pairs;
      }
    }
    if (pairs >= 10) {
      cos_mean = sum / pairs;
      cos_sd = std::sqrt(std::max(0.0, sum2 / pairs - cos_mean * cos_mean));
    }
  }
  auto sim = [&](size_t i, size_t j) {
    if (suspect[i] != suspect[j]) return 0.0;
    const Candidate& a = *nodes[i].c;
    const Candidate& b = *nodes[j].c;
    double s = Containment(a, b);
    if (a.significant && b.significant && SharesTerm(nodes[i], nodes[j])) s = std::max(s, 0.5);
    if (cos_sd > 0) {
      double c = cos[i * n + j];
      double z = (c - cos_mean) / cos_sd;
      if (c >= o_.embed_min_cos && z >= o_.embed_z) {
        s = std::max(s, std::min(1.0, o_.cluster_threshold + (z - o_.embed_z) / 4));
      }
    }
    return s;
  };

  // 2. Single-pass clustering.
  struct Cluster {
    std::vector<int> members;
  };
  std::vector<Cluster> clusters;
  for (size_t i = 0; i < n; ++i) {
    int best = -1;
    double best_sim = 0;
    for (size_t k = 0; k < clusters.size(); ++k) {
      const auto& m = clusters[k].members;
      double seed = sim(i, m[0]);
      double mean = 0;
      for (int j : m) mean += sim(i, j);
      mean /= static_cast<double>(m.size());
      double s = std::max(seed, mean);
      if (s > best_sim) {
        best_sim = s;
        best = static_cast<int>(k);
      }
    }
    if (best >= 0 && best_sim >= o_.cluster_threshold) {
      clusters[best].members.push_back(static_cast<int>(i));
    } else {
      clusters.push_back({{static_cast<int>(i)}});
    }
  }

  // 3. Clusters -> topics.
  auto cluster_terms = [&](const Cluster& cl) {
    std::unordered_map<uint64_t, double> w;
    for (int i : cl.members) {
      for (int t = 0; t < nodes[i].nterms; ++t) {
        double& x = w[nodes[i].terms[t]];
        x = std::max(x, Novelty(*nodes[i].c));
      }
    }
    return w;
  };
  std::vector<std::unordered_map<uint64_t, double>> cterms;
  for (const auto& cl : clusters) cterms.push_back(cluster_terms(cl));
  struct Match {
    double sim;
    size_t cluster;
    int64_t topic;
  };
  std::vector<Match> matches;
  for (size_t k = 0; k < clusters.size(); ++k) {
    double csum = 0;
    for (const auto& [h, w] : cterms[k]) csum += w;
    for (const auto& [id, t] : topics_) {
      double tsum = 0;
      for (const auto& [h, term] : t->terms) tsum += term.weight;
      double cin = 0, tin = 0;
      for (const auto& [h, w] : cterms[k]) {
        auto it = t->terms.find(h);
        if (it == t->terms.end()) continue;
        cin += w;
        tin += it->second.weight;
      }
      if (cin <= 0 || csum <= 0 || tsum <= 0) continue;
      double s = std::sqrt((cin / csum) * (tin / tsum));
      if (s >= o_.topic_match) matches.push_back({s, k, id});
    }
  }
  std::sort(matches.begin(), matches.end(), [](const Match& a, const Match& b) {
    if (a.sim != b.sim) return a.sim > b.sim;
    if (a.cluster != b.cluster) return a.cluster < b.cluster;
    return a.topic < b.topic;
  });
  std::vector<int64_t> assigned(clusters.size(), 0);
  for (const Match& m : matches) {
    if (assigned[m.cluster] == 0) assigned[m.cluster] = m.topic;
  }
  // A cluster continuing two live topics merges them into the older one.
  for (const Match& m : matches) {
    int64_t keep = std::min(assigned[m.cluster], m.topic);
    int64_t drop = std::max(assigned[m.cluster], m.topic);
    if (keep == drop || !topics_.count(keep) || !topics_.count(drop)) continue;
    Absorb(topics_[keep].get(), *topics_[drop]);
    topics_.erase(drop);
    ++stats_.topics_merged;
    for (auto& a : assigned) {
      if (a == drop) a = keep;
    }
  }
  for (auto& [id, t] : topics_) t->nodes.clear();
  for (size_t k = 0; k < clusters.size(); ++k) {
    bool any_sig = false;
    for (int i : clusters[k].members) any_sig |= nodes[i].c->significant;
    int64_t id = assigned[k];
    if (id == 0 || !topics_.count(id)) {
      if (!any_sig) continue;  // leftovers of a topic that has ended
      auto t = std::make_unique<Topic>();
      t->id = next_id_++;
      t->name = "t" + std::to_string(t->id);
      int64_t first = INT64_MAX;
      for (int i : clusters[k].members) first = std::min(first, nodes[i].c->first_seen_ms);
      t->first_seen_ms = first == INT64_MAX ? out->bucket_start_ms : first;
      id = t->id;
      topics_.emplace(id, std::move(t));
      ++stats_.topics_created;
    }
    Topic& t = *topics_[id];
    t.significant |= any_sig;
    for (int i : clusters[k].members) t.nodes.push_back(i);
  }

  // 4-6. Metrics, spam, list.
  struct Scored {
    Topic* t;
    double heat;
    double d;
    int rep;
    int64_t authors;
    bool lone;  // a new topic of fewer than min_nodes nodes
  };
  std::vector<Scored> listed;
  for (auto& [id, tp] : topics_) {
    Topic& t = *tp;
    if (t.nodes.empty()) continue;
    t.last_bucket = bucket;
    // Term weights decay and take this bucket's.
    for (auto& [h, term] : t.terms) term.weight *= 0.5;
    double d = 0, max_score = 0, excess = 0, novelty = 0;
    int rep = -1;
    double rep_novelty = 0;
    bool has_term_node = false;
    for (int i : t.nodes) has_term_node |= !nodes[i].c->is_pair();
    int64_t posts = 0, young = 0, dups = 0;
    double quality = 0;
    HyperLogLog authors(10);
    for (int i : t.nodes) {
      const Candidate& c = *nodes[i].c;
      max_score = std::max(max_score, c.score);
      if (c.significant) novelty = std::max(novelty, c.count / std::max(c.ewma, 1.0));
      (void)authors.Merge(c.authors);
      auto add = [&](uint64_t h, const std::string& text) {
        auto& x = t.terms[h];
        x.weight += Novelty(c);
        if (x.text.empty()) x.text = text;
      };
      add(c.term_a, c.text);
      if (c.is_pair()) add(c.term_b, c.text_b);
      if (c.is_pair() && has_term_node) continue;
      posts += c.posts;
      young += c.young;
      dups += c.duplicates;
      quality += c.quality_sum;
      // Chatter attached to a story (words every story's posts use, which rise with all of them)
      // must not speak for it: the representative is the story's most distinctive word, the one
      // furthest above its expectation (ties: more posts).
      if (Novelty(c) >= 1.5) excess = std::max(excess, c.count - c.ewma);
      const double nv = Novelty(c);
      if (rep < 0 || nv > rep_novelty || (nv == rep_novelty && c.count > d)) {
        d = c.count;
        rep = i;
        rep_novelty = nv;
      }
    }
    if (rep < 0) continue;
    const Candidate& r = *nodes[rep].c;
    const double pp = std::max<int64_t>(r.posts, 1);
    const double reach_pp = r.reach / pp;
    const double eng_pp = r.engagement / pp;
    const double velocity = std::clamp((d - t.prev_d) / std::max(t.prev_d, 1.0), 0.0, 2.0);
    double heat =
        d * (1 + o_.reach_weight * reach_pp) * (1 + o_.interaction_weight * std::log1p(eng_pp)) *
        (1 + std::max(0.0, max_score) / o_.score_scale) * (1 + o_.velocity_weight * velocity);
    t.prev_d = d;
    t.peak_excess = std::max(t.peak_excess, excess);
    // Posts and authors from the same node: the one most posts were seen for.
    int most = rep;
    for (int i : t.nodes) {
      if (nodes[i].c->posts > nodes[most].c->posts) most = i;
    }
    t.posts_total += nodes[most].c->posts;
    (void)t.authors.Merge(nodes[most].c->authors);
    const int64_t bucket_authors = std::llround(authors.Estimate());
    if (posts >= o_.spam_min_posts) {
      const double ps = static_cast<double>(posts);
      const double mean_q = quality / ps;
      bool spam = young / ps >= o_.spam_young ||
                  (dups / ps >= o_.spam_dup && mean_q < o_.spam_quality) ||
                  (bucket_authors / static_cast<double>(r.posts) < o_.spam_author_ratio &&
                   mean_q < o_.spam_quality);
      if (spam) {
        if (!t.was_spam) ++stats_.spam_topics;
        t.was_spam = true;
        t.spam_until = bucket + o_.spam_hold;
        SURGE_LOG_DEBUG(
            "rank: topic {} ({}) kept off the list as spam: young {:.2f}, dup {:.2f}, "
            "quality {:.2f}, authors/posts {:.2f}",
            t.name, r.text, young / ps, dups / ps, mean_q,
            bucket_authors / static_cast<double>(r.posts));
      }
    }
    if (Logger().should_log(spdlog::level::trace)) {
      std::string desc;
      for (int i : t.nodes) {
        const Candidate& c = *nodes[i].c;
        desc +=
            fmt::format(" [{}{}{} x={:.1f} e={:.1f} s={:.1f}{}]", c.text, c.is_pair() ? "+" : "",
                        c.text_b, c.count, c.ewma, c.score, c.significant ? "*" : "");
      }
      SURGE_LOG_TRACE(
          "rank: bucket {} {} heat {:.0f} excess {:.1f}/{:.1f} novelty {:.1f} authors {} "
          "listed {} spam {}:{}",
          bucket, t.name, heat, excess, t.peak_excess, novelty, bucket_authors, t.listed,
          bucket <= t.spam_until, desc);
    }
    if (bucket <= t.spam_until || !t.significant) continue;
    if (!t.listed &&
        (novelty < o_.novelty_ratio ||
         (static_cast<int>(t.nodes.size()) < o_.min_nodes && novelty < o_.lone_novelty))) {
      continue;
    }
    if (bucket_authors < o_.min_authors || heat < o_.min_heat) continue;
    if (excess <= 0 || excess < o_.fade_fraction * t.peak_excess) continue;
    listed.push_back({&t, heat, d, rep, bucket_authors,
                      !t.listed && static_cast<int>(t.nodes.size()) < o_.min_nodes});
  }
  std::sort(listed.begin(), listed.end(), [](const Scored& a, const Scored& b) {
    if (a.heat != b.heat) return a.heat > b.heat;
    return a.t->id < b.t->id;
  });
  // A topic not listed before whose posts mostly belong to other topics is not a story of its
  // own: a word of one other story joins it; a word shared by several (boilerplate that every
  // story uses) stays off the list.
  {
    std::vector<Scored> own;
    std::vector<char> gone(listed.size(), 0);
    for (size_t i = 0; i < listed.size(); ++i) {
      Topic& t = *listed[i].t;
      if (t.listed) continue;
      const Candidate& rep = *nodes[listed[i].rep].c;
      double total = 0, best = 0;
      size_t best_j = 0;
      for (size_t j = 0; j < listed.size(); ++j) {
        if (j == i || gone[j]) continue;
        double share = 0;
        for (int u : listed[j].t->nodes) share = std::max(share, Share(rep, *nodes[u].c));
        total += share;
        if (share > best) {
          best = share;
          best_j = j;
        }
      }
      if (best >= o_.absorb_share) {
        SURGE_LOG_DEBUG("rank: topic {} ({}) joins {}: {:.2f} of its posts are there", t.name,
                        rep.text, listed[best_j].t->name, best);
        Absorb(listed[best_j].t, t);
        ++stats_.topics_merged;
        gone[i] = 1;
      } else if (total >= o_.absorb_share) {
        SURGE_LOG_DEBUG("rank: topic {} ({}) is shared by other topics ({:.2f}); not listed",
                        t.name, rep.text, total);
        gone[i] = 2;
      }
    }
    for (size_t i = 0; i < listed.size(); ++i) {
      if (gone[i] == 1) topics_.erase(listed[i].t->id);
      if (!gone[i]) own.push_back(listed[i]);
    }
    listed = std::move(own);
  }
  // Names, then duplicates merged: a topic named like a hotter one is the same story.
  auto ordered_nodes = [&](const Topic& t) {
    std::vector<int> ordered = t.nodes;
    std::sort(ordered.begin(), ordered.end(), [&](int a, int b) {
      if (nodes[a].weight != nodes[b].weight) return nodes[a].weight > nodes[b].weight;
      return nodes[a].c->key < nodes[b].c->key;
    });
    return ordered;
  };
  std::vector<Scored> kept;
  for (Scored& sc : listed) {
    Topic& t = *sc.t;
    if (t.hashtag.empty()) {
      std::vector<int> ordered = ordered_nodes(t);
      std::vector<std::string_view> texts;
      std::vector<uint64_t> seen;
      std::vector<SeedTerm> seeds;
      for (int i : ordered) {
        const Candidate& c = *nodes[i].c;
        for (const Sample& s : c.samples) {
          if (texts.size() >= 96) break;
          if (std::find(seen.begin(), seen.end(), s.post_key) != seen.end()) continue;
          seen.push_back(s.post_key);
          texts.push_back(s.text);
        }
        for (const std::string* text : {&c.text, &c.text_b}) {
          if (text->empty() || seeds.size() >= 8) continue;
          bool seen_seed = false;
          for (const SeedTerm& st : seeds) seen_seed |= st.text == *text;
          if (!seen_seed) seeds.push_back({*text, std::max(c.score, 0.0) + 1});
        }
      }
      PhraseOptions po;
      po.max_chars = o_.hashtag_max_chars;
      Phrase p = BestPhrase(texts, seeds, po);
      std::string tag = NormalizeHashtag(p.text, o_.hashtag_max_chars);
      if (tag.empty() && !seeds.empty())
        tag = NormalizeHashtag(seeds[0].text, o_.hashtag_max_chars);
      if (tag.empty()) tag = "#" + t.name + "#";
      // A lone word is a story when it sits in a phrase its posts share, not on its own.
      size_t longest_seed = 0;
      for (const SeedTerm& st : seeds) longest_seed = std::max(longest_seed, CodePoints(st.text));
      if (sc.lone && CodePoints(p.text) <= longest_seed) {
        SURGE_LOG_DEBUG("rank: lone word {} of {} grows into no phrase; not listed",
                        seeds.empty() ? "" : seeds[0].text, t.name);
        continue;
      }
      t.hashtag = tag;
    }
    Scored* same = nullptr;
    for (Scored& k : kept) {
      if (SameName(k.t->hashtag, t.hashtag)) same = &k;
    }
    if (same == nullptr) {
      kept.push_back(sc);
      continue;
    }
    // Keep the older id (and its name) in the hotter topic's place.
    Topic* older = same->t->id < t.id ? same->t : &t;
    Topic* younger = older == same->t ? &t : same->t;
    Absorb(older, *younger);
    same->t = older;
    ++stats_.topics_merged;
    topics_.erase(younger->id);
  }
  listed = std::move(kept);
  if (listed.size() > static_cast<size_t>(o_.top_k)) listed.resize(o_.top_k);

  std::map<std::string, int> ranks;
  for (size_t k = 0; k < listed.size(); ++k) {
    Topic& t = *listed[k].t;
    std::vector<int> ordered = ordered_nodes(t);
    if (Logger().should_log(spdlog::level::debug)) {
      std::string desc;
      for (int i : ordered) {
        const Candidate& c = *nodes[i].c;
        desc += fmt::format(" [{}{}{} x={:.1f} s={:.1f} posts={} samples={}]", c.text,
                            c.is_pair() ? "+" : "", c.text_b, c.count, c.score, c.posts,
                            c.samples.size());
      }
      SURGE_LOG_DEBUG("rank: bucket {} #{} {} heat {:.1f}:{}", bucket, k + 1, t.name,
                      listed[k].heat, desc);
    }
    TrendUpdate u;
    u.topic_id = t.name;
    u.hashtag = t.hashtag;
    u.rank = static_cast<int>(k) + 1;
    if (auto it = prev_ranks_.find(t.name); it != prev_ranks_.end()) u.prev_rank = it->second;
    u.heat = listed[k].heat;
    for (int i : ordered) {
      const Candidate& c = *nodes[i].c;
      for (const std::string* s : {&c.text, &c.text_b}) {
        if (s->empty() || static_cast<int>(u.terms.size()) >= o_.max_terms) continue;
        if (std::find(u.terms.begin(), u.terms.end(), *s) == u.terms.end()) u.terms.push_back(*s);
      }
    }
    std::vector<double> votes;
    std::array<double, 3> sent = {0, 0, 0};
    for (int i : t.nodes) {
      const Candidate& c = *nodes[i].c;
      if (votes.size() < c.category.size()) votes.resize(c.category.size(), 0);
      for (size_t j = 0; j < c.category.size(); ++j) votes[j] += c.category[j];
      for (int j = 0; j < 3; ++j) sent[j] += c.sentiment[j];
    }
    u.category = "unknown";
    if (!votes.empty()) {
      size_t best = std::max_element(votes.begin(), votes.end()) - votes.begin();
      if (votes[best] > 0 && categories_ && best < categories_->size()) {
        u.category = (*categories_)[best];
      }
    }
    double ssum = sent[0] + sent[1] + sent[2];
    if (ssum > 0) u.sentiment = {sent[0] / ssum, sent[1] / ssum, sent[2] / ssum};
    u.posts = t.posts_total;
    u.authors = std::llround(t.authors.Estimate());
    u.first_seen_ms = t.first_seen_ms;
    u.updated_ms = out->bucket_end_ms;
    // Samples: posts that name the topic first (its hashtag, then one of its listed terms), from
    // the representative and then every other node of the cluster; a word that bursts with many
    // stories (a template phrase, say) can sit in a cluster without lending it its posts.
    std::vector<const Sample*> picked;
    {
      std::string_view core = u.hashtag;
      if (core.size() >= 2 && core.front() == '#' && core.back() == '#') {
        core = core.substr(1, core.size() - 2);
      }
      std::vector<int> from = {listed[k].rep};
      for (int i : ordered) {
        if (i != listed[k].rep) from.push_back(i);
      }
      const size_t want = static_cast<size_t>(std::max(o_.max_samples, o_.sample_posts));
      std::vector<uint64_t> seen;
      for (int pass = 0; pass < 3 && picked.size() < want; ++pass) {
        for (int i : from) {
          for (const Sample& smp : nodes[i].c->samples) {
            if (picked.size() >= want) break;
            if (std::find(seen.begin(), seen.end(), smp.post_key) != seen.end()) continue;
            bool fits = pass == 2;
            if (pass == 0) fits = !core.empty() && smp.text.find(core) != std::string::npos;
            if (pass == 1) {
              for (const std::string& term : u.terms) {
                fits |= smp.text.find(term) != std::string::npos;
              }
            }
            if (!fits) continue;
            seen.push_back(smp.post_key);
            picked.push_back(&smp);
          }
        }
      }
    }
    for (const Sample* smp : picked) {
      if (static_cast<int>(u.samples.size()) >= o_.max_samples) break;
      u.samples.push_back(smp->post_id);
    }
    ranks[t.name] = u.rank;
    t.listed = true;
    std::vector<Sample> posts;
    for (const Sample* smp : picked) {
      if (static_cast<int>(posts.size()) >= o_.sample_posts) break;
      posts.push_back(*smp);
    }
    out->samples.push_back(std::move(posts));
    out->updates.push_back(std::move(u));
  }
  for (const auto& [name, r] : prev_ranks_) {
    if (!ranks.count(name)) out->left_list.push_back(name);
  }
  prev_ranks_ = std::move(ranks);
  // Topics without clusters for too long end.
  for (auto it = topics_.begin(); it != topics_.end();) {
    if (bucket - it->second->last_bucket > o_.topic_ttl) {
      it = topics_.erase(it);
    } else {
      ++it;
    }
  }
  stats_.live_topics = static_cast<int64_t>(topics_.size());
}

RankStats RankStage::stats() const {
  RankStats s = stats_;
  s.live_topics = static_cast<int64_t>(topics_.size());
  return s;
}

void RankStage::Snapshot(std::string* out) const {
  std::string payload;
  ByteWriter w(&payload);
  w.Svarint(shards_);
  w.Varint(pending_.size());
  for (const auto& [bucket, batches] : pending_) {
    w.Svarint(bucket);
    w.Varint(batches.size());
    for (const auto& b : batches) {
      std::string bytes;
      EncodeCandidateBatch(b, &bytes);
      w.Str(bytes);
    }
  }
  for (int64_t m : shard_max_) w.Svarint(m);
  w.Svarint(done_);
  w.Svarint(next_id_);
  w.Varint(topics_.size());
  for (const auto& [id, t] : topics_) {
    w.Svarint(t->id);
    std::vector<std::pair<uint64_t, const Topic::Term*>> terms;
    for (const auto& [h, term] : t->terms) terms.emplace_back(h, &term);
    std::sort(terms.begin(), terms.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    w.Varint(terms.size());
    for (const auto& [h, term] : terms) {
      w.U64(h);
      w.F64(term->weight);
      w.Str(term->text);
    }
    w.Str(t->hashtag);
    w.Svarint(t->first_seen_ms);
    w.Svarint(t->last_bucket);
    w.F64(t->peak_excess);
    w.F64(t->prev_d);
    w.Svarint(t->posts_total);
    t->authors.Serialize(&w);
    w.Svarint(t->spam_until);
    w.U8((t->significant ? 1 : 0) | (t->was_spam ? 2 : 0) | (t->listed ? 4 : 0));
  }
  w.Varint(prev_ranks_.size());
  for (const auto& [name, r] : prev_ranks_) {
    w.Str(name);
    w.Svarint(r);
  }
  WriteLabels(categories_.get(), &w);
  for (int64_t v : {stats_.buckets, stats_.topics_created, stats_.topics_merged, stats_.spam_topics,
                    stats_.replayed_batches}) {
    w.Svarint(v);
  }
  WriteOffsets(offsets_, &w);
  SealSnapshot(kRankTag, kRankSnapshotVersion, payload, out);
}

Status RankStage::Restore(std::string_view snapshot) {
  SURGE_ASSIGN_OR_RETURN(Frame frame, OpenSnapshot(snapshot, kRankTag, kRankSnapshotVersion));
  ByteReader r(frame.payload, "rank snapshot");
  int32_t shards = static_cast<int32_t>(r.Svarint());
  SURGE_RETURN_IF_ERROR(r.status());
  if (shards != shards_) {
    return InvalidArgumentError("rank snapshot for {} detect shards restored into one for {}",
                                shards, shards_);
  }
  std::map<int64_t, std::vector<CandidateBatch>> pending;
  size_t np = r.Count(2, "pending buckets");
  for (size_t i = 0; i < np && r.ok(); ++i) {
    int64_t bucket = r.Svarint();
    size_t nb = r.Count(1, "pending batches");
    auto& v = pending[bucket];
    for (size_t k = 0; k < nb && r.ok(); ++k) {
      auto b = DecodeCandidateBatch(r.Str());
      if (!b.ok()) return b.status().WithContext("rank snapshot");
      v.push_back(std::move(*b));
    }
  }
  std::vector<int64_t> shard_max(shards_);
  for (auto& m : shard_max) m = r.Svarint();
  int64_t done = r.Svarint();
  int64_t next_id = r.Svarint();
  std::map<int64_t, std::unique_ptr<Topic>> topics;
  size_t nt = r.Count(10, "topics");
  for (size_t i = 0; i < nt && r.ok(); ++i) {
    auto t = std::make_unique<Topic>();
    t->id = r.Svarint();
    t->name = "t" + std::to_string(t->id);
    size_t nterms = r.Count(17, "topic terms");
    for (size_t k = 0; k < nterms && r.ok(); ++k) {
      uint64_t h = r.U64();
      Topic::Term term;
      term.weight = r.F64();
      term.text = r.Str();
      t->terms.emplace(h, std::move(term));
    }
    t->hashtag = r.Str();
    t->first_seen_ms = r.Svarint();
    t->last_bucket = r.Svarint();
    t->peak_excess = r.F64();
    t->prev_d = r.F64();
    t->posts_total = r.Svarint();
    SURGE_RETURN_IF_ERROR(r.status());
    SURGE_ASSIGN_OR_RETURN(t->authors, HyperLogLog::Deserialize(&r));
    t->spam_until = r.Svarint();
    uint8_t flags = r.U8();
    t->significant = flags & 1;
    t->was_spam = flags & 2;
    t->listed = flags & 4;
    int64_t id = t->id;
    if (id <= 0 || id >= next_id) r.Fail(fmt::format("topic id {} outside 1..{}", id, next_id - 1));
    topics.emplace(id, std::move(t));
  }
  std::map<std::string, int> prev;
  size_t nr = r.Count(2, "ranks");
  for (size_t i = 0; i < nr && r.ok(); ++i) {
    std::string name(r.Str());
    prev[name] = static_cast<int>(r.Svarint());
  }
  auto cats = ReadLabels(&r);
  RankStats st;
  for (int64_t* v : {&st.buckets, &st.topics_created, &st.topics_merged, &st.spam_topics,
                     &st.replayed_batches}) {
    *v = r.Svarint();
  }
  Offsets offsets = ReadOffsets(&r);
  SURGE_RETURN_IF_ERROR(r.Finish());
  pending_ = std::move(pending);
  shard_max_ = std::move(shard_max);
  done_ = done;
  next_id_ = next_id;
  topics_ = std::move(topics);
  prev_ranks_ = std::move(prev);
  categories_ = std::move(cats);
  stats_ = st;
  offsets_ = std::move(offsets);
  return Status::Ok();
}

}  // namespace surge::stream
