// Annotate resources shared by the stream tests (loading the dictionary takes a moment).
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "stream/annotate.h"
#include "stream/detect.h"

namespace surge::stream::testing {

// Lexical resources without new-word learning (deterministic).
inline std::shared_ptr<AnnotateResources> LexicalResources() {
  static std::shared_ptr<AnnotateResources> r = [] {
    AnnotateOptions o;
    o.new_words = false;
    auto res = AnnotateResources::Create(o);
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    return res.ok() ? *res : nullptr;
  }();
  return r;
}

// Annotates `posts` in blocks of `block` posts.
inline std::vector<std::shared_ptr<AnnotatedBlock>> AnnotateAll(const std::vector<Post>& posts,
                                                                size_t block = 500) {
  auto a = Annotator::Create(LexicalResources());
  EXPECT_TRUE(a.ok());
  std::vector<std::shared_ptr<AnnotatedBlock>> out;
  for (size_t i = 0; i < posts.size(); i += block) {
    RecordBlock rb;
    rb.sequence = out.size();
    for (size_t k = i; k < std::min(posts.size(), i + block); ++k) {
      rb.posts.push_back(posts[k]);
      rb.post_positions.push_back({0, static_cast<int64_t>(k)});
    }
    auto ab = std::make_shared<AnnotatedBlock>();
    EXPECT_TRUE((*a)->Annotate(rb, "test", nullptr, ab.get()).ok());
    out.push_back(std::move(ab));
  }
  return out;
}

// Runs one detect stage over the blocks (and Finish).
inline std::vector<CandidateBatch> DetectAll(
    DetectStage* d, const std::vector<std::shared_ptr<AnnotatedBlock>>& blocks) {
  std::vector<CandidateBatch> out;
  for (const auto& b : blocks) {
    Status st = d->Process(TermBatch{b, d->shard(), d->shards()}, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  d->Finish(&out);
  return out;
}

}  // namespace surge::stream::testing
