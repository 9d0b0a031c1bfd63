// KafkaPostSource, the sinks and the dead-letter writer against the mock cluster.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "kafka_test_util.h"
#include "stream/kafka/post_source.h"
#include "stream/kafka/sinks.h"

namespace surge::stream::kafka {
namespace {

using testing::kPatienceMs;
using testing::MakeConsumer;
using testing::MakeProducer;
using testing::StartCluster;
using testing::TestPost;

struct Rejected {
  Message record;
  std::string reason;
  std::string kind;
};

std::unique_ptr<KafkaPostSource> MakeSource(const MockCluster& mc, const std::string& topic,
                                            std::vector<Rejected>* rejected) {
  KafkaPostSourceOptions o;
  auto uri = KafkaUri::Parse(mc.Uri(topic, topic + "-readers"));
  EXPECT_TRUE(uri.ok()) << uri.status().ToString();
  o.uri = *uri;
  o.uri.properties = testing::FastConsumerProps();
  o.max_batch = 64;
  o.on_dead_letter = [rejected](const Message& m, const Status& why, std::string_view kind) {
    rejected->push_back({m, why.message(), std::string(kind)});
  };
  auto s = KafkaPostSource::Create(std::move(o));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

// Reads until `want` records (posts + dead letters) are consumed.
std::vector<SourcedPost> ReadPosts(KafkaPostSource& source, size_t want,
                                   std::map<TopicPartition, int64_t>* next = nullptr) {
  std::vector<SourcedPost> posts;
  size_t consumed = 0;
  PostBatch batch;
  EXPECT_TRUE(testing::WaitFor([&] { return consumed >= want; },
                               [&] {
                                 Status s = source.Poll(100, &batch);
                                 ASSERT_TRUE(s.ok()) << s.ToString();
                                 consumed += batch.posts.size() + batch.dead_letters;
                                 for (auto& p : batch.posts) posts.push_back(std::move(p));
                                 if (next != nullptr) {
                                   for (const auto& o : batch.next_offsets) {
                                     int64_t& n = (*next)[{o.topic, o.partition}];
                                     n = std::max(n, o.offset);
                                   }
                                 }
                               }))
      << "consumed " << consumed << " of " << want;
  return posts;
}

TEST(KafkaSourceTest, BadRecordsGoToDeadLetterWithReasonAndPositionAndTheStreamGoesOn) {
  auto mc = StartCluster(1);
  ASSERT_NE(mc, nullptr);
  ASSERT_TRUE(mc->CreateTopic("posts", 2).ok());
  auto producer = MakeProducer(*mc, {{"message.max.bytes", "4000000"}});
  ASSERT_NE(producer, nullptr);
  // Good posts interleaved with every kind of bad record, all on partition 0 to know positions.
  const std::vector<std::pair<std::string, std::string>> records = {
      {"good", PostToJson(TestPost(1))},
      {"json", "{not json"},
      {"good", PostToJson(TestPost(2))},
      {"missing_field", R"({"id":"x","ts":1,"user":{"id":"u"}})"},
      {"bad_type", R"({"id":"x","ts":"soon","user":{"id":"u"},"text":""})"},
      {"bad_utf8",
       std::string(R"({"id":"x","ts":1,"user":{"id":"u"},"text":")") + "\xff\xfe" + "\"}"},
      {"too_large", std::string(kMaxPostBytes + 10, ' ')},
      {"good", PostToJson(TestPost(3))},
  };
  for (const auto& [kind, value] : records) {
    ProducerRecord r;
    r.topic = "posts";
    r.key = kind;
    r.value = value;
    r.partition = 0;
    ASSERT_TRUE(producer->Produce(r).ok()) << kind;
  }
  ASSERT_TRUE(producer->Flush(kPatienceMs).ok());
  std::vector<Rejected> rejected;
  auto source = MakeSource(*mc, "posts", &rejected);
  ASSERT_NE(source, nullptr);
  std::map<TopicPartition, int64_t> next;
  auto posts = ReadPosts(*source, records.size(), &next);
  ASSERT_EQ(posts.size(), 3u);
  EXPECT_EQ(posts[0].post.id, "p1");
  EXPECT_EQ(posts[1].post.id, "p2");
  EXPECT_EQ(posts[2].post.id, "p3");
  EXPECT_EQ(posts[2].offset, 7);
  EXPECT_EQ(posts[0].post.text, TestPost(1).text);
  ASSERT_EQ(rejected.size(), 5u);
  for (size_t i = 0; i < rejected.size(); ++i) {
    const Rejected& r = rejected[i];
    EXPECT_EQ(r.kind, r.record.key) << r.reason;  // the key names the expected kind
    EXPECT_EQ(r.record.topic, "posts");
    EXPECT_EQ(r.record.partition, 0);
    EXPECT_FALSE(r.reason.empty());
  }
  EXPECT_EQ(rejected[0].record.offset, 1);
  EXPECT_EQ(rejected[0].record.value, "{not json");  // the raw bytes, untouched
  EXPECT_NE(rejected[3].record.value.find("\xff\xfe"), std::string::npos);
  EXPECT_EQ(source->dead_letters(), 5);
  EXPECT_EQ(source->posts(), 3);
  EXPECT_EQ(source->dead_letter_counts().at("json"), 1);
  // Dead-lettered records are consumed too: the position is past the last record.
  EXPECT_EQ((next[{"posts", 0}]), 8);
}

TEST(KafkaSourceTest, NullValueIsADeadLetterNotACrash) {
  auto mc = StartCluster(1);
  ASSERT_NE(mc, nullptr);
  ASSERT_TRUE(mc->CreateTopic("tomb", 1).ok());
  // A raw librdkafka tombstone (null value) — our producer never writes one.
  char err[256];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  ASSERT_EQ(rd_kafka_conf_set(conf, "bootstrap.servers", mc->bootstrap().c_str(), err, sizeof(err)),
            RD_KAFKA_CONF_OK);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
  ASSERT_NE(rk, nullptr) << err;
  ASSERT_EQ(rd_kafka_producev(rk, RD_KAFKA_V_TOPIC("tomb"), RD_KAFKA_V_KEY("k", 1),
                              RD_KAFKA_V_VALUE(nullptr, 0), RD_KAFKA_V_END),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  std::string good = PostToJson(TestPost(9));
  ASSERT_EQ(
      rd_kafka_producev(rk, RD_KAFKA_V_TOPIC("tomb"), RD_KAFKA_V_VALUE(good.data(), good.size()),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
      RD_KAFKA_RESP_ERR_NO_ERROR);
  ASSERT_EQ(rd_kafka_flush(rk, kPatienceMs), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_destroy(rk);
  std::vector<Rejected> rejected;
  auto source = MakeSource(*mc, "tomb", &rejected);
  ASSERT_NE(source, nullptr);
  auto posts = ReadPosts(*source, 2);
  ASSERT_EQ(posts.size(), 1u);
  EXPECT_EQ(posts[0].post.id, "p9");
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0].kind, "null_value");
  EXPECT_TRUE(rejected[0].record.value_is_null);
}

TEST(KafkaSourceTest, PostSinkToSourceRoundTripKeyedByPostId) {
  auto mc = StartCluster(2);
  ASSERT_NE(mc, nullptr);
  ASSERT_TRUE(mc->CreateTopic("surge.posts", 3).ok());
  auto uri = KafkaUri::Parse(mc->Uri("surge.posts"));
  ASSERT_TRUE(uri.ok());
  auto sink = KafkaPostSink::Create(*uri, kPatienceMs);
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  EXPECT_EQ((*sink)->writer().partitions(), 3);
  constexpr int kPosts = 300;
  for (int i = 0; i < kPosts; ++i) ASSERT_TRUE((*sink)->Write(TestPost(i)).ok());
  ASSERT_TRUE((*sink)->Flush(kPatienceMs).ok());
  Post no_id;
  EXPECT_EQ((*sink)->Write(no_id).code(), StatusCode::kInvalidArgument);
  std::vector<Rejected> rejected;
  auto source = MakeSource(*mc, "surge.posts", &rejected);
  ASSERT_NE(source, nullptr);
  auto posts = ReadPosts(*source, kPosts);
  EXPECT_TRUE(rejected.empty());
  ASSERT_EQ(posts.size(), static_cast<size_t>(kPosts));
  std::map<std::string, int> seen;
  std::set<int32_t> partitions;
  for (const auto& sp : posts) {
    ++seen[sp.post.id];
    partitions.insert(sp.partition);
    int i = std::stoi(sp.post.id.substr(1));
    Post want = TestPost(i);
    EXPECT_EQ(sp.post.text, want.text);
    EXPECT_EQ(sp.post.ts_ms, want.ts_ms);
    EXPECT_EQ(sp.post.user.id, want.user.id);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kPosts));
  EXPECT_EQ(partitions.size(), 3u);
}

TEST(KafkaSourceTest, TrendSinkWritesJsonKeyedByTopicId) {
  auto mc = StartCluster(1);
  ASSERT_NE(mc, nullptr);
  ASSERT_TRUE(mc->CreateTopic("surge.trends", 4).ok());
  // No topic in the URI: the sink defaults to surge.trends.
  auto uri = KafkaUri::Parse("kafka://" + mc->bootstrap());
  ASSERT_TRUE(uri.ok()) << uri.status().ToString();
  auto sink = KafkaTrendSink::Create(*uri, kPatienceMs);
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  EXPECT_EQ((*sink)->writer().topic(), "surge.trends");
  std::vector<TrendUpdate> sent;
  for (int bucket = 0; bucket < 3; ++bucket) {
    for (int t = 0; t < 5; ++t) {
      TrendUpdate u;
      u.topic_id = "t" + std::to_string(t);
      u.hashtag = "#话题" + std::to_string(t) + "#";
      u.rank = t + 1;
      if (bucket > 0) u.prev_rank = t + 1;
      u.heat = 100.5 * (5 - t) + bucket;
      u.terms = {"AI", "推理"};
      u.category = "科技";
      u.posts = 10 * bucket + t;
      u.authors = 5;
      u.first_seen_ms = 1764669600000;
      u.updated_ms = 1764669600000 + bucket * 60000;
      u.samples = {"p1"};
      ASSERT_TRUE((*sink)->Write(u).ok());
      sent.push_back(u);
    }
  }
  TrendUpdate no_id;
  EXPECT_EQ((*sink)->Write(no_id).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE((*sink)->Flush(kPatienceMs).ok());
  auto consumer = MakeConsumer(*mc, "trend-readers");
  ASSERT_TRUE(consumer->Subscribe({"surge.trends"}).ok());
  std::map<std::string, std::vector<TrendUpdate>> by_topic;
  std::map<std::string, std::set<int32_t>> partitions;
  size_t got = 0;
  ASSERT_TRUE(testing::PollUntil(
      *consumer,
      [&](Message& m) {
        auto u = ParseTrend(m.value);
        ASSERT_TRUE(u.ok()) << u.status().ToString();
        EXPECT_EQ(u->topic_id, m.key);
        by_topic[m.key].push_back(*u);
        partitions[m.key].insert(m.partition);
        ++got;
      },
      [&] { return got >= sent.size(); }));
  ASSERT_EQ(by_topic.size(), 5u);
  for (const auto& [id, updates] : by_topic) {
    ASSERT_EQ(updates.size(), 3u);
    EXPECT_EQ(partitions[id].size(), 1u);
    for (int b = 0; b < 3; ++b) {
      EXPECT_EQ(updates[b].updated_ms, 1764669600000 + b * 60000);  // in order per topic
      EXPECT_EQ(updates[b].hashtag, "#话题" + id.substr(1) + "#");
    }
  }
}

TEST(KafkaSourceTest, DeadLetterWriterKeepsTheRawBytesAndTheReasonInHeaders) {
  auto mc = StartCluster(1);
  ASSERT_NE(mc, nullptr);
  ASSERT_TRUE(mc->CreateTopic("surge.deadletter", 1).ok());
  auto uri = KafkaUri::Parse(mc->Uri(""));
  ASSERT_TRUE(uri.ok());
  auto dl = KafkaDeadLetterWriter::Create(*uri, kPatienceMs);
  ASSERT_TRUE(dl.ok()) << dl.status().ToString();
  Message bad;
  bad.topic = "surge.posts";
  bad.partition = 2;
  bad.offset = 41;
  bad.key = "k\x01";
  bad.value = std::string("{\"text\":\"\xff\"", 12);
  ASSERT_TRUE((*dl)->Write(bad, InvalidArgumentError("bad_utf8: field 'text'"), "bad_utf8").ok());
  ASSERT_TRUE((*dl)->Flush(kPatienceMs).ok());
  auto consumer = MakeConsumer(*mc, "dl-readers");
  ASSERT_TRUE(consumer->Assign({{"surge.deadletter", 0, kOffsetBeginning}}).ok());
  std::vector<Message> got;
  ASSERT_TRUE(testing::PollUntil(
      *consumer, [&](Message& m) { got.push_back(m); }, [&] { return !got.empty(); }));
  EXPECT_EQ(got[0].key, bad.key);
  EXPECT_EQ(got[0].value, bad.value);
  std::map<std::string, std::string> headers;
  for (const auto& h : got[0].headers) headers[h.key] = h.value;
  EXPECT_EQ(headers["surge.dl.kind"], "bad_utf8");
  EXPECT_EQ(headers["surge.dl.reason"], "bad_utf8: field 'text'");
  EXPECT_EQ(headers["surge.dl.topic"], "surge.posts");
  EXPECT_EQ(headers["surge.dl.partition"], "2");
  EXPECT_EQ(headers["surge.dl.offset"], "41");
}

TEST(KafkaSourceTest, SinksRefuseAMissingTopicAtCreation) {
  auto mc = StartCluster(1);
  ASSERT_NE(mc, nullptr);
  ASSERT_TRUE(mc->CreateTopic("other", 1).ok());
  auto uri = KafkaUri::Parse(mc->Uri("surge.trendz"));
  ASSERT_TRUE(uri.ok());
  auto sink = KafkaTrendSink::Create(*uri, kPatienceMs);
  ASSERT_FALSE(sink.ok());
  EXPECT_EQ(sink.status().code(), StatusCode::kNotFound);
  EXPECT_NE(sink.status().message().find("'surge.trendz' does not exist"), std::string::npos)
      << sink.status().message();
  EXPECT_NE(sink.status().message().find("other"), std::string::npos);
  auto missing = KafkaUri::Parse("kafka://127.0.0.1:1/surge.posts");
  ASSERT_TRUE(missing.ok());
  auto down = KafkaPostSink::Create(*missing, 1000);
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable) << down.status().ToString();
}

TEST(KafkaSourceTest, SourceNeedsTopicAndGroup) {
  KafkaPostSourceOptions o;
  o.uri = *KafkaUri::Parse("kafka://127.0.0.1:1/?group=g");
  auto s = KafkaPostSource::Create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("no topic"), std::string::npos);
  o.uri = *KafkaUri::Parse("kafka://127.0.0.1:1/posts");
  s = KafkaPostSource::Create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("no consumer group"), std::string::npos);
}

}  // namespace
}  // namespace surge::stream::kafka
