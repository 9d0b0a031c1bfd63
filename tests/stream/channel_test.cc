#include <gtest/gtest.h>

#include <thread>

#include "stream/memory_channel.h"

namespace surge::stream {
namespace {

using namespace std::chrono_literals;

TEST(MemoryChannelTest, RoutesByKeyAndKeepsOrderPerPartition) {
  auto ch = MemoryChannel<int>::Create(4, 100);
  auto w = ch->NewWriter();
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(w->Send(static_cast<uint64_t>(i % 5), int{i}).ok());
  w->Close();
  std::vector<int> last(4, -1);
  int total = 0;
  for (int32_t p = 0; p < 4; ++p) {
    auto r = ch->NewReader({p});
    std::vector<Message<int>> got;
    for (;;) {
      auto more = r->Receive(&got, 7, 10ms);
      ASSERT_TRUE(more.ok());
      if (!*more) break;
    }
    int64_t expect_offset = 0;
    for (const auto& m : got) {
      EXPECT_EQ(m.position.partition, p);
      EXPECT_EQ(m.position.offset, expect_offset++);
      EXPECT_EQ(PartitionOf(m.key, 4), p);
      EXPECT_GT(m.value, last[p]);
      last[p] = m.value;
      ++total;
    }
  }
  EXPECT_EQ(total, 40);
}

TEST(MemoryChannelTest, EndsWhenEveryWriterClosed) {
  auto ch = MemoryChannel<int>::Create(1, 10);
  auto a = ch->NewWriter();
  auto b = ch->NewWriter();
  auto r = ch->NewReader();
  ASSERT_TRUE(a->Send(1, 1).ok());
  a->Close();
  std::vector<Message<int>> got;
  auto more = r->Receive(&got, 10, 10ms);
  ASSERT_TRUE(more.ok());
  EXPECT_TRUE(*more);  // b is still open
  EXPECT_EQ(got.size(), 1u);
  EXPECT_FALSE(a->Send(1, 2).ok());  // closed writer
  b->Close();
  got.clear();
  more = r->Receive(&got, 10, 10ms);
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(*more);
}

TEST(MemoryChannelTest, BlocksWhenFullUntilRead) {
  auto ch = MemoryChannel<int>::Create(1, 2);
  auto w = ch->NewWriter();
  auto r = ch->NewReader();
  std::thread producer([&] {
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(w->Send(0, int{i}).ok());
    w->Close();
  });
  std::vector<Message<int>> got;
  size_t max_depth = 0;
  for (;;) {
    max_depth = std::max(max_depth, ch->depth(0));
    auto more = r->Receive(&got, 1, 100ms);
    ASSERT_TRUE(more.ok());
    if (!*more) break;
  }
  producer.join();
  ASSERT_EQ(got.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(got[i].value, i);
  EXPECT_LE(max_depth, 2u);
}

TEST(MemoryChannelTest, BadPartitionAndSeek) {
  auto ch = MemoryChannel<int>::Create(2, 10);
  auto w = ch->NewWriter();
  Status st = w->SendTo(5, 0, 1);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("2 partitions"), std::string::npos);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(w->SendTo(1, 0, int{i}).ok());
  auto r = ch->NewReader({1});
  Offsets skip;
  skip.next[1] = 3;
  ASSERT_TRUE(r->Seek(skip).ok());
  std::vector<Message<int>> got;
  ASSERT_TRUE(r->Receive(&got, 10, 10ms).ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].value, 3);
  Offsets back;
  back.next[1] = 0;
  EXPECT_EQ(r->Seek(back).code(), StatusCode::kFailedPrecondition);
  Offsets done;
  done.Advance(got.back().position);
  ASSERT_TRUE(r->Commit(done).ok());
  EXPECT_EQ(ch->committed().next.at(1), 5);
}

}  // namespace
}  // namespace surge::stream
