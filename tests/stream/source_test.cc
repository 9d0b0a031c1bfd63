#include "stream/source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "stream/dead_letter.h"
#include "stream/post.h"

namespace surge::stream {
namespace {

namespace fs = std::filesystem;

std::string TempFile(const std::string& name, const std::string& contents) {
  std::string path =
      (fs::temp_directory_path() / ("surge_source_test." + std::to_string(getpid()) + "." + name))
          .string();
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

std::vector<std::string> ReadAll(JsonlSource* s, size_t per_block, std::vector<RawRecord>* recs,
                                 std::vector<SourceError>* errors) {
  std::vector<std::string> lines;
  for (;;) {
    RecordBlock b;
    auto more = s->Read(&b, per_block);
    EXPECT_TRUE(more.ok()) << more.status().ToString();
    for (const auto& r : b.raw) {
      lines.emplace_back(b.Bytes(r));
      recs->push_back(r);
    }
    for (auto& e : b.errors) errors->push_back(e);
    if (!more.ok() || !*more) break;
  }
  return lines;
}

TEST(JsonlSourceTest, SplitsLinesAcrossReads) {
  std::string text = "a\r\n\n  \nbb\nccc";  // CRLF, blank lines, no final newline
  std::string path = TempFile("lines", text);
  for (size_t buf : {4096u, 4097u}) {
    auto s = JsonlSource::Open(path, buf);
    ASSERT_TRUE(s.ok());
    std::vector<RawRecord> recs;
    std::vector<SourceError> errors;
    auto lines = ReadAll(s->get(), 2, &recs, &errors);
    EXPECT_EQ(lines, (std::vector<std::string>{"a", "bb", "ccc"}));
    ASSERT_EQ(recs.size(), 3u);
    EXPECT_EQ(recs[0].line, 1);
    EXPECT_EQ(recs[1].line, 4);
    EXPECT_EQ(recs[1].position.offset, 7);
    EXPECT_EQ(recs[2].line, 5);
    EXPECT_TRUE(errors.empty());
  }
  fs::remove(path);
}

TEST(JsonlSourceTest, ManyLinesThroughASmallBuffer) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "{\"n\":" + std::to_string(i) + "}\n";
  std::string path = TempFile("many", text);
  auto s = JsonlSource::Open(path, 4096);
  ASSERT_TRUE(s.ok());
  std::vector<RawRecord> recs;
  std::vector<SourceError> errors;
  auto lines = ReadAll(s->get(), 333, &recs, &errors);
  ASSERT_EQ(lines.size(), 5000u);
  EXPECT_EQ(lines[4999], "{\"n\":4999}");
  EXPECT_EQ((*s)->lines(), 5000);
  fs::remove(path);
}

TEST(JsonlSourceTest, OverlongLineBecomesAnErrorAndReadingGoesOn) {
  std::string text = "first\n" + std::string(kMaxPostBytes + 10, 'x') + "\nlast\n";
  std::string path = TempFile("long", text);
  auto s = JsonlSource::Open(path, 1 << 16);
  ASSERT_TRUE(s.ok());
  std::vector<RawRecord> recs;
  std::vector<SourceError> errors;
  auto lines = ReadAll(s->get(), 100, &recs, &errors);
  EXPECT_EQ(lines, (std::vector<std::string>{"first", "last"}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].kind, "too_large");
  EXPECT_EQ(errors[0].line, 2);
  EXPECT_EQ(errors[0].position.offset, 6);
  EXPECT_EQ(errors[0].raw.size(), 1024u);
  EXPECT_EQ(recs[1].line, 3);
  fs::remove(path);
}

TEST(JsonlSourceTest, MissingFileIsAClearError) {
  auto s = JsonlSource::Open("/nonexistent/posts.jsonl");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("/nonexistent/posts.jsonl"), std::string::npos);
}

TEST(GeneratorSourceTest, YieldsPostsWithPositions) {
  std::vector<Post> posts(5);
  for (int i = 0; i < 5; ++i) posts[i].id = "p" + std::to_string(i);
  PostGeneratorSource s(std::make_unique<VectorPostGenerator>(posts), "vector");
  RecordBlock b;
  ASSERT_TRUE(*s.Read(&b, 3));
  RecordBlock c;
  auto more = s.Read(&c, 3);
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(b.posts.size(), 3u);
  EXPECT_EQ(c.posts.size(), 2u);
  EXPECT_EQ(c.post_positions[1].offset, 4);
  RecordBlock d;
  EXPECT_FALSE(*s.Read(&d, 3));
}

TEST(DeadLetterTest, WritesOneLinePerRecordAndCountsKinds) {
  std::string path = TempFile("dead", "");
  {
    auto d = DeadLetterSink::Open(path);
    ASSERT_TRUE(d.ok());
    (*d)->Add({"json", "json: bad", "in.jsonl", 3, {0, 40}, "not json"});
    (*d)->Add({"json", "json: bad", "in.jsonl", 4, {0, 50}, "{\"a\":\xff}"});
    (*d)->Add({"too_large",
               "too_large: x",
               "in.jsonl",
               9,
               {0, 90},
               std::string(kMaxDeadLetterRaw + 5, 'a')});
    EXPECT_TRUE((*d)->Flush().ok());
    EXPECT_EQ((*d)->total(), 3);
    auto counts = (*d)->counts();
    EXPECT_EQ(counts["json"], 2);
    EXPECT_EQ(counts["too_large"], 1);
  }
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            R"({"kind":"json","message":"json: bad","source":"in.jsonl","line":3,"partition":0,)"
            R"("offset":40,"raw":"not json"})");
  EXPECT_NE(lines[1].find("\xEF\xBF\xBD"), std::string::npos);  // invalid byte replaced
  EXPECT_NE(lines[2].find("\"raw_truncated\":true"), std::string::npos);
  fs::remove(path);
  EXPECT_FALSE(DeadLetterSink::Open("/nonexistent/dir/dead.jsonl").ok());
}

}  // namespace
}  // namespace surge::stream
