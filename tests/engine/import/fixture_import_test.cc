// Imports every model fixture (tests/fixtures/models, made by tools/fixtures/make_models.py) from
// both ONNX exporters and checks that after shape inference every value has a dtype and a full
// symbolic shape. SURGE_MODEL_FIXTURES overrides the folder.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/import/importer.h"
#include "engine/passes/passes.h"

namespace surge::engine::import {
namespace {

namespace fs = std::filesystem;

fs::path FixtureDir() {
  if (const char* env = std::getenv("SURGE_MODEL_FIXTURES")) return env;
  return fs::path(SURGE_SOURCE_DIR) / "tests" / "fixtures" / "models";
}

struct Fixture {
  std::string folder;  // e.g. bert_seqcls
  std::string file;    // model.torchscript.onnx
  std::vector<std::string> inputs;
  bool token_logits;  // logits [batch, seq, labels] rather than [batch, labels]
  int64_t labels;
};

void PrintTo(const Fixture& f, std::ostream* os) { *os << f.folder << "/" << f.file; }

std::vector<std::string> InputsOf(const std::string& arch) {
  if (arch == "distilbert" || arch == "roberta") return {"input_ids", "attention_mask"};
  return {"input_ids", "attention_mask", "token_type_ids"};
}

std::vector<Fixture> OnnxFixtures() {
  std::vector<Fixture> out;
  for (std::string arch : {"bert", "roberta", "distilbert", "electra"}) {
    out.push_back({arch + "_seqcls", "model.torchscript.onnx", InputsOf(arch), false, 3});
    out.push_back({arch + "_seqcls", "model.dynamo.onnx", InputsOf(arch), false, 3});
    out.push_back({arch + "_tokcls", "model.torchscript.onnx", InputsOf(arch), true, 3});
  }
  out.push_back({"bert12_tiny", "model.torchscript.onnx", InputsOf("bert"), false, 2});
  out.push_back({"bert12_tiny", "model.dynamo.onnx", InputsOf("bert"), false, 2});
  return out;
}

// Every value: a dtype and a known shape. Returns the names of those that lack one.
std::vector<std::string> Incomplete(const ir::Graph& g) {
  std::vector<std::string> bad;
  for (const auto& v : g.values) {
    if (v.dtype == DType::kUndefined || !v.shape) bad.push_back(v.name);
  }
  return bad;
}

class OnnxFixtureTest : public ::testing::TestWithParam<Fixture> {};

TEST_P(OnnxFixtureTest, ImportsWithFullSymbolicShapes) {
  const Fixture& f = GetParam();
  fs::path path = FixtureDir() / f.folder / f.file;
  ASSERT_TRUE(fs::exists(path)) << "model fixture " << path
                                << " is missing: run tools/fixtures/make_models.py --out "
                                   "tests/fixtures/models (needs torch, transformers, onnxscript)";
  auto g = ImportOnnx(path.string());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->inputs.size(), f.inputs.size());
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const ir::Value& in = g->values[g->inputs[i]];
    EXPECT_EQ(in.name, f.inputs[i]);
    EXPECT_EQ(in.dtype, DType::kInt64);
    ASSERT_TRUE(in.shape && in.shape->size() == 2) << in.name;
    EXPECT_FALSE((*in.shape)[0].IsStatic()) << in.name;
    EXPECT_FALSE((*in.shape)[1].IsStatic()) << in.name;
  }
  ASSERT_EQ(g->outputs.size(), 1u);
  EXPECT_EQ(g->values[g->outputs[0]].name, "logits");

  Status s = passes::InferShapes(*g);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto bad = Incomplete(*g);
  EXPECT_TRUE(bad.empty()) << bad.size() << " values without dtype/shape, first: " << bad[0];

  const ir::SymShape& ids = *g->values[g->inputs[0]].shape;
  const ir::Value& logits = g->values[g->outputs[0]];
  EXPECT_EQ(logits.dtype, DType::kFloat32);
  ir::SymShape expected = f.token_logits ? ir::SymShape{ids[0], ids[1], ir::Dim(f.labels)}
                                         : ir::SymShape{ids[0], ir::Dim(f.labels)};
  EXPECT_EQ(ir::SymShapeToString(*logits.shape), ir::SymShapeToString(expected));
  // Shapes only mention the input symbols (nothing invented along the way).
  auto in_syms = ids[0].Symbols();
  for (const auto& s2 : ids[1].Symbols()) in_syms.push_back(s2);
  for (const auto& v : g->values) {
    if (!v.shape) continue;
    for (const auto& d : *v.shape) {
      for (const auto& sym : d.Symbols()) {
        EXPECT_NE(std::find(in_syms.begin(), in_syms.end(), sym), in_syms.end())
            << v.name << " has shape " << ir::SymShapeToString(*v.shape);
      }
    }
  }
}

std::string FixtureName(const ::testing::TestParamInfo<Fixture>& info) {
  std::string n = info.param.folder + "_" + info.param.file;
  for (char& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

INSTANTIATE_TEST_SUITE_P(Models, OnnxFixtureTest, ::testing::ValuesIn(OnnxFixtures()), FixtureName);

}  // namespace
}  // namespace surge::engine::import
