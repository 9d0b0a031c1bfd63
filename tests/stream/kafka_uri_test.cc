#include <gtest/gtest.h>

#include "stream/kafka/uri.h"

namespace surge::stream::kafka {
namespace {

TEST(KafkaUriTest, ParsesBrokersTopicGroupAndProperties) {
  auto u = KafkaUri::Parse(
      "kafka://k1:9093,k2,[::1]:9094/surge.posts?group=annotate&session.timeout.ms=6000&"
      "client.id=a%20b");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->brokers, "k1:9093,k2:9092,[::1]:9094");
  EXPECT_EQ(u->topic, "surge.posts");
  EXPECT_EQ(u->group, "annotate");
  ASSERT_EQ(u->properties.size(), 2u);
  EXPECT_EQ(u->properties[0], (std::pair<std::string, std::string>{"session.timeout.ms", "6000"}));
  EXPECT_EQ(u->properties[1].second, "a b");
  auto again = KafkaUri::Parse(u->ToString());
  ASSERT_TRUE(again.ok()) << u->ToString() << ": " << again.status().ToString();
  EXPECT_EQ(again->brokers, u->brokers);
  EXPECT_EQ(again->topic, u->topic);
  EXPECT_EQ(again->group, u->group);
  EXPECT_EQ(again->properties, u->properties);
}

TEST(KafkaUriTest, TopicIsOptional) {
  for (const char* s : {"kafka://localhost:9092", "kafka://localhost:9092/"}) {
    auto u = KafkaUri::Parse(s);
    ASSERT_TRUE(u.ok()) << s;
    EXPECT_TRUE(u->topic.empty());
    EXPECT_TRUE(u->group.empty());
  }
}

TEST(KafkaUriTest, BadUrisSayWhatIsWrong) {
  struct Case {
    const char* uri;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {"http://k:9092/t", "must start with 'kafka://'"},
           {"kafka:///t", "names no broker"},
           {"kafka://k:0/t", "a port is 1..65535"},
           {"kafka://k:99999/t", "a port is 1..65535"},
           {"kafka://k:ab/t", "has port 'ab'"},
           {"kafka://k1,,k2/t", "empty broker"},
           {"kafka://:9092/t", "has no host"},
           {"kafka://k$:9092/t", "the character '$'"},
           {"kafka://[::1/t", "no closing ']'"},
           {"kafka://k/bad topic", "topic"},
           {"kafka://k/a/b", "the character '/'"},
           {"kafka://k/..", "not '.' or '..'"},
           {"kafka://k/t?group", "not key=value"},
           {"kafka://k/t?group=", "group is empty"},
           {"kafka://k/t?group=a&group.id=b", "given twice"},
           {"kafka://k/t?linger.ms=1&linger.ms=2", "'linger.ms' is given twice"},
           {"kafka://k/t?bootstrap.servers=x", "brokers go before the path"},
           {"kafka://k/t?x=%zz", "bad percent escape"},
           {"kafka://k/t?x=%4", "bad percent escape"},
       }) {
    auto u = KafkaUri::Parse(c.uri);
    ASSERT_FALSE(u.ok()) << c.uri;
    EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument) << c.uri;
    EXPECT_NE(u.status().message().find(c.says), std::string::npos)
        << c.uri << " -> " << u.status().message();
  }
  EXPECT_FALSE(KafkaUri::Parse("kafka://k/" + std::string(250, 'a')).ok());
  EXPECT_TRUE(KafkaUri::Parse("kafka://k/" + std::string(249, 'a')).ok());
}

}  // namespace
}  // namespace surge::stream::kafka
