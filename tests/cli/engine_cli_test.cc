// Runs the `surge` binary (build, inspect, infer, bench, compare) the way a user would, and checks
// exit codes and messages, including bad input of every kind.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"
#include "core/mmap_file.h"
#include "engine/plan/plan_file.h"

namespace {

using namespace surge::cli::test_util;

// --- errors that need no model ---

using CliErrors = Scratch;

TEST_F(CliErrors, BuildMissingModel) {
  EXPECT_FAILS_WITH(Surge("build " + Path("nope.onnx") + " -o " + Path("x.plan")),
                    "does not exist");
  EXPECT_FALSE(fs::exists(Path("x.plan")));
}

TEST_F(CliErrors, BuildNeedsOutput) {
  EXPECT_FAILS_WITH(Surge("build " + Path("nope.onnx")), "--output");
}

TEST_F(CliErrors, BuildBadFlags) {
  const std::string model = kModels + "/bert_seqcls/model.torchscript.onnx";
  EXPECT_FAILS_WITH(Surge("build " + model + " -o " + Path("x.plan") + " --precision fp13"),
                    "unknown precision 'fp13'");
  EXPECT_FAILS_WITH(Surge("build " + model + " -o " + Path("x.plan") + " --profile input_ids"),
                    "bad profile");
  EXPECT_FAILS_WITH(
      Surge("build " + model + " -o " + Path("x.plan") + " --profile input_ids:1x1,8x128"),
      "three shapes");
  EXPECT_FAILS_WITH(
      Surge("build " + model + " -o " + Path("x.plan") + " --tactic-search exhaustive"),
      "--tactic-search: exhaustive not in {heuristic,full}");
  EXPECT_FALSE(fs::exists(Path("x.plan")));
}

TEST_F(CliErrors, InspectAndInferMissingFiles) {
  EXPECT_FAILS_WITH(Surge("inspect " + Path("nope.plan")), "does not exist");
  EXPECT_FAILS_WITH(Surge("infer " + Path("nope.plan") + " --input -"), "cannot open");
  EXPECT_FAILS_WITH(Surge("bench " + Path("nope.plan")), "cannot open");
  EXPECT_FAILS_WITH(Surge("compare " + Path("nope.plan") + " --reference x.json"), "cannot open");
}

TEST_F(CliErrors, NotAPlan) {
  const std::string fake = Write("fake.plan", "{\"this is\": \"json\"}");
  EXPECT_FAILS_WITH(Surge("infer " + fake + " --input -"), "not a Surge plan");
  EXPECT_FAILS_WITH(Surge("bench " + fake), "not a Surge plan");
}

std::string TinyPlan(const std::string& backend, const std::string& arch) {
  surge::engine::plan::PlanWriter w(backend, arch);
  EXPECT_TRUE(w.AddSection("config", std::string_view("{}")).ok());
  EXPECT_TRUE(w.AddSection("weights", std::string(256, 'w')).ok());
  return *w.Finish();
}

TEST_F(CliErrors, CorruptTruncatedAndForeignPlans) {
  std::string good = TinyPlan("nosuch", "arch");
  std::string corrupt = good;
  corrupt[corrupt.size() - 100] ^= 1;
  EXPECT_FAILS_WITH(Surge("infer " + Write("corrupt.plan", corrupt) + " --input -"),
                    "section 'weights' is corrupt");
  EXPECT_FAILS_WITH(
      Surge("infer " + Write("short.plan", good.substr(0, good.size() - 64)) + " --input -"),
      "truncated");
  std::string old = good;
  old[8] = 99;
  EXPECT_FAILS_WITH(Surge("bench " + Write("old.plan", old)), "plan format version is 99");
  EXPECT_FAILS_WITH(Surge("infer " + Write("foreign.plan", good) + " --input -"),
                    "built for backend 'nosuch'");
  EXPECT_FAILS_WITH(Surge("inspect " + Path("foreign.plan")),
                    "plan config: 'surge_version' is missing");
}

TEST_F(CliErrors, CompareNeedsOneSource) {
  const std::string p = Write("x.plan", TinyPlan("nosuch", "arch"));
  EXPECT_FAILS_WITH(Surge("compare " + p), "exactly one of --reference");
  EXPECT_FAILS_WITH(Surge("compare " + p + " --reference a --against b"), "exactly one of");
}

// --- a real model: needs the fixtures and a backend that can lower them ---

class CliModel : public Scratch {
 protected:
  void SetUp() override {
    Scratch::SetUp();
    model_ = kModels + "/bert_seqcls/model.torchscript.onnx";
    reference_ = kModels + "/bert_seqcls/reference.json";
    if (!fs::exists(model_)) GTEST_SKIP() << "fixture " << model_ << " is missing";
    plan_ = Path("bert.plan");
    RunResult r = Surge("build " + model_ + " -o " + plan_);
    ASSERT_EQ(r.code, 0) << r.out;
  }
  std::string model_, reference_, plan_;
};

TEST_F(CliModel, BuildPrintsFusionsAndInspectShowsThem) {
  RunResult r = Surge("build " + model_ + " -o " + Path("again.plan"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("fused ops:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Attention=2"), std::string::npos) << r.out;

  r = RunStdout("inspect " + plan_ + " --json --dot " + Path("g.dot"));
  ASSERT_EQ(r.code, 0) << r.out;
  json j = json::parse(r.out);
  EXPECT_EQ(j["kind"], "plan");
  EXPECT_EQ(j["header"]["backend"], "cpu");
  EXPECT_EQ(j["fusions"]["Attention"], 2);
  EXPECT_EQ(j["fusions"]["SkipLayerNorm"], 4);
  EXPECT_EQ(j["fusions"]["EmbedLayerNorm"], 1);
  EXPECT_GT(j["ops_before"]["MatMul"].get<int>(), 0);
  EXPECT_GT(j["memory"]["weights_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(j["inputs"][0]["name"], "input_ids");
  // Seq is capped by the model's 64 position embeddings.
  EXPECT_EQ(j["profile"][0]["max"], json::array({64, 64}));
  auto dot = surge::ReadFileToString(Path("g.dot"));
  ASSERT_TRUE(dot.ok());
  EXPECT_NE(dot->find("digraph"), std::string::npos);

  r = Surge("inspect " + model_);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("ops before fusion"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Attention=2"), std::string::npos) << r.out;
}

// No GPU needed to build: without one the plan keeps cuBLASLt's heuristic tactics.
TEST_F(CliModel, CudaBuildDefaultsToFp16) {
  RunResult r = Surge("build " + model_ + " --backend cuda -o " + Path("gpu.plan"));
  if (r.code != 0 && r.out.find("unknown backend 'cuda'") != std::string::npos) {
    GTEST_SKIP() << "this build has no CUDA backend (SURGE_CUDA=OFF)";
  }
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("for backend cuda, fp16"), std::string::npos) << r.out;
  r = Surge("build " + model_ + " --backend cuda --precision fp32 -o " + Path("gpu32.plan"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("precision fp32 is not supported"), std::string::npos) << r.out;
}

TEST_F(CliModel, CompareAgainstReferencePassesAndCatchesDifferences) {
  RunResult r = Surge("compare " + plan_ + " --reference " + reference_);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;

  auto ref = surge::ReadFileToString(reference_);
  ASSERT_TRUE(ref.ok());
  json j = json::parse(*ref);
  auto& logits = j[1]["outputs"]["logits"]["data"];
  logits[0] = logits[0].get<double>() + 0.01;
  r = Surge("compare " + plan_ + " --reference " + Write("bad_ref.json", j.dump()));
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.out;

  r = Surge("compare " + plan_ + " --against " + plan_);
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST_F(CliModel, InferMatchesReference) {
  auto ref = surge::ReadFileToString(reference_);
  ASSERT_TRUE(ref.ok());
  json cases = json::parse(*ref);
  const std::string in = Write("in.json", cases[1]["inputs"].dump());
  RunResult r = Surge("infer " + plan_ + " --input " + in + " --output " + Path("out.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto out_text = surge::ReadFileToString(Path("out.json"));
  ASSERT_TRUE(out_text.ok());
  json out = json::parse(*out_text);
  const auto& got = out["logits"]["data"];
  const auto& want = cases[1]["outputs"]["logits"]["data"];
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(out["logits"]["shape"], cases[1]["outputs"]["logits"]["shape"]);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i].get<double>(), want[i].get<double>(), 1e-4) << i;
  }
  // stdin works too.
  r = RunStdout("infer " + plan_ + " --input - < " + in);
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(json::parse(r.out)["logits"]["data"].size(), want.size());
}

TEST_F(CliModel, InferRejectsBadInputs) {
  auto ids = [](json shape, json data) { return json{{"shape", shape}, {"data", data}}; };
  json good = {{"input_ids", ids({1, 3}, {2, 5, 3})},
               {"attention_mask", ids({1, 3}, {1, 1, 1})},
               {"token_type_ids", ids({1, 3}, {0, 0, 0})}};
  ASSERT_EQ(Surge("infer " + plan_ + " --input " + Write("good.json", good.dump())).code, 0);

  EXPECT_FAILS_WITH(Surge("infer " + plan_ + " --input " + Write("bad.json", "{\"input_ids\": [")),
                    "not valid JSON");
  json j = good;
  j.erase("attention_mask");
  EXPECT_FAILS_WITH(Surge("infer " + plan_ + " --input " + Write("missing.json", j.dump())),
                    "missing input 'attention_mask'");
  j = good;
  j["input_ids"] = ids({1, 3}, {2.5, 5, 3});
  EXPECT_FAILS_WITH(Surge("infer " + plan_ + " --input " + Write("dtype.json", j.dump())),
                    "not an integer");
  j = good;
  j["input_ids"] = ids({1, 4}, {2, 5, 3});
  EXPECT_FAILS_WITH(Surge("infer " + plan_ + " --input " + Write("count.json", j.dump())),
                    "4 elements) but 3 data values");
  j = good;
  j["attention_mask"] = ids({3, 1}, {1, 1, 1});
  EXPECT_FAILS_WITH(Surge("infer " + plan_ + " --input " + Write("sym.json", j.dump())),
                    "input 'attention_mask'");
  j = good;
  j["input_ids"] = ids({1, 1, 3}, {2, 5, 3});
  EXPECT_FAILS_WITH(Surge("infer " + plan_ + " --input " + Write("rank.json", j.dump())), "rank 3");
  std::vector<int> long_ids(65, 5), long_ones(65, 1), long_zeros(65, 0);
  j = {{"input_ids", ids({1, 65}, long_ids)},
       {"attention_mask", ids({1, 65}, long_ones)},
       {"token_type_ids", ids({1, 65}, long_zeros)}};
  EXPECT_FAILS_WITH(Surge("infer " + plan_ + " --input " + Write("long.json", j.dump())),
                    "outside the profile");
}

TEST_F(CliModel, BenchReportsLatencyAndThroughput) {
  RunResult r = RunStdout("bench " + plan_ + " --batch 2 --seq 16 --warmup 1 --iterations 3 " +
                          "--padding --json");
  ASSERT_EQ(r.code, 0) << r.out;
  json j = json::parse(r.out);
  EXPECT_EQ(j["runs"], 3);
  EXPECT_GT(j["latency_ms"]["p50"].get<double>(), 0);
  EXPECT_GE(j["latency_ms"]["p99"].get<double>(), j["latency_ms"]["p50"].get<double>());
  EXPECT_GT(j["throughput"]["sequences_per_s"].get<double>(), 0);
  EXPECT_EQ(j["shapes"]["input_ids"], json::array({2, 16}));

  r = Surge("bench " + plan_ + " --shapes input_ids:1x8 --iterations 2 --warmup 0");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("p99"), std::string::npos);
  EXPECT_FAILS_WITH(Surge("bench " + plan_ + " --batch 2 --seq 100 --iterations 1"),
                    "outside the profile");
  EXPECT_FAILS_WITH(Surge("bench " + plan_ + " --shapes nosuch:1x8"), "not an input");
}

}  // namespace
