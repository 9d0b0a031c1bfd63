#include "stream/post.h"

#include <gtest/gtest.h>

#include "stream/trend.h"

namespace surge::stream {
namespace {

TEST(PostTest, ParsesTheWireFormat) {
  PostParser parser;
  auto p = parser.Parse(
      R"({"id":"p1","ts":1764669600123,"user":{"id":"u1","followers":1234,"verified":true,)"
      R"("created":1600000000000},"text":"今天AI推理革命\n来了","repost_of":"p0","reposts":3,)"
      R"("comments":4,"likes":5,"extra":{"ignored":[1,2]}})");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->id, "p1");
  EXPECT_EQ(p->ts_ms, 1764669600123);
  EXPECT_EQ(p->user.id, "u1");
  EXPECT_EQ(p->user.followers, 1234);
  EXPECT_TRUE(p->user.verified);
  EXPECT_EQ(p->user.created_ms, 1600000000000);
  EXPECT_EQ(p->text, "今天AI推理革命\n来了");
  ASSERT_TRUE(p->repost_of.has_value());
  EXPECT_EQ(*p->repost_of, "p0");
  EXPECT_EQ(p->reposts, 3);
  EXPECT_EQ(p->comments, 4);
  EXPECT_EQ(p->likes, 5);
}

TEST(PostTest, OptionalFieldsDefault) {
  PostParser parser;
  auto p = parser.Parse(R"({"id":"p2","ts":1.7e12,"user":{"id":"u"},"text":"","repost_of":null})");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->ts_ms, 1700000000000);
  EXPECT_FALSE(p->repost_of.has_value());
  EXPECT_EQ(p->user.followers, 0);
  EXPECT_FALSE(p->user.verified);
}

TEST(PostTest, RoundTripsThroughJson) {
  Post p;
  p.id = "id \"quoted\" \\ back";
  p.ts_ms = -5;
  p.user = {"用户", 7, true, 123};
  p.text = "tab\tnl\nctl\x01 emoji 😀 中文";
  p.repost_of = "p9";
  p.reposts = 1;
  p.comments = 2;
  p.likes = 3;
  PostParser parser;
  auto q = parser.Parse(PostToJson(p));
  ASSERT_TRUE(q.ok()) << q.status().ToString() << " in " << PostToJson(p);
  EXPECT_EQ(q->id, p.id);
  EXPECT_EQ(q->ts_ms, p.ts_ms);
  EXPECT_EQ(q->user.id, p.user.id);
  EXPECT_EQ(q->user.followers, 7);
  EXPECT_TRUE(q->user.verified);
  EXPECT_EQ(q->user.created_ms, 123);
  EXPECT_EQ(q->text, p.text);
  EXPECT_EQ(q->repost_of, p.repost_of);
  EXPECT_EQ(q->likes, 3);
}

TEST(PostTest, InvalidUtf8IsReplacedWhenWritten) {
  std::string out;
  AppendJsonString(
      "a\xff"
      "b",
      &out);
  EXPECT_EQ(out,
            "\"a\xEF\xBF\xBD"
            "b\"");
}

struct BadCase {
  const char* json;
  const char* kind;
  const char* mentions;
};

TEST(PostTest, BadRecordsGetAClearErrorAndAKind) {
  const BadCase cases[] = {
      {"not json", "json", ""},
      {"[1,2]", "bad_type", "object"},
      {R"({"ts":1,"user":{"id":"u"},"text":"x"})", "missing_field", "'id'"},
      {R"({"id":"p","user":{"id":"u"},"text":"x"})", "missing_field", "'ts'"},
      {R"({"id":"p","ts":1,"text":"x"})", "missing_field", "'user'"},
      {R"({"id":"p","ts":1,"user":{},"text":"x"})", "missing_field", "'user.id'"},
      {R"({"id":"p","ts":1,"user":{"id":"u"}})", "missing_field", "'text'"},
      {R"({"id":"p","ts":"1","user":{"id":"u"},"text":"x"})", "bad_type", "'ts'"},
      {R"({"id":"p","ts":1.5,"user":{"id":"u"},"text":"x"})", "bad_type", "'ts'"},
      {R"({"id":"p","ts":1,"user":{"id":"u"},"text":7})", "bad_type", "'text'"},
      {R"({"id":"","ts":1,"user":{"id":"u"},"text":"x"})", "bad_value", "'id'"},
      {R"({"id":"p","ts":1,"user":{"id":"u","followers":-1},"text":"x"})", "bad_value",
       "user.followers"},
      {R"({"id":"p","ts":1,"user":{"id":"u"},"text":"x","likes":-2})", "bad_value", "likes"},
      {"{\"id\":\"p\",\"ts\":1,\"user\":{\"id\":\"u\"},\"text\":\"\xff\"}", "bad_utf8", "UTF-8"},
      {R"({"id":"p","ts":1,"user":{"id":"u"},"text":"x"} trailing)", "json", ""},
      {R"({"id":"p","ts":1,"user":{"id":"u"},"text":"x")", "json", ""},
  };
  PostParser parser;
  for (const auto& c : cases) {
    auto p = parser.Parse(c.json);
    ASSERT_FALSE(p.ok()) << c.json;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << c.json;
    EXPECT_EQ(PostErrorKind(p.status()), c.kind) << c.json << " -> " << p.status().message();
    EXPECT_NE(p.status().message().find(c.mentions), std::string::npos)
        << c.json << " -> " << p.status().message();
  }
  // The parser is still usable after errors.
  EXPECT_TRUE(parser.Parse(R"({"id":"p","ts":1,"user":{"id":"u"},"text":"ok"})").ok());
}

TEST(PostTest, OversizedRecordIsRejected) {
  std::string big =
      R"({"id":"p","ts":1,"user":{"id":"u"},"text":")" + std::string(kMaxPostBytes, 'a') + "\"}";
  PostParser parser;
  auto p = parser.Parse(big);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(PostErrorKind(p.status()), "too_large");
}

TEST(TrendTest, RoundTripsThroughJson) {
  TrendUpdate t;
  t.topic_id = "t42";
  t.hashtag = "#AI推理革命#";
  t.rank = 1;
  t.prev_rank = 7;
  t.heat = 12345.6;
  t.terms = {"AI", "推理", "革命"};
  t.category = "科技";
  t.sentiment = {0.61, 0.30, 0.09};
  t.posts = 5120;
  t.authors = 4377;
  t.first_seen_ms = 1764669600000;
  t.updated_ms = 1764670200000;
  t.samples = {"p17", "p93"};
  std::string json = TrendToJson(t);
  EXPECT_EQ(
      json,
      R"({"topic_id":"t42","hashtag":"#AI推理革命#","rank":1,"prev_rank":7,"heat":12345.60,)"
      R"("terms":["AI","推理","革命"],"category":"科技","sentiment":{"pos":0.610,"neu":0.300,)"
      R"("neg":0.090},"posts":5120,"authors":4377,"first_seen":1764669600000,)"
      R"("updated":1764670200000,"samples":["p17","p93"]})");
  auto back = ParseTrend(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->topic_id, "t42");
  EXPECT_EQ(back->hashtag, t.hashtag);
  EXPECT_EQ(back->prev_rank, 7);
  EXPECT_DOUBLE_EQ(back->heat, 12345.6);
  EXPECT_EQ(back->terms, t.terms);
  EXPECT_DOUBLE_EQ(back->sentiment.neg, 0.09);
  EXPECT_EQ(back->updated_ms, t.updated_ms);
  EXPECT_EQ(back->samples, t.samples);
  t.prev_rank.reset();
  auto fresh = ParseTrend(TrendToJson(t));
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(fresh->prev_rank.has_value());
  auto bad = ParseTrend(R"({"topic_id":"t1","rank":"x","updated":1})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'rank'"), std::string::npos);
}

}  // namespace
}  // namespace surge::stream
