#include "stream/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "resources.h"
#include "stream/annotate.h"
#include "stream/hash.h"
#include "synthetic.h"

namespace surge::stream {
namespace {

namespace fs = std::filesystem;
const std::string kModelDir = std::string(SURGE_SOURCE_DIR) + "/tests/fixtures/stream_model";

std::shared_ptr<const ModelRunner> Runner() {
  static std::shared_ptr<const ModelRunner> r = [] {
    auto m = ModelRunner::Load(kModelDir);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : nullptr;
  }();
  return r;
}

TEST(ModelTest, MatchesTheReferenceOutputs) {
  auto runner = Runner();
  ASSERT_NE(runner, nullptr);
  EXPECT_EQ(runner->hidden(), 16);
  EXPECT_EQ(runner->contract().categories.size(), 5u);
  std::ifstream in(kModelDir + "/reference.json");
  nlohmann::json ref = nlohmann::json::parse(in);
  std::vector<std::string> texts;
  for (const auto& t : ref["texts"]) texts.push_back(t["text"]);
  std::vector<std::string_view> views(texts.begin(), texts.end());
  auto session = runner->NewSession();
  ASSERT_TRUE(session.ok());
  ModelOutputs out;
  ASSERT_TRUE((*session)->Run(views, &out).ok());
  ASSERT_EQ(out.categories, 5);
  ASSERT_EQ(out.hidden, 16);
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto& r = ref["texts"][i];
    for (int c = 0; c < 5; ++c) {
      EXPECT_NEAR(out.category[i * 5 + c], r["category"][c].get<double>(), 1e-4) << texts[i];
    }
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(out.sentiment[i * 3 + k], r["sentiment"][k].get<double>(), 1e-4) << texts[i];
    }
    for (int h = 0; h < 16; ++h) {
      EXPECT_NEAR(out.embedding[i * 16 + h], r["embedding"][h].get<double>(), 1e-4) << texts[i];
    }
    // One keyword weight per character, mapped to its bytes.
    ASSERT_EQ(out.keywords[i].size(), r["keywords"].size()) << texts[i];
    for (size_t k = 0; k < out.keywords[i].size(); ++k) {
      EXPECT_EQ(out.keywords[i][k].begin, 3 * k);
      EXPECT_EQ(out.keywords[i][k].end, 3 * k + 3);
      EXPECT_NEAR(out.keywords[i][k].prob, r["keywords"][k].get<double>(), 1e-4);
    }
  }
  EXPECT_GT(runner->latency().Quantile(0.99), 0);
  EXPECT_EQ(runner->backend(), "cpu");
  // Length buckets: the four texts sorted by length ran as one batch.
  EXPECT_EQ((*session)->batches(), 1);
  EXPECT_LE((*session)->padded_tokens(), 4 * 16);
}

TEST(ModelTest, BatchesAreCutAtTheMaximum) {
  ModelOptions o;
  o.max_batch = 3;
  auto runner = ModelRunner::Load(kModelDir, o);
  ASSERT_TRUE(runner.ok());
  auto session = (*runner)->NewSession();
  std::vector<std::string> texts;
  for (int i = 0; i < 10; ++i) texts.push_back(std::string(i + 1, 'a') + "今天");
  // A text longer than max_length is truncated, not an error.
  texts.push_back(std::string(500, 'b'));
  std::vector<std::string_view> views(texts.begin(), texts.end());
  ModelOutputs out;
  ASSERT_TRUE((*session)->Run(views, &out).ok());
  EXPECT_EQ((*session)->batches(), 4);
  EXPECT_EQ(out.keywords.size(), texts.size());
  double sum = 0;
  for (int c = 0; c < 5; ++c) sum += out.category[10 * 5 + c];
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

TEST(ModelTest, AnnotateUsesTheModelsHeads) {
  AnnotateOptions o;
  o.new_words = false;
  o.model_dir = kModelDir;
  auto res = AnnotateResources::Create(o);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  auto a = Annotator::Create(*res);
  ASSERT_TRUE(a.ok());
  testing::StreamSpec spec;
  spec.buckets = 1;
  spec.background_per_bucket = 50;
  RecordBlock rb;
  for (const Post& p : testing::MakeStream(spec)) {
    rb.posts.push_back(p);
    rb.post_positions.push_back({0, 0});
  }
  AnnotatedBlock out;
  ASSERT_TRUE((*a)->Annotate(rb, "test", nullptr, &out).ok());
  ASSERT_EQ(out.posts.size(), 50u);
  EXPECT_EQ(out.embedding_dim, 16);
  ASSERT_EQ(out.embeddings.size(), 50u * 16);
  EXPECT_EQ(*out.categories, Runner()->contract().categories);
  for (size_t i = 0; i < out.posts.size(); ++i) {
    const AnnotatedPost& p = out.posts[i];
    EXPECT_TRUE(p.flags & AnnotatedPost::kModel);
    EXPECT_GE(p.category, 0);
    EXPECT_LT(p.category, 5);
    EXPECT_NEAR(p.sentiment[0] + p.sentiment[1] + p.sentiment[2], 1.0, 1e-5);
    double norm = 0;
    for (int h = 0; h < 16; ++h) norm += out.Embedding(i)[h] * out.Embedding(i)[h];
    EXPECT_NEAR(norm, 1.0, 1e-4);
    // Top terms are the heaviest after the model's keyword weights.
    const TermOcc* t = out.terms.data() + p.term_begin;
    for (size_t k = 1; k < p.term_count; ++k) EXPECT_GE(t[k - 1].weight, t[k].weight);
  }
}

TEST(ModelTest, LatencyWindowQuantiles) {
  LatencyWindow w;
  EXPECT_EQ(w.Quantile(0.99), 0);
  for (int i = 1; i <= 100; ++i) w.Add(i);
  EXPECT_EQ(w.Quantile(0.5), 50);
  EXPECT_EQ(w.Quantile(0.99), 99);
  EXPECT_EQ(w.Quantile(1.0), 100);
  for (int i = 0; i < 2000; ++i) w.Add(7);  // the window keeps the last 1024
  EXPECT_EQ(w.Quantile(1.0), 7);
}

TEST(ModelTest, ContractErrorsAreClear) {
  struct Case {
    const char* json;
    const char* mentions;
  };
  const Case cases[] = {
      {"not json", "not valid JSON"},
      {R"({"format":2})", "'format' must be 1"},
      {R"({"format":1})", "'tokenizer'"},
      {R"({"format":1,"tokenizer":{"kind":"sentencepiece","vocab":"v"}})", "bert_wordpiece"},
      {R"({"format":1,"tokenizer":{"kind":"bert_wordpiece","vocab":"v","max_length":4}})",
       "max_length"},
      {R"({"format":1,"tokenizer":{"kind":"bert_wordpiece","vocab":"v"},"categories":[]})",
       "categories"},
      {R"({"format":1,"tokenizer":{"kind":"bert_wordpiece","vocab":"v"},"categories":["a"],)"
       R"("sentiments":["pos","neu","bad"]})",
       "'neg'"},
      {R"({"format":1,"tokenizer":{"kind":"bert_wordpiece","vocab":"v"},"categories":["a"],)"
       R"("outputs":{"category":"c","sentiment":"s","keyword":"k"}})",
       "outputs.embedding"},
  };
  for (const auto& c : cases) {
    auto r = ParseModelContract(c.json, "m/surge_model.json");
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(r.status().message().find(c.mentions), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("m/surge_model.json"), std::string::npos);
  }
  auto ok = ParseModelContract(
      R"({"format":1,"tokenizer":{"kind":"bert_wordpiece","vocab":"v.txt"},"categories":["a"],)"
      R"("sentiments":["neg","pos","neu"],"outputs":{"category":"c","sentiment":"s",)"
      R"("keyword":"k","embedding":"e"}})",
      "x");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->sentiment_index[0], 1);  // pos is the second logit
  EXPECT_EQ(ok->sentiment_index[2], 0);
  EXPECT_EQ(ok->max_length, 64);
}

TEST(ModelTest, MissingOrBrokenFoldersAreClear) {
  auto missing = ModelRunner::Load("/nonexistent/model");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);
  // A folder whose contract names an output the network lacks.
  fs::path dir = fs::temp_directory_path() / ("surge_model_test." + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(kModelDir + "/model.onnx", dir / "model.onnx");
  fs::copy_file(kModelDir + "/vocab.txt", dir / "vocab.txt");
  std::ofstream(dir / "surge_model.json")
      << R"({"format":1,"tokenizer":{"kind":"bert_wordpiece","vocab":"vocab.txt"},)"
         R"("categories":["a","b","c","d","e"],"outputs":{"category":"category_logits",)"
         R"("sentiment":"sentiment_logits","keyword":"keyword_logits","embedding":"pooled"}})";
  auto bad = ModelRunner::Load(dir.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'pooled'"), std::string::npos) << bad.status().message();
  // Wrong number of categories: the output shape disagrees.
  std::ofstream(dir / "surge_model.json", std::ios::trunc)
      << R"({"format":1,"tokenizer":{"kind":"bert_wordpiece","vocab":"vocab.txt"},)"
         R"("categories":["a","b"],"outputs":{"category":"category_logits",)"
         R"("sentiment":"sentiment_logits","keyword":"keyword_logits","embedding":"embedding"}})";
  auto wrong = ModelRunner::Load(dir.string());
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("category_logits"), std::string::npos)
      << wrong.status().message();
  fs::remove(dir / "model.onnx");
  auto no_onnx = ModelRunner::Load(dir.string());
  ASSERT_FALSE(no_onnx.ok());
  EXPECT_NE(no_onnx.status().message().find("model.onnx"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace surge::stream
