#include "stream/annotate.h"

#include <gtest/gtest.h>

#include "resources.h"
#include "stream/hash.h"
#include "synthetic.h"

namespace surge::stream {
namespace {

using testing::LexicalResources;

Post MakePost(std::string id, std::string text) {
  Post p;
  p.id = std::move(id);
  p.ts_ms = 1764676800000;
  p.user.id = "u1";
  p.user.followers = 500;
  p.user.created_ms = p.ts_ms - 1000LL * 86400000;
  p.text = std::move(text);
  return p;
}

const TermOcc* FindTerm(const AnnotatedBlock& b, const AnnotatedPost& p, std::string_view text) {
  for (size_t k = 0; k < p.term_count; ++k) {
    const TermOcc& t = b.terms[p.term_begin + k];
    if (b.Text(t) == text) return &t;
  }
  return nullptr;
}

TEST(AnnotateTest, TermsKeepTheirPlaceInThePost) {
  auto a = Annotator::Create(LexicalResources());
  ASSERT_TRUE(a.ok());
  AnnotatedBlock b;
  (*a)->AnnotatePost(MakePost("p1", "今天AI推理革命来了，大家怎么看？"), &b);
  ASSERT_EQ(b.posts.size(), 1u);
  const AnnotatedPost& p = b.posts[0];
  EXPECT_EQ(b.Id(p), "p1");
  EXPECT_EQ(b.PostText(p), "今天AI推理革命来了，大家怎么看？");
  EXPECT_EQ(p.key, HashBytes("p1"));
  const TermOcc* ai = FindTerm(b, p, "AI");
  const TermOcc* tl = FindTerm(b, p, "推理");
  const TermOcc* gm = FindTerm(b, p, "革命");
  ASSERT_TRUE(ai && tl && gm);
  EXPECT_EQ(ai->hash, HashBytes("ai"));  // hashed lower-cased
  EXPECT_EQ(tl->ordinal, ai->ordinal + 1);
  EXPECT_EQ(gm->ordinal, tl->ordinal + 1);
  // Punctuation and single characters are not terms.
  EXPECT_EQ(FindTerm(b, p, "，"), nullptr);
  EXPECT_EQ(FindTerm(b, p, "看"), nullptr);
  int top = 0;
  for (size_t k = 0; k < p.term_count; ++k)
    top += (b.terms[p.term_begin + k].flags & TermOcc::kTop) != 0;
  EXPECT_EQ(top, std::min<int>(p.term_count, LexicalResources()->options().top_terms));
}

TEST(AnnotateTest, NearIdenticalTextsShareTheirSimHash) {
  auto a = Annotator::Create(LexicalResources());
  AnnotatedBlock b;
  (*a)->AnnotatePost(MakePost("a", "限时秒杀名牌包，优惠券私信领取，手慢无"), &b);
  (*a)->AnnotatePost(MakePost("b", "限时秒杀名牌包！！优惠券私信领取~手慢无😀"), &b);
  (*a)->AnnotatePost(MakePost("c", "今天的天气很好，我们去公园散步吧"), &b);
  EXPECT_LE(text::HammingDistance(b.posts[0].simhash, b.posts[1].simhash), 3);
  EXPECT_GT(text::HammingDistance(b.posts[0].simhash, b.posts[2].simhash), 10);
}

TEST(AnnotateTest, AuthorQualityFavoursEstablishedAccounts) {
  auto a = Annotator::Create(LexicalResources());
  AnnotatedBlock b;
  Post old = MakePost("o", "比赛");
  Post verified = old;
  verified.user.verified = true;
  verified.user.followers = 0;
  Post young = old;
  young.user.created_ms = young.ts_ms - 2LL * 86400000;
  young.user.followers = 3;
  Post unknown = old;
  unknown.user.created_ms = 0;
  for (const Post& p : {old, verified, young, unknown}) (*a)->AnnotatePost(p, &b);
  EXPECT_FLOAT_EQ(b.posts[1].quality, 1.0f);
  EXPECT_GT(b.posts[0].quality, 0.9f);
  EXPECT_LT(b.posts[2].quality, 0.3f);
  EXPECT_TRUE(b.posts[2].flags & AnnotatedPost::kYoungAccount);
  EXPECT_FALSE(b.posts[0].flags & AnnotatedPost::kYoungAccount);
  EXPECT_LT(b.posts[3].quality, b.posts[0].quality);
}

TEST(AnnotateTest, LexicalCategoryAndSentiment) {
  auto a = Annotator::Create(LexicalResources());
  AnnotatedBlock b;
  (*a)->AnnotatePost(MakePost("s", "足球比赛冠军太棒了，开心"), &b);
  (*a)->AnnotatePost(MakePost("n", "随便写点什么东西"), &b);
  const auto& cats = *LexicalResources()->categories();
  ASSERT_GE(b.posts[0].category, 0);
  EXPECT_EQ(cats[b.posts[0].category], "体育");
  EXPECT_EQ(b.posts[0].sentiment[0], 1.0f);
  EXPECT_EQ(b.posts[1].category, -1);
  EXPECT_EQ(b.posts[1].sentiment[1], 1.0f);
}

TEST(AnnotateTest, BadRecordsBecomeDeadLettersAndTheRestGoesOn) {
  auto a = Annotator::Create(LexicalResources());
  RecordBlock in;
  std::vector<std::string> lines = {PostToJson(MakePost("good1", "第一条")), "not json",
                                    R"({"id":"x","ts":"soon","user":{"id":"u"},"text":"t"})",
                                    PostToJson(MakePost("good2", "第二条"))};
  int64_t offset = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    RawRecord r;
    r.offset = static_cast<uint32_t>(in.data.size());
    r.size = static_cast<uint32_t>(lines[i].size());
    r.line = static_cast<int64_t>(i + 1);
    r.position = {0, offset};
    offset += static_cast<int64_t>(lines[i].size()) + 1;
    in.data += lines[i];
    in.raw.push_back(r);
  }
  auto dead = DeadLetterSink::Open("");
  AnnotatedBlock out;
  ASSERT_TRUE((*a)->Annotate(in, "in.jsonl", dead->get(), &out).ok());
  ASSERT_EQ(out.posts.size(), 2u);
  EXPECT_EQ(out.Id(out.posts[1]), "good2");
  EXPECT_EQ((*dead)->total(), 2);
  EXPECT_EQ((*dead)->counts()["json"], 1);
  EXPECT_EQ((*dead)->counts()["bad_type"], 1);
  EXPECT_EQ(out.offsets.next.at(0), offset);  // every record, good or bad, is consumed
}

TEST(AnnotateTest, LearnedPhrasesBecomeTermsOfTheirOwn) {
  AnnotateOptions o;
  o.new_word.sample_every = 1;
  o.new_word.refresh_every = 1000000;
  auto res = AnnotateResources::Create(o);
  ASSERT_TRUE(res.ok());
  NewWordLearner* learner = (*res)->learner();
  ASSERT_NE(learner, nullptr);
  testing::StreamSpec spec;
  spec.buckets = 2;
  spec.background_per_bucket = 400;
  spec.bursts = {{"AI推理革命", {"芯片", "算力"}, 0, 200, 0, 2}};
  for (const Post& p : testing::MakeStream(spec)) learner->Offer(p.text);
  learner->Refresh();
  auto set = learner->Current();
  bool found = false;
  for (const auto& [k, v] : set->by_first) {
    for (const auto& e : v) found |= e.text == "AI推理革命";
  }
  ASSERT_TRUE(found);
  auto a = Annotator::Create(*res);
  AnnotatedBlock b;
  (*a)->AnnotatePost(MakePost("p", "没想到AI推理革命来得这么快"), &b);
  const TermOcc* t = FindTerm(b, b.posts[0], "AI推理革命");
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->flags & TermOcc::kNewWord);
  EXPECT_EQ(t->span, 3);
  EXPECT_EQ(t->hash, HashBytes("ai推理革命"));
  EXPECT_NE(FindTerm(b, b.posts[0], "推理"), nullptr);  // the pieces stay terms
}

}  // namespace
}  // namespace surge::stream
