// Hugging Face importer: the fixture checkpoints become fused graphs whose outputs (run through
// the reference evaluator) match PyTorch's stored in reference.json; bad configs and
// corrupt safetensors files give clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "core/mmap_file.h"
#include "engine/import/importer.h"
#include "engine/import/safetensors.h"
#include "engine/ir/eval.h"
#include "engine/passes/passes.h"

namespace surge::engine::import {
namespace {

namespace fs = std::filesystem;

fs::path FixtureDir() {
  if (const char* env = std::getenv("SURGE_MODEL_FIXTURES")) return env;
  return fs::path(SURGE_SOURCE_DIR) / "tests" / "fixtures" / "models";
}

// Runs `g` node by node with the reference evaluator.
Result<std::vector<Tensor>> Evaluate(const ir::Graph& g,
                                     const std::map<std::string, Tensor>& feeds) {
  std::vector<Tensor> vals(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i) {
    if (g.values[i].is_constant()) vals[i] = g.values[i].constant;
  }
  for (int in : g.inputs) {
    auto it = feeds.find(g.values[in].name);
    if (it == feeds.end()) return InvalidArgumentError("no feed for '{}'", g.values[in].name);
    vals[in] = it->second;
  }
  for (const auto& n : g.nodes) {
    std::vector<Tensor> ins;
    for (int in : n.inputs) ins.push_back(in >= 0 ? vals[in] : Tensor());
    std::vector<Tensor> outs;
    SURGE_RETURN_IF_ERROR(ir::EvalNode(n, ins, &outs));
    for (size_t i = 0; i < n.outputs.size() && i < outs.size(); ++i) vals[n.outputs[i]] = outs[i];
  }
  std::vector<Tensor> out;
  for (int o : g.outputs) out.push_back(vals[o]);
  return out;
}

struct HfCase {
  std::string folder;  // under the fixture dir
  std::vector<std::string> inputs;
  bool token_logits;
  int layers;
};

void PrintTo(const HfCase& c, std::ostream* os) { *os << c.folder; }

class HfFixtureTest : public ::testing::TestWithParam<HfCase> {};

TEST_P(HfFixtureTest, ImportsFusedGraphMatchingPyTorch) {
  const HfCase& c = GetParam();
  fs::path dir = FixtureDir() / c.folder;
  ASSERT_TRUE(fs::exists(dir / "config.json"))
      << "model fixture " << dir << " is missing: run tools/fixtures/make_models.py";
  auto g = ImportHuggingFace(dir.string());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->inputs.size(), c.inputs.size());
  for (size_t i = 0; i < c.inputs.size(); ++i) EXPECT_EQ(g->values[g->inputs[i]].name, c.inputs[i]);
  ASSERT_EQ(g->outputs.size(), 1u);
  EXPECT_EQ(g->values[g->outputs[0]].name, "logits");
  auto counts = g->OpCounts();
  EXPECT_EQ(counts["surge::EmbedLayerNorm"], 1);
  EXPECT_EQ(counts["surge::Attention"], c.layers);
  EXPECT_EQ(counts["surge::SkipLayerNorm"], 2 * c.layers);
  ASSERT_TRUE(passes::InferShapes(*g).ok());
  for (const auto& v : g->values) {
    EXPECT_TRUE(v.shape.has_value() && v.dtype != DType::kUndefined) << v.name;
  }
  const auto& logits = *g->values[g->outputs[0]].shape;
  EXPECT_EQ(ir::SymShapeToString(logits), c.token_logits ? "[batch,seq,3]" : "[batch,3]");
  for (const auto& v : g->values) {
    if (v.is_constant() && IsFloating(v.dtype)) {
      EXPECT_EQ(v.dtype, DType::kFloat32) << v.name;
    }
  }

  // PyTorch's outputs for the same weights (reference.json next to the hf folder).
  fs::path ref_path = FixtureDir() / fs::path(c.folder).parent_path() / "reference.json";
  auto text = ReadFileToString(ref_path.string());
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  auto ref = nlohmann::json::parse(*text, nullptr, false);
  ASSERT_TRUE(ref.is_array() && !ref.empty()) << ref_path;
  // Half-precision checkpoints hold rounded weights; PyTorch ran the float32 model.
  const bool half = c.folder.find("hf_") != std::string::npos;
  const double tol = half ? 5e-3 : 1e-4;
  for (const auto& rc : ref) {
    std::map<std::string, Tensor> feeds;
    for (const auto& [name, t] : rc["inputs"].items()) {
      Shape shape = t["shape"].get<Shape>();
      Tensor x(DType::kInt64, shape);
      auto data = t["data"].get<std::vector<int64_t>>();
      ASSERT_EQ(static_cast<int64_t>(data.size()), x.numel());
      std::copy(data.begin(), data.end(), x.data_as<int64_t>());
      feeds[name] = x;
    }
    auto got = Evaluate(*g, feeds);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const auto& want = rc["outputs"]["logits"];
    Tensor a = (*got)[0].ToFloat32();
    ASSERT_EQ(a.shape(), want["shape"].get<Shape>());
    auto wd = want["data"].get<std::vector<double>>();
    double max_err = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      double x = a.data_as<float>()[i], y = wd[i];
      max_err = std::max(max_err, std::fabs(x - y) / std::max(1.0, std::fabs(y)));
    }
    EXPECT_LT(max_err, tol) << c.folder << " case " << ShapeToString(a.shape());
  }
}

std::vector<HfCase> HfCases() {
  std::vector<std::string> bert_in{"input_ids", "attention_mask", "token_type_ids"};
  std::vector<std::string> two_in{"input_ids", "attention_mask"};
  return {
      {"bert_seqcls/hf", bert_in, false, 2},      {"bert_seqcls/hf_fp16", bert_in, false, 2},
      {"bert_seqcls/hf_bf16", bert_in, false, 2}, {"bert_tokcls/hf", bert_in, true, 2},
      {"roberta_seqcls/hf", two_in, false, 2},    {"distilbert_seqcls/hf", two_in, false, 2},
      {"electra_seqcls/hf", bert_in, false, 2},
  };
}

std::string CaseName(const ::testing::TestParamInfo<HfCase>& info) {
  std::string n = info.param.folder;
  for (char& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
}

INSTANTIATE_TEST_SUITE_P(Models, HfFixtureTest, ::testing::ValuesIn(HfCases()), CaseName);

// A copy of a fixture folder whose config.json is edited by `edit` (weights are linked).
class HfVariantTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           fmt::format("hfv_{}_{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                       getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Variant(const std::string& folder, const std::function<void(nlohmann::json&)>& edit) {
    fs::path src = FixtureDir() / folder;
    auto text = ReadFileToString((src / "config.json").string());
    EXPECT_TRUE(text.ok()) << "model fixture " << src << " is missing";
    if (!text.ok()) return "";
    auto cfg = nlohmann::json::parse(*text);
    edit(cfg);
    std::ofstream(dir_ / "config.json") << cfg.dump();
    fs::remove(dir_ / "model.safetensors");
    fs::create_symlink(fs::absolute(src / "model.safetensors"), dir_ / "model.safetensors");
    return dir_.string();
  }
  fs::path dir_;
};

TEST_F(HfVariantTest, BaseModelOutputsLastHiddenState) {
  std::string dir =
      Variant("bert_seqcls/hf", [](nlohmann::json& c) { c["architectures"] = {"BertModel"}; });
  auto g = ImportHuggingFace(dir);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->outputs.size(), 1u);
  EXPECT_EQ(g->values[g->outputs[0]].name, "last_hidden_state");
  ASSERT_TRUE(passes::InferShapes(*g).ok());
  EXPECT_EQ(ir::SymShapeToString(*g->values[g->outputs[0]].shape), "[batch,seq,64]");
  for (const auto& n : g->nodes) EXPECT_NE(n.GetString("activation", ""), "tanh") << n.name;

  dir = Variant("distilbert_seqcls/hf", [](nlohmann::json& c) { c.erase("architectures"); });
  g = ImportHuggingFace(dir);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->values[g->outputs[0]].name, "last_hidden_state");
  EXPECT_EQ(g->inputs.size(), 2u);
}

TEST_F(HfVariantTest, XlmRobertaIsRoberta) {
  std::string dir = Variant("roberta_seqcls/hf", [](nlohmann::json& c) {
    c["architectures"] = {"XLMRobertaForSequenceClassification"};
    c["model_type"] = "xlm-roberta";
  });
  auto g = ImportHuggingFace(dir);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto r = ImportHuggingFace((FixtureDir() / "roberta_seqcls/hf").string());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(g->OpCounts(), r->OpCounts());
  EXPECT_EQ(g->inputs.size(), 2u);
  const auto& embed = g->nodes[0];
  EXPECT_EQ(embed.GetString("position_mode", ""), "roberta");
  EXPECT_EQ(embed.GetInt("padding_idx", -1), 1);
}

TEST_F(HfVariantTest, UnsupportedConfigOptionsAreNamed) {
  std::string dir = Variant(
      "bert_seqcls/hf", [](nlohmann::json& c) { c["position_embedding_type"] = "relative_key"; });
  auto g = ImportHuggingFace(dir);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("relative_key"), std::string::npos);
  dir = Variant("bert_seqcls/hf", [](nlohmann::json& c) { c["hidden_act"] = "swish"; });
  g = ImportHuggingFace(dir);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("swish"), std::string::npos);
  dir = Variant("bert_seqcls/hf", [](nlohmann::json& c) { c["num_hidden_layers"] = 3; });
  g = ImportHuggingFace(dir);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("layer.2"), std::string::npos) << g.status().message();
}

// Hand-made checkpoints for bad input.
class HfBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           fmt::format("hf_{}_{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                       getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void WriteFile(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary).write(bytes.data(), bytes.size());
  }
  // A safetensors file from a header JSON and a data section.
  static std::string Safetensors(const std::string& header, const std::string& data) {
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return out + header + data;
  }
  std::string Path(const std::string& name) { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(HfBadInputTest, SafetensorsReadsValidFile) {
  float v[3] = {1.5f, -2.0f, 3.25f};
  uint16_t h[2] = {FloatToHalf(0.5f), FloatToHalf(-1.0f)};
  std::string data(reinterpret_cast<const char*>(v), 12);
  data.append(reinterpret_cast<const char*>(h), 4);
  WriteFile("ok.safetensors",
            Safetensors(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[3],)"
                        R"("data_offsets":[0,12]},"b":{"dtype":"F16","shape":[2,1],)"
                        R"("data_offsets":[12,16]}})",
                        data));
  auto st = SafeTensors::Open(Path("ok.safetensors"));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  auto a = st->ReadFloat32("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->data_as<float>()[2], 3.25f);
  auto b = st->ReadFloat32("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->shape(), (Shape{2, 1}));
  EXPECT_EQ(b->data_as<float>()[1], -1.0f);
  auto missing = st->ReadFloat32("c");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'c'"), std::string::npos);
}

TEST_F(HfBadInputTest, SafetensorsCorruptionIsAnError) {
  std::string data(12, '\0');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"short", std::string("\x05\x00\x00", 3)},
      {"huge_header", std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "{}"},
      {"not_json", Safetensors("{not json", data)},
      {"not_object", Safetensors("[1,2]", data)},
      {"past_end", Safetensors(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}})", data)},
      {"reversed", Safetensors(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", data)},
      {"size_mismatch",
       Safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})", data)},
      {"negative_dim",
       Safetensors(R"({"a":{"dtype":"F32","shape":[-3],"data_offsets":[0,12]}})", data)},
      {"bad_dtype", Safetensors(R"({"a":{"dtype":"Q7","shape":[3],"data_offsets":[0,12]}})", data)},
      {"no_offsets", Safetensors(R"({"a":{"dtype":"F32","shape":[3]}})", data)},
      {"giant_shape",
       Safetensors(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,12]}})",
                   data)},
  };
  for (const auto& [name, bytes] : cases) {
    WriteFile(name, bytes);
    auto st = SafeTensors::Open(Path(name));
    ASSERT_FALSE(st.ok()) << name;
    EXPECT_EQ(st.status().code(), StatusCode::kDataLoss) << name << ": " << st.status().ToString();
  }
  // Every truncation of a valid file is caught.
  std::string good =
      Safetensors(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", data);
  for (size_t len = 0; len < good.size(); ++len) {
    WriteFile("cut", good.substr(0, len));
    EXPECT_FALSE(SafeTensors::Open(Path("cut")).ok()) << len;
  }
}

TEST_F(HfBadInputTest, UnknownArchitectureListsSupportedOnes) {
  WriteFile("config.json", R"({"architectures":["GPT2LMHeadModel"],"model_type":"gpt2"})");
  auto g = ImportHuggingFace(dir_.string());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(g.status().message().find("GPT2LMHeadModel"), std::string::npos);
  EXPECT_NE(g.status().message().find("BertForSequenceClassification"), std::string::npos);
  WriteFile("config.json", R"({"model_type":"t5"})");
  g = ImportHuggingFace(dir_.string());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("t5"), std::string::npos);
}

TEST_F(HfBadInputTest, MissingFilesAndBadConfig) {
  auto g = ImportHuggingFace(dir_.string());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("config.json"), std::string::npos);
  WriteFile("config.json", "{\"architectures\": [");
  EXPECT_FALSE(ImportHuggingFace(dir_.string()).ok());
  WriteFile("config.json", R"({"architectures":["BertModel"],"hidden_size":"big"})");
  g = ImportHuggingFace(dir_.string());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("hidden_size"), std::string::npos);
  WriteFile("config.json",
            R"({"architectures":["BertModel"],"hidden_size":4,"num_hidden_layers":1,)"
            R"("num_attention_heads":2,"intermediate_size":8,"vocab_size":10,)"
            R"("max_position_embeddings":8})");
  g = ImportHuggingFace(dir_.string());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("model.safetensors"), std::string::npos);
}

TEST_F(HfBadInputTest, MissingOrMisshapenTensorIsNamed) {
  WriteFile("config.json",
            R"({"architectures":["BertModel"],"hidden_size":4,"num_hidden_layers":1,)"
            R"("num_attention_heads":2,"intermediate_size":8,"vocab_size":10,)"
            R"("max_position_embeddings":8,"type_vocab_size":2})");
  // Word embeddings of the wrong shape.
  std::string data(4 * 10 * 3, '\0');
  WriteFile("model.safetensors",
            Safetensors(R"({"embeddings.word_embeddings.weight":{"dtype":"F32","shape":[10,3],)"
                        R"("data_offsets":[0,120]}})",
                        data));
  auto g = ImportHuggingFace(dir_.string());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("embeddings.word_embeddings.weight"), std::string::npos)
      << g.status().message();
  EXPECT_NE(g.status().message().find("[10,4]"), std::string::npos) << g.status().message();
  // Right shape, but the rest is missing.
  std::string data2(4 * 10 * 4, '\0');
  WriteFile("model.safetensors",
            Safetensors(R"({"embeddings.word_embeddings.weight":{"dtype":"F32","shape":[10,4],)"
                        R"("data_offsets":[0,160]}})",
                        data2));
  g = ImportHuggingFace(dir_.string());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("embeddings.position_embeddings.weight"), std::string::npos)
      << g.status().message();
}

}  // namespace
}  // namespace surge::engine::import
