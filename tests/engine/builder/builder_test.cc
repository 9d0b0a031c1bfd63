// The builder end to end on the model fixtures: import → passes → profile → lower → plan, then the
// plan loaded by the runtime and checked against PyTorch's reference outputs.
#include "engine/builder/builder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/mmap_file.h"
#include "engine/plan/plan_file.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/graph_codec.h"

namespace surge::engine::builder {
namespace {

namespace fs = std::filesystem;
const std::string kModels = std::string(SURGE_SOURCE_DIR) + "/tests/fixtures/models";

std::span<const uint8_t> Span(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

ir::Graph TwoInputGraph() {
  ir::Graph g;
  const ir::SymShape bs = {ir::Dim::Symbol("batch"), ir::Dim::Symbol("seq")};
  int a = g.AddInput("input_ids", DType::kInt64, bs);
  g.AddInput("fixed", DType::kFloat32, {ir::Dim(4), ir::Dim::Symbol("seq")});
  int y = g.AddValue("y", DType::kInt64, bs);
  ir::Node n;
  n.op_type = "Identity";
  n.inputs = {a};
  n.outputs = {y};
  g.AddNode(std::move(n));
  g.outputs = {y};
  return g;
}

TEST(ResolveProfile, DefaultsPerSymbol) {
  auto p = ResolveProfile(TwoInputGraph(), {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const InputProfile* ids = p->Find("input_ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->min, (Shape{1, 1}));
  EXPECT_EQ(ids->opt, (Shape{8, 128}));
  EXPECT_EQ(ids->max, (Shape{64, 512}));
  const InputProfile* fixed = p->Find("fixed");
  ASSERT_NE(fixed, nullptr);  // static first dim stays fixed; seq follows the seq default
  EXPECT_EQ(fixed->min, (Shape{4, 1}));
  EXPECT_EQ(fixed->max, (Shape{4, 512}));
}

TEST(ResolveProfile, GivenRangesPropagateThroughSymbols) {
  auto given = Profile::Parse("input_ids:2x3,4x16,8x32");
  ASSERT_TRUE(given.ok());
  auto p = ResolveProfile(TwoInputGraph(), *given);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->Find("fixed")->max, (Shape{4, 32}));
  EXPECT_EQ(p->Find("fixed")->opt, (Shape{4, 16}));
}

TEST(ResolveProfile, BadProfilesAreRejected) {
  const ir::Graph g = TwoInputGraph();
  auto unknown = ResolveProfile(g, *Profile::Parse("tokens:1x1,2x2,3x3"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("input 'tokens', which the model does not have "
                                            "(inputs: input_ids, fixed)"),
            std::string::npos)
      << unknown.status().message();
  auto rank = ResolveProfile(g, *Profile::Parse("input_ids:1,2,3"));
  ASSERT_FALSE(rank.ok());
  EXPECT_NE(rank.status().message().find("has rank 1"), std::string::npos);
  auto fixed = ResolveProfile(g, *Profile::Parse("fixed:1x1,2x2,3x3"));
  ASSERT_FALSE(fixed.ok());
  EXPECT_NE(fixed.status().message().find("fixes it at 4"), std::string::npos);
}

TEST(Builder, UnknownBackendAndMissingModel) {
  BuilderConfig config;
  config.backend = "tpu";
  auto r = BuildPlanFromGraph(TwoInputGraph(), config);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown backend 'tpu'"), std::string::npos);
  EXPECT_NE(r.status().message().find("cpu"), std::string::npos);
  auto m = Build("/nonexistent/model.onnx", {});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
}

// The fused op counts the builder reports for the 12-layer fixture, from either exporter.
TEST(Builder, Bert12FusionCounts) {
  for (const char* exporter : {"torchscript", "dynamo"}) {
    const std::string model = kModels + "/bert12_tiny/model." + exporter + ".onnx";
    if (!fs::exists(model)) GTEST_SKIP() << model << " is missing";
    BuildReport report;
    auto g = ImportAndOptimize(model, {}, &report);
    ASSERT_TRUE(g.ok()) << exporter << ": " << g.status().ToString();
    auto& ops = report.passes.ops_after;
    EXPECT_EQ(ops["surge::Attention"], 12) << exporter;
    EXPECT_EQ(ops["surge::SkipLayerNorm"], 24) << exporter;
    EXPECT_EQ(ops["surge::EmbedLayerNorm"], 1) << exporter;
    EXPECT_GT(report.passes.ops_before["MatMul"], 0) << exporter;
    // Default profile: seq capped at the 64 position embeddings.
    auto p = ResolveProfile(*g, {});
    ASSERT_TRUE(p.ok());
    ASSERT_NE(p->Find("input_ids"), nullptr);
    EXPECT_EQ(p->Find("input_ids")->max, (Shape{64, 64})) << exporter;
  }
}

// A CPU plan stores each Linear weight once, packed in its tactics; the graph keeps the weight's
// dtype and shape only (a data-less constant), and the plan still loads and runs.
TEST(Builder, CpuPlanLeavesOutTheFloat32CopiesOfPackedWeights) {
  const std::string model = kModels + "/bert12_tiny/model.torchscript.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << model << " is missing";
  auto g = ImportAndOptimize(model, {}, nullptr);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  BuilderConfig c;
  c.backend = "cpu";
  auto bytes = BuildPlanFromGraph(*g, c);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto plan = plan::PlanFile::FromBytes(Span(*bytes));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto section = [&](std::string_view name) { return *(*plan)->Section(name); };
  auto decoded = DecodeGraph(section(plan::kGraphSection), section(plan::kWeightsSection));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  int data_less = 0, linears = 0;
  int64_t data_less_bytes = 0;
  for (const ir::Node& n : decoded->nodes) {
    if (n.op_type != "Linear") continue;
    ++linears;
    const ir::Value& w = decoded->values[n.input(1)];
    ASSERT_TRUE(w.is_constant()) << n.name;
    EXPECT_TRUE(w.constant.empty()) << n.name;
    EXPECT_EQ(w.constant.shape(), g->values[n.input(1)].constant.shape()) << n.name;
  }
  for (const ir::Value& v : decoded->values) {
    if (v.is_constant() && v.constant.empty()) {
      ++data_less;
      data_less_bytes += v.constant.nbytes();
    }
  }
  EXPECT_GT(linears, 0);
  EXPECT_EQ(data_less, linears);  // one weight per Linear here, none shared with other nodes
  // The weights section holds the other constants alone (each padded to 64 bytes at most).
  int constants = 0;
  for (const ir::Value& v : decoded->values) constants += v.is_constant();
  const auto rest = static_cast<size_t>(g->ConstantBytes() - data_less_bytes);
  EXPECT_GE(section(plan::kWeightsSection).size(), rest);
  EXPECT_LT(section(plan::kWeightsSection).size(), rest + 64 * static_cast<size_t>(constants));
  auto engine = Engine::LoadFromMemory(Span(*bytes));
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto ctx = (*engine)->CreateContext();
  ASSERT_TRUE(ctx.ok());
  TensorMap in;
  for (const TensorInfo& info : (*engine)->inputs()) {
    Tensor t(DType::kInt64, {2, 8});
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data_as<int64_t>()[i] = info.name == "input_ids" ? 5 + i : 1;
    in.emplace(info.name, t);
  }
  auto out = (*ctx)->Run(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (const auto& [name, t] : *out) {
    const Tensor f = t.ToFloat32();
    for (int64_t i = 0; i < f.numel(); ++i)
      ASSERT_TRUE(std::isfinite(f.data_as<float>()[i])) << name;
  }
}

// What the CPU backend says a plan may leave out comes from its own tactics for this graph: a
// blob that is not one, or that describes another graph, is refused with the reason.
TEST(Builder, CpuConstantsKeptByTacticsRefusesForeignTactics) {
  const std::string model = kModels + "/bert12_tiny/model.torchscript.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << model << " is missing";
  auto g = ImportAndOptimize(model, {}, nullptr);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Backend* cpu = FindBackend("cpu");
  ASSERT_NE(cpu, nullptr);
  BuilderConfig c;
  c.backend = "cpu";
  const std::string junk = "not a tactics blob";
  auto bad = cpu->ConstantsKeptByTactics(*g, c, Span(junk));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss) << bad.status().ToString();
  auto tactics = cpu->Lower(*g, c);
  ASSERT_TRUE(tactics.ok()) << tactics.status().ToString();
  EXPECT_TRUE(cpu->ConstantsKeptByTactics(*g, c, Span(*tactics)).ok());
  ir::Graph other = TwoInputGraph();
  auto mismatch = cpu->ConstantsKeptByTactics(other, c, Span(*tactics));
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("nodes"), std::string::npos)
      << mismatch.status().ToString();
}

struct Fixture {
  std::string dir;
  std::string file;
};

class BuildAndRun : public ::testing::TestWithParam<Fixture> {};

TEST_P(BuildAndRun, MatchesPyTorch) {
  const std::string model = kModels + "/" + GetParam().dir + "/" + GetParam().file;
  const std::string reference = kModels + "/" + GetParam().dir + "/reference.json";
  if (!fs::exists(model)) GTEST_SKIP() << model << " is missing";
  BuildReport report;
  auto plan = Build(model, {}, &report);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(report.plan_bytes, plan->size());
  EXPECT_GT(report.weights_bytes, 0u);
  auto engine = Engine::LoadFromMemory(Span(*plan));
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto ctx = (*engine)->CreateContext();
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  auto text = ReadFileToString(reference);
  ASSERT_TRUE(text.ok());
  auto cases = nlohmann::json::parse(*text);
  for (size_t c = 0; c < cases.size(); ++c) {
    TensorMap inputs;
    for (const auto& [name, v] : cases[c]["inputs"].items()) {
      Shape shape = v["shape"].get<Shape>();
      Tensor t(DType::kInt64, shape);
      auto data = v["data"].get<std::vector<int64_t>>();
      std::copy(data.begin(), data.end(), t.data_as<int64_t>());
      inputs[name] = t;
    }
    auto out = (*ctx)->Run(inputs);
    ASSERT_TRUE(out.ok()) << "case " << c << ": " << out.status().ToString();
    for (const auto& [name, v] : cases[c]["outputs"].items()) {
      ASSERT_TRUE(out->count(name)) << name;
      Tensor got = out->at(name).ToFloat32();
      EXPECT_EQ(got.shape(), v["shape"].get<Shape>());
      auto want = v["data"].get<std::vector<double>>();
      ASSERT_EQ(static_cast<size_t>(got.numel()), want.size());
      double max_abs = 0, max_ref = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        max_abs = std::max(max_abs, std::abs(got.data_as<float>()[i] - want[i]));
        max_ref = std::max(max_ref, std::abs(want[i]));
      }
      EXPECT_LE(max_abs, 1e-4 * std::max(max_ref, 1.0))
          << GetParam().dir << " case " << c << " " << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BuildAndRun,
                         ::testing::Values(Fixture{"bert_seqcls", "model.torchscript.onnx"},
                                           Fixture{"bert_seqcls", "model.dynamo.onnx"},
                                           Fixture{"bert_seqcls", "hf"},
                                           Fixture{"roberta_seqcls", "model.torchscript.onnx"},
                                           Fixture{"distilbert_seqcls", "model.torchscript.onnx"},
                                           Fixture{"electra_seqcls", "model.torchscript.onnx"},
                                           Fixture{"bert_tokcls", "model.torchscript.onnx"}),
                         [](const ::testing::TestParamInfo<Fixture>& info) {
                           std::string name = info.param.dir + "_" + info.param.file;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace surge::engine::builder
