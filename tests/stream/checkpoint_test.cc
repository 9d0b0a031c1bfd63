#include "stream/checkpoint.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace surge::stream {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("surge_ckpt_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static Checkpoint Sample(std::string name, int64_t offset) {
    Checkpoint c;
    c.name = std::move(name);
    c.stage = "detect";
    c.worker_id = "host:123";
    c.state_version = 7;
    c.offsets = {{"surge.terms", 3, offset}, {"surge.terms", 4, offset * 2}};
    std::string binary("\0\x01\xff state", 9);
    c.blobs = {{"sigma", binary + std::to_string(offset)}, {"empty", ""}};
    return c;
  }

  static std::string ReadAll(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  static void WriteAll(const fs::path& p, const std::string& data) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << data;
  }

  fs::path dir_;
};

TEST_F(CheckpointTest, EncodeDecodeRoundTrip) {
  Checkpoint c = Sample("detect.surge.terms.3", 42);
  c.created_ms = 1764669600123;
  c.sequence = 9;
  auto d = DecodeCheckpoint(EncodeCheckpoint(c), "mem");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->name, c.name);
  EXPECT_EQ(d->stage, "detect");
  EXPECT_EQ(d->worker_id, "host:123");
  EXPECT_EQ(d->state_version, 7u);
  EXPECT_EQ(d->created_ms, 1764669600123);
  EXPECT_EQ(d->sequence, 9u);
  EXPECT_EQ(d->offsets, c.offsets);
  EXPECT_EQ(d->blobs, c.blobs);
  ASSERT_NE(d->FindBlob("sigma"), nullptr);
  EXPECT_EQ(d->FindBlob("nope"), nullptr);
  ASSERT_NE(d->FindOffset("surge.terms", 4), nullptr);
  EXPECT_EQ(d->FindOffset("surge.terms", 4)->next_offset, 84);
  EXPECT_EQ(d->FindOffset("surge.terms", 5), nullptr);
}

TEST_F(CheckpointTest, WriteThenLoadLatestAndKeepTwo) {
  auto store = CheckpointStore::Open(dir_.string());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto none = store->LoadLatest("w");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  for (int i = 1; i <= 5; ++i) {
    auto seq = store->Write(Sample("w", i * 10));
    ASSERT_TRUE(seq.ok()) << seq.status().ToString();
    EXPECT_EQ(*seq, static_cast<uint64_t>(i));
  }
  auto files = store->Files("w");
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 2u);  // keep = 2
  EXPECT_NE((*files)[0].find("w.00000000000000000005.ckpt"), std::string::npos);
  auto loaded = store->LoadLatest("w");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->checkpoint.sequence, 5u);
  EXPECT_EQ((*loaded)->checkpoint.offsets[0].next_offset, 50);
  EXPECT_GT((*loaded)->checkpoint.created_ms, 0);
  EXPECT_TRUE((*loaded)->skipped.empty());
  // Names with dots and another name in the same directory do not interfere.
  ASSERT_TRUE(store->Write(Sample("w.2", 1)).ok());
  auto names = store->Names();
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"w", "w.2"}));
  EXPECT_EQ((*store->LoadLatest("w"))->checkpoint.sequence, 5u);
}

TEST_F(CheckpointTest, TruncatedNewestFallsBackToPrevious) {
  auto store = CheckpointStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(store->Write(Sample("t", 10)).ok());
  ASSERT_TRUE(store->Write(Sample("t", 20)).ok());
  auto files = *store->Files("t");
  std::string bytes = ReadAll(files[0]);
  // Every truncation point is caught: header, body, last byte.
  for (size_t cut :
       {size_t{0}, size_t{7}, size_t{31}, size_t{32}, bytes.size() / 2, bytes.size() - 1}) {
    WriteAll(files[0], bytes.substr(0, cut));
    auto loaded = store->LoadLatest("t");
    ASSERT_TRUE(loaded.ok()) << "cut " << cut << ": " << loaded.status().ToString();
    ASSERT_TRUE(loaded->has_value());
    EXPECT_EQ((*loaded)->checkpoint.offsets[0].next_offset, 10) << "cut " << cut;
    ASSERT_EQ((*loaded)->skipped.size(), 1u);
    EXPECT_NE((*loaded)->skipped[0].find("truncated"), std::string::npos)
        << "cut " << cut << ": " << (*loaded)->skipped[0];
  }
  // The next write goes after the bad file and is what loads next.
  auto seq = store->Write(Sample("t", 30));
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(*seq, 3u);
  EXPECT_EQ((*store->LoadLatest("t"))->checkpoint.offsets[0].next_offset, 30);
}

TEST_F(CheckpointTest, CorruptByteIsCaughtByTheChecksum) {
  auto store = CheckpointStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(store->Write(Sample("c", 10)).ok());
  ASSERT_TRUE(store->Write(Sample("c", 20)).ok());
  auto files = *store->Files("c");
  std::string bytes = ReadAll(files[0]);
  for (size_t pos : {size_t{40}, bytes.size() / 2, bytes.size() - 1}) {
    std::string bad = bytes;
    bad[pos] ^= 0x20;
    WriteAll(files[0], bad);
    auto loaded = store->LoadLatest("c");
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ((*loaded)->checkpoint.offsets[0].next_offset, 10);
    ASSERT_EQ((*loaded)->skipped.size(), 1u);
    EXPECT_NE((*loaded)->skipped[0].find("checksum"), std::string::npos) << (*loaded)->skipped[0];
  }
  std::string bad_magic = bytes;
  bad_magic[0] = 'X';
  WriteAll(files[0], bad_magic);
  auto loaded = store->LoadLatest("c");
  ASSERT_TRUE(loaded.ok());
  EXPECT_NE((*loaded)->skipped[0].find("not a Surge checkpoint"), std::string::npos);
}

TEST_F(CheckpointTest, AllFilesBadIsDataLossListingEachReason) {
  auto store = CheckpointStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(store->Write(Sample("a", 1)).ok());
  ASSERT_TRUE(store->Write(Sample("a", 2)).ok());
  auto files = *store->Files("a");
  WriteAll(files[0], "short");
  std::string b = ReadAll(files[1]);
  b[b.size() - 3] ^= 1;
  WriteAll(files[1], b);
  auto loaded = store->LoadLatest("a");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(loaded.status().message().find("no usable file among 2"), std::string::npos)
      << loaded.status().message();
  EXPECT_NE(loaded.status().message().find("truncated"), std::string::npos);
  EXPECT_NE(loaded.status().message().find("checksum"), std::string::npos);
}

TEST_F(CheckpointTest, OtherFormatVersionIsAnErrorNotASkip) {
  auto store = CheckpointStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(store->Write(Sample("v", 1)).ok());
  ASSERT_TRUE(store->Write(Sample("v", 2)).ok());
  auto files = *store->Files("v");
  std::string bytes = ReadAll(files[0]);
  bytes[8] = 2;  // version 2
  WriteAll(files[0], bytes);
  auto loaded = store->LoadLatest("v");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(loaded.status().message().find("format version 2, this build reads version 1"),
            std::string::npos)
      << loaded.status().message();
}

// A well-checksummed file whose structure lies (as a fuzzer or a buggy writer would make it).
std::string WithValidHeader(const std::string& body) {
  std::string out = "SURGECKP";
  auto put = [&out](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(1, 4);
  put(0, 4);
  put(body.size(), 8);
  put(XXH3_64bits(body.data(), body.size()), 8);
  return out + body;
}

std::string Str(std::string_view s) {
  std::string out;
  uint32_t n = static_cast<uint32_t>(s.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + std::string(s);
}

TEST_F(CheckpointTest, CraftedCountsAndLengthsAreRefused) {
  const std::string meta = Str("x") + Str("s") + Str("w") + std::string(4 + 8 + 8, '\0');
  // Offset count far beyond what the body holds.
  auto d = DecodeCheckpoint(WithValidHeader(meta + std::string("\xff\xff\xff\x7f", 4)), "mem");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(d.status().message().find("cannot fit"), std::string::npos) << d.status().message();
  // A blob claiming 1 GiB.
  std::string blob = std::string(4, '\0') + std::string("\x01\0\0\0", 4) + Str("b") +
                     std::string("\0\0\0\x40\0\0\0\0", 8) + "abc";
  d = DecodeCheckpoint(WithValidHeader(meta + blob), "mem");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("truncated body reading blob data"), std::string::npos)
      << d.status().message();
  // A string length past the end.
  d = DecodeCheckpoint(WithValidHeader(std::string("\x10\0\0\0ab", 6)), "mem");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("reading name"), std::string::npos) << d.status().message();
  // Trailing bytes inside a checksummed body.
  Checkpoint c = Sample("x", 5);
  std::string body = EncodeCheckpoint(c).substr(32) + "zz";
  d = DecodeCheckpoint(WithValidHeader(body), "mem");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("2 unexpected bytes"), std::string::npos);
  // Trailing garbage after the body the header describes.
  d = DecodeCheckpoint(EncodeCheckpoint(c) + "zz", "mem");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("trailing bytes"), std::string::npos);
  EXPECT_FALSE(DecodeCheckpoint("", "mem").ok());
}

TEST_F(CheckpointTest, LeftoverTemporaryFromACrashedWriterIsIgnoredAndRemoved) {
  auto store = CheckpointStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(store->Write(Sample("k", 10)).ok());
  // A child process starts a write and dies before the rename: it leaves a temporary file.
  // Everything the child needs is prepared before fork(); the child makes only system calls.
  const std::string torn = EncodeCheckpoint(Sample("k", 99)).substr(0, 20);
  const std::string prefix = (dir_ / ".k.00000000000000000002.ckpt.tmp.").string();
  char path[4096];
  pid_t child = fork();
  if (child == 0) {
    snprintf(path, sizeof(path), "%s%d", prefix.c_str(), static_cast<int>(getpid()));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0 && write(fd, torn.data(), torn.size()) == static_cast<ssize_t>(torn.size())) {
      _exit(0);
    }
    _exit(1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string leftover =
      (dir_ / (".k.00000000000000000002.ckpt.tmp." + std::to_string(child))).string();
  ASSERT_TRUE(fs::exists(leftover));
  auto loaded = store->LoadLatest("k");
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ((*loaded)->checkpoint.offsets[0].next_offset, 10);  // the torn write is invisible
  EXPECT_TRUE((*loaded)->skipped.empty());
  ASSERT_TRUE(store->Write(Sample("k", 20)).ok());
  EXPECT_FALSE(fs::exists(leftover));
  EXPECT_EQ((*store->LoadLatest("k"))->checkpoint.offsets[0].next_offset, 20);
}

TEST_F(CheckpointTest, BadNamesAndOptions) {
  auto store = CheckpointStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  for (const std::string& bad :
       std::vector<std::string>{"", ".hidden", "a/b", "sp ace", std::string(201, 'a')}) {
    auto seq = store->Write(Sample(bad, 1));
    ASSERT_FALSE(seq.ok()) << bad;
    EXPECT_EQ(seq.status().code(), StatusCode::kInvalidArgument);
    EXPECT_FALSE(store->LoadLatest(bad).ok());
  }
  CheckpointStore::Options one;
  one.keep = 1;
  auto refused = CheckpointStore::Open(dir_.string(), one);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("keep at least 2"), std::string::npos);
  WriteAll(dir_ / "plainfile", "x");
  auto not_dir = CheckpointStore::Open((dir_ / "plainfile").string());
  ASSERT_FALSE(not_dir.ok());
  EXPECT_NE(not_dir.status().message().find("cannot create"), std::string::npos);
}

TEST_F(CheckpointTest, RenamedFileIsNotTakenForAnotherName) {
  auto store = CheckpointStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(store->Write(Sample("p1", 10)).ok());
  fs::copy_file(dir_ / "p1.00000000000000000001.ckpt", dir_ / "p2.00000000000000000001.ckpt");
  auto loaded = store->LoadLatest("p2");
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("holds 'p1'"), std::string::npos)
      << loaded.status().message();
}

}  // namespace
}  // namespace surge::stream
