#include "stream/codec.h"

#include <gtest/gtest.h>

#include "stream/hash.h"

namespace surge::stream {
namespace {

// A block of three posts with a few terms each, texts in the arena.
std::shared_ptr<AnnotatedBlock> MakeBlock() {
  auto b = std::make_shared<AnnotatedBlock>();
  b->sequence = 7;
  b->categories =
      std::make_shared<std::vector<std::string>>(std::vector<std::string>{"科技", "体育"});
  b->embedding_dim = 2;
  const char* texts[] = {"AI推理革命来了", "国足逆转绝杀", "今天天气不错"};
  const std::vector<std::vector<const char*>> terms = {
      {"AI", "推理", "革命"}, {"国足", "逆转", "绝杀"}, {"今天", "天气", "不错"}};
  for (int i = 0; i < 3; ++i) {
    AnnotatedPost p;
    std::string id = "p" + std::to_string(i);
    p.key = HashBytes(id);
    p.author = HashBytes("u" + std::to_string(i));
    p.repost_of = i == 2 ? HashBytes("p0") : 0;
    p.simhash = 0x1234 + i;
    p.ts_ms = 1000 * i;
    p.quality = 0.5f + 0.1f * i;
    p.followers = 10 * i;
    p.likes = i;
    p.flags = static_cast<uint16_t>(i);
    p.category = static_cast<int16_t>(i % 2);
    p.sentiment = {0.2f, 0.5f, 0.3f};
    p.id_off = static_cast<uint32_t>(b->arena.size());
    p.id_len = static_cast<uint16_t>(id.size());
    b->arena += id;
    std::string user = "user" + std::to_string(i);
    p.user_off = static_cast<uint32_t>(b->arena.size());
    p.user_len = static_cast<uint16_t>(user.size());
    b->arena += user;
    p.text_off = static_cast<uint32_t>(b->arena.size());
    p.text_len = static_cast<uint32_t>(strlen(texts[i]));
    b->arena += texts[i];
    p.term_begin = static_cast<uint32_t>(b->terms.size());
    for (size_t k = 0; k < terms[i].size(); ++k) {
      TermOcc t;
      t.hash = HashBytes(terms[i][k]);
      t.weight = 1.0f + k;
      t.text_off = static_cast<uint32_t>(b->arena.size());
      t.text_len = static_cast<uint16_t>(strlen(terms[i][k]));
      b->arena += terms[i][k];
      t.ordinal = static_cast<uint16_t>(k);
      t.flags = k < 2 ? TermOcc::kTop : 0;
      b->terms.push_back(t);
    }
    p.term_count = static_cast<uint16_t>(terms[i].size());
    b->posts.push_back(p);
    b->embeddings.push_back(0.6f);
    b->embeddings.push_back(0.8f);
  }
  b->offsets.next[0] = 99;
  return b;
}

TEST(CodecTest, TermBatchCarriesEverythingItsPartitionNeeds) {
  auto block = MakeBlock();
  for (int32_t parts : {1, 3}) {
    for (int32_t part = 0; part < parts; ++part) {
      TermBatch tb{block, part, parts, 12345};
      std::string bytes;
      EncodeTermBatch(tb, &bytes);
      auto back = DecodeTermBatch(bytes);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_EQ(back->partition, part);
      EXPECT_EQ(back->partitions, parts);
      EXPECT_EQ(back->watermark_ms, 12345);
      const AnnotatedBlock& d = *back->block;
      EXPECT_EQ(d.sequence, 7u);
      EXPECT_EQ(d.offsets, block->offsets);
      ASSERT_TRUE(d.categories);
      EXPECT_EQ(*d.categories, *block->categories);
      // Every term of this partition, and every pair of top terms it owns, survives.
      size_t want_terms = 0, got_terms = 0;
      for (const auto& p : block->posts) {
        for (size_t k = 0; k < p.term_count; ++k) {
          want_terms += PartitionOf(block->terms[p.term_begin + k].hash, parts) == part;
        }
      }
      for (size_t i = 0; i < d.posts.size(); ++i) {
        const AnnotatedPost& p = d.posts[i];
        // Find the original post by key and compare its fields.
        const AnnotatedPost* o = nullptr;
        size_t oi = 0;
        for (size_t j = 0; j < block->posts.size(); ++j) {
          if (block->posts[j].key == p.key) {
            o = &block->posts[j];
            oi = j;
          }
        }
        ASSERT_NE(o, nullptr);
        EXPECT_EQ(d.Id(p), block->Id(*o));
        EXPECT_EQ(d.PostText(p), block->PostText(*o));
        EXPECT_EQ(d.User(p), block->User(*o));
        EXPECT_EQ(p.repost_of, o->repost_of);
        EXPECT_EQ(p.ts_ms, o->ts_ms);
        EXPECT_EQ(p.quality, o->quality);
        EXPECT_EQ(p.likes, o->likes);
        EXPECT_EQ(p.category, o->category);
        EXPECT_EQ(p.sentiment, o->sentiment);
        EXPECT_EQ(d.Embedding(i)[1], block->Embedding(oi)[1]);
        for (size_t k = 0; k < p.term_count; ++k) {
          const TermOcc& t = d.terms[p.term_begin + k];
          got_terms += PartitionOf(t.hash, parts) == part;
          EXPECT_EQ(HashBytes(d.Text(t)), t.hash);
        }
      }
      EXPECT_EQ(got_terms, want_terms);
      if (parts == 1) {
        EXPECT_EQ(d.posts.size(), 3u);
      }
    }
  }
}

TEST(CodecTest, CandidateBatchRoundTrip) {
  CandidateBatch b;
  b.shard = 1;
  b.shards = 2;
  b.bucket = 29411290;
  b.bucket_ms = 60000;
  b.posts = 500;
  b.replays_dropped = 3;
  b.read_wall = {{111, 5}, {222, 6}};
  Candidate c;
  c.key = PairHash(1, 2);
  c.term_a = 1;
  c.term_b = 2;
  c.text = "推理";
  c.text_b = "革命";
  c.significant = true;
  c.score = 7.5;
  c.count = 40;
  c.posts = 41;
  c.young = 2;
  c.category = {1, 2};
  c.embedding = {0.5f, -0.5f};
  for (int i = 0; i < 100; ++i) c.authors.Add(HashBytes(std::to_string(i)));
  c.samples = {{5, "p5", "text five", "u5", 1000, 3, 1}, {9, "p9", "text nine", "u9", 2000, 0, 2}};
  c.first_seen_ms = 1764677400000;
  b.candidates.push_back(c);
  std::string bytes;
  EncodeCandidateBatch(b, &bytes);
  auto back = DecodeCandidateBatch(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->candidates.size(), 1u);
  const Candidate& d = back->candidates[0];
  EXPECT_EQ(back->bucket, b.bucket);
  EXPECT_EQ(back->read_wall, b.read_wall);
  EXPECT_EQ(d.key, c.key);
  EXPECT_EQ(d.text_b, "革命");
  EXPECT_TRUE(d.significant);
  EXPECT_EQ(d.score, 7.5);
  EXPECT_EQ(d.young, 2);
  EXPECT_EQ(d.category, c.category);
  EXPECT_EQ(d.embedding, c.embedding);
  EXPECT_DOUBLE_EQ(d.authors.Estimate(), c.authors.Estimate());
  ASSERT_EQ(d.samples.size(), 2u);
  EXPECT_EQ(d.samples[1].text, "text nine");
  EXPECT_EQ(d.samples[1].span, 2);
  EXPECT_EQ(d.samples[1].user, "u9");
  EXPECT_EQ(d.samples[1].ts_ms, 2000);
  EXPECT_EQ(d.first_seen_ms, c.first_seen_ms);
}

TEST(CodecTest, CorruptOrForeignBytesAreRejectedClearly) {
  TermBatch tb{MakeBlock(), 0, 1};
  std::string bytes;
  EncodeTermBatch(tb, &bytes);
  // Truncated.
  auto r = DecodeTermBatch(std::string_view(bytes).substr(0, bytes.size() - 10));
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  // One flipped payload byte: checksum.
  std::string flipped = bytes;
  flipped[30] ^= 0x40;
  r = DecodeTermBatch(flipped);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("checksum"), std::string::npos) << r.status().message();
  // A candidate batch is not a term batch.
  CandidateBatch cb;
  std::string other;
  EncodeCandidateBatch(cb, &other);
  r = DecodeTermBatch(other);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kind"), std::string::npos);
  // A newer format version.
  std::string newer = bytes;
  newer[5] = static_cast<char>(kTermBatchVersion + 1);
  r = DecodeTermBatch(newer);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("version"), std::string::npos);
  EXPECT_FALSE(DecodeTermBatch("garbage").ok());
  // Keys.
  EXPECT_EQ(*DecodeKey(EncodeKey(0x0102030405060708ULL)), 0x0102030405060708ULL);
  EXPECT_EQ(EncodeKey(1), std::string("\0\0\0\0\0\0\0\1", 8));
  EXPECT_FALSE(DecodeKey("abc").ok());
}

}  // namespace
}  // namespace surge::stream
