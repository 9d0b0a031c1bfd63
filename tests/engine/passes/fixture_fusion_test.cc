// Optimises the exported model fixtures (tests/fixtures/models, made by
// tools/fixtures/make_models.py; SURGE_MODEL_FIXTURES overrides the folder) and checks:
//  - exact fused-op counts per architecture and exporter, with no leftover elementwise/layout ops;
//  - the optimised graph, interpreted with ir::EvalNode, still matches PyTorch's reference logits
//    within 1e-4 relative error (and so does the unfused graph).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/import/importer.h"
#include "engine/passes/passes.h"
#include "graph_util.h"

namespace surge::engine::passes {
namespace {

namespace fs = std::filesystem;
using testing::Count;
using testing::RunGraph;

fs::path FixtureDir() {
  if (const char* env = std::getenv("SURGE_MODEL_FIXTURES")) return env;
  return fs::path(SURGE_SOURCE_DIR) / "tests" / "fixtures" / "models";
}

struct Expect {
  std::string folder;
  int layers;
  int linears;  // every dense layer, QKV merged into one
  std::vector<std::string> files;
};

// Per architecture (2-layer tiny models; bert12_tiny has 12): per layer one merged QKV, the
// attention output, FFN up (gelu) and FFN down; plus the head: BERT pooler(tanh) + classifier,
// RoBERTa dense(tanh) + out_proj, DistilBERT pre_classifier(relu) + classifier, ELECTRA
// dense(gelu) + out_proj and its embedding projection; token classifiers have one classifier.
// "hf" is the Hugging Face folder (already fused by its importer; passes must keep it intact).
const std::vector<std::string> kBoth = {"model.torchscript.onnx", "model.dynamo.onnx", "hf"};
const std::vector<std::string> kTorchScript = {"model.torchscript.onnx"};
const std::vector<Expect> kExpect = {
    {"bert_seqcls", 2, 2 * 4 + 2, kBoth},
    {"roberta_seqcls", 2, 2 * 4 + 2, kBoth},
    {"distilbert_seqcls", 2, 2 * 4 + 2, kBoth},
    {"electra_seqcls", 2, 2 * 4 + 3, kBoth},
    {"bert12_tiny", 12, 12 * 4 + 2, {"model.torchscript.onnx", "model.dynamo.onnx"}},
    {"bert_tokcls", 2, 2 * 4 + 1, {"model.torchscript.onnx", "hf"}},
    {"roberta_tokcls", 2, 2 * 4 + 1, kTorchScript},
    {"distilbert_tokcls", 2, 2 * 4 + 1, kTorchScript},
    {"electra_tokcls", 2, 2 * 4 + 2, kTorchScript},
};

// Ops that must not survive fusion of an encoder.
const char* const kLeftoverOps[] = {"Add",       "Sub",        "Mul",
                                    "Div",       "Pow",        "Sqrt",
                                    "Erf",       "Tanh",       "Relu",
                                    "Softmax",   "ReduceMean", "Reshape",
                                    "Transpose", "MatMul",     "Gemm",
                                    "Where",     "Expand",     "Equal",
                                    "Not",       "CumSum",     "LayerNormalization",
                                    "Unsqueeze", "Concat",     "ConstantOfShape"};

struct Case {
  Expect expect;
  std::string file;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.expect.folder << "/" << c.file; }

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (const Expect& e : kExpect) {
    for (const std::string& file : e.files) out.push_back({e, file});
  }
  return out;
}

class FixtureFusion : public ::testing::TestWithParam<Case> {};

Tensor FromJson(const nlohmann::json& j, DType dt) {
  Shape shape = j["shape"].get<Shape>();
  Tensor t(dt, shape);
  const auto& data = j["data"];
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::kInt64) {
      t.data_as<int64_t>()[i] = data[i].get<int64_t>();
    } else {
      t.data_as<float>()[i] = data[i].get<float>();
    }
  }
  return t;
}

// Max |a - b| / max(|b|, 1e-2 * max|b|) over the reference logits: relative error per element,
// with values near zero measured against 1% of the output scale. *where describes the worst.
double RelErr(const Tensor& got, const Tensor& want, std::string* where) {
  double scale = 0;
  for (float w : want.span<float>()) scale = std::max(scale, std::abs(double(w)));
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double w = want.data_as<float>()[i], g = got.data_as<float>()[i];
    double e = std::abs(g - w) / std::max(std::abs(w), 1e-2 * scale);
    if (e > worst) {
      worst = e;
      *where = fmt::format("element {}: got {} want {} (max |want| {})", i, g, w, scale);
    }
  }
  return worst;
}

void CheckReference(const ir::Graph& g, const fs::path& folder) {
  std::ifstream in(folder / "reference.json");
  ASSERT_TRUE(in.good()) << folder;
  nlohmann::json ref = nlohmann::json::parse(in);
  for (const auto& c : ref) {
    std::map<std::string, Tensor> feeds;
    for (const auto& [name, j] : c["inputs"].items()) feeds[name] = FromJson(j, DType::kInt64);
    Tensor want = FromJson(c["outputs"]["logits"], DType::kFloat32);
    auto outs = RunGraph(g, feeds);
    ASSERT_EQ(outs.size(), 1u);
    ASSERT_EQ(outs[0].shape(), want.shape());
    std::string where;
    EXPECT_LE(RelErr(outs[0].ToFloat32(), want, &where), 1e-4)
        << folder << " " << ShapeToString(want.shape()) << " " << where;
  }
}

TEST_P(FixtureFusion, CountsAndReference) {
  const Case& c = GetParam();
  fs::path path = FixtureDir() / c.expect.folder / c.file;
  if (!fs::exists(path)) GTEST_SKIP() << "fixture not present: " << path;
  auto imported =
      c.file == "hf" ? import::ImportHuggingFace(path.string()) : import::ImportOnnx(path.string());
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  ir::Graph g = std::move(imported).value();
  ir::Graph unfused = g;
  PassReport unfused_report;
  ASSERT_TRUE(Optimize(unfused, PassOptions{.fuse = false}, &unfused_report).ok());
  PassReport report;
  Status s = Optimize(g, PassOptions{}, &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // SURGE_PASSES_DUMP=<folder>: write the optimised graph there as text, for debugging.
  if (const char* dump = std::getenv("SURGE_PASSES_DUMP")) {
    std::ofstream(fs::path(dump) / (c.expect.folder + "." + c.file + ".txt")) << ir::DumpText(g);
  }
  const int layers = c.expect.layers;
  EXPECT_EQ(Count(g, "surge::Attention"), layers);
  EXPECT_EQ(Count(g, "surge::SkipLayerNorm"), 2 * layers);
  EXPECT_EQ(Count(g, "surge::EmbedLayerNorm"), 1);
  EXPECT_EQ(Count(g, "surge::LayerNorm"), 0);
  EXPECT_EQ(Count(g, "surge::Gelu"), 0);
  EXPECT_EQ(Count(g, "surge::Linear"), c.expect.linears);
  for (const char* op : kLeftoverOps) EXPECT_EQ(Count(g, op), 0) << op;
  for (const auto& n : g.nodes) {
    if (n.op_type == "Attention") {
      EXPECT_EQ(n.inputs.size(), 2u) << "attention without mask";
    }
  }
  std::string counts;
  for (const auto& [op, n] : g.OpCounts()) counts += op + "=" + std::to_string(n) + " ";
  SCOPED_TRACE(counts);
  fs::path folder = FixtureDir() / c.expect.folder;
  if (fs::exists(folder / "reference.json")) {
    CheckReference(g, folder);
    SCOPED_TRACE("unfused");
    CheckReference(unfused, folder);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, FixtureFusion, ::testing::ValuesIn(Cases()), [](const auto& info) {
  std::string n = info.param.expect.folder + "_" + info.param.file;
  for (char& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
});

}  // namespace
}  // namespace surge::engine::passes
