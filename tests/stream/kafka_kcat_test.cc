// Another Kafka client — kcat, Debian's build — produces posts into the mock cluster's bootstrap
// address and KafkaPostSource reads them: the mock is a real protocol peer, and the source works
// with what other producers write.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "kafka_test_util.h"
#include "stream/kafka/post_source.h"

namespace surge::stream::kafka {
namespace {

bool HaveKcat() { return std::system("command -v kcat >/dev/null 2>&1") == 0; }

TEST(KafkaKcatTest, KcatProducesPostsTheSourceReads) {
  if (!HaveKcat()) {
    GTEST_SKIP() << "kcat is not installed (scripts/setup installs the Debian package 'kcat')";
  }
  auto mc = testing::StartCluster(1);
  ASSERT_NE(mc, nullptr);
  ASSERT_TRUE(mc->CreateTopic("surge.posts", 2).ok());

  constexpr int kPosts = 50;
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / fmt::format("surge_kcat_{}.txt", getpid());
  {
    std::ofstream out(file);
    for (int i = 0; i < kPosts; ++i) {
      Post p = testing::TestPost(i);
      out << p.id << '|' << PostToJson(p) << '\n';
      if (i == 20) out << "broken|{\"id\":\"x\"\n";  // one bad record in the middle
    }
  }
  const std::string cmd = fmt::format("kcat -P -q -b {} -t surge.posts -K '|' -l {} 2>&1",
                                      mc->bootstrap(), file.string());
  int rc = std::system(cmd.c_str());
  std::filesystem::remove(file);
  ASSERT_EQ(rc, 0) << cmd;

  KafkaPostSourceOptions o;
  auto uri = KafkaUri::Parse(mc->Uri("surge.posts", "kcat-readers"));
  ASSERT_TRUE(uri.ok());
  o.uri = *uri;
  o.uri.properties = testing::FastConsumerProps();
  std::vector<std::string> dead;
  o.on_dead_letter = [&](const Message& m, const Status& why, std::string_view kind) {
    dead.push_back(fmt::format("{}:{}", m.key, kind));
  };
  auto source = KafkaPostSource::Create(std::move(o));
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  std::map<std::string, Post> got;
  std::map<std::string, std::string> keys;
  PostBatch batch;
  ASSERT_TRUE(testing::WaitFor([&] { return got.size() + dead.size() >= kPosts + 1; },
                               [&] {
                                 ASSERT_TRUE((*source)->Poll(100, &batch).ok());
                                 for (auto& sp : batch.posts) got[sp.post.id] = sp.post;
                               }))
      << "got " << got.size() << " posts, " << dead.size() << " dead letters";
  ASSERT_EQ(got.size(), static_cast<size_t>(kPosts));
  for (int i = 0; i < kPosts; ++i) {
    Post want = testing::TestPost(i);
    ASSERT_TRUE(got.count(want.id)) << want.id;
    EXPECT_EQ(got[want.id].text, want.text);
    EXPECT_EQ(got[want.id].user.followers, want.user.followers);
  }
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0], "broken:json");
}

}  // namespace
}  // namespace surge::stream::kafka
