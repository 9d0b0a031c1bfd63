// `surge calibrate`, `surge build --precision int8 --calibration`, `surge inspect` (per-layer
// precision and reason) and `surge compare --texts` on the bert_seqcls fixture with posts from
// the fixture corpus, and every bad input: missing, corrupt or foreign calibration caches, empty
// text files, a vocabulary that does not belong to the model, precisions the CPU does not run.
//
// The fixture model has a 200-row vocabulary; the texts go through the first 200 entries of the
// fixture vocabulary (specials, ASCII, a few symbols), so most CJK characters become [UNK]: the
// inputs are valid for the model, which is all calibration needs.
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/mmap_file.h"

namespace {

using namespace surge::cli::test_util;

const std::string kCorpus = std::string(SURGE_SOURCE_DIR) + "/tests/fixtures/text/weibo_corpus.txt";
const std::string kVocab = std::string(SURGE_SOURCE_DIR) + "/tests/fixtures/text/vocab.txt";

class QuantCli : public Scratch {
 protected:
  void SetUp() override {
    Scratch::SetUp();
    model_ = kModels + "/bert_seqcls/model.torchscript.onnx";
    auto corpus = surge::ReadFileToString(kCorpus);
    auto vocab = surge::ReadFileToString(kVocab);
    ASSERT_TRUE(corpus.ok() && vocab.ok());
    vocab200_ = Write("vocab200.txt", Lines(*vocab, 0, 200));
    posts_ = Write("posts.txt", Lines(*corpus, 0, 240));
    eval_ = Write("eval.txt", Lines(*corpus, 3000, 80));
  }
  static std::string Lines(const std::string& text, size_t from, size_t count) {
    std::string out;
    size_t pos = 0, line = 0;
    while (pos < text.size() && line < from + count) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      if (line >= from) out += text.substr(pos, end - pos) + "\n";
      pos = end + 1;
      ++line;
    }
    return out;
  }
  RunResult Calibrate(const std::string& out, const std::string& extra = "") {
    return Surge("calibrate " + model_ + " --texts " + posts_ + " --vocab " + vocab200_ + " -o " +
                 out + " " + extra);
  }
  std::string model_, vocab200_, posts_, eval_;
};

TEST_F(QuantCli, CalibrateBuildInspectCompare) {
  RunResult r = Calibrate(Path("m.calib"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("wrote " + Path("m.calib") + ": 10 tensors"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("held-out batch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("entropy"), std::string::npos) << r.out;

  ASSERT_EQ(Surge("build " + model_ + " -o " + Path("fp32.plan")).code, 0);
  r = Surge("build " + model_ + " -o " + Path("int8.plan") + " --precision int8 --calibration " +
            Path("m.calib") + " --min-cosine 0.999 --max-top1-drop 0.5%");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("quantised: 10 of 10 layers int8 (percentile 99.99)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("accuracy guard (cosine >= 0.999, top-1 drop <= 0.50%"), std::string::npos)
      << r.out;

  r = Surge("inspect " + Path("int8.plan"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("precision per layer (calibrator percentile 99.99)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("/classifier/Gemm': int8 - input amax"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Attention '/bert/encoder/layer.0/attention/self/Softmax': fp32 - "
                       "attention is not quantised"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("accuracy guard: budget cosine >= 0.999"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("linear(onednn int8)=10"), std::string::npos) << r.out;
  r = RunStdout("inspect " + Path("int8.plan") + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  json j = json::parse(r.out);
  int int8_layers = 0;
  for (const auto& l : j["layers"]) int8_layers += l["precision"] == "int8";
  EXPECT_EQ(int8_layers, 10);
  EXPECT_EQ(j["layers"].size(), 18u);
  EXPECT_EQ(j["quant"]["amax"].size(), 10u);

  r = Surge("compare " + Path("int8.plan") + " --against " + Path("fp32.plan") + " --texts " +
            eval_ + " --vocab " + vocab200_ + " --min-cosine 0.999 --max-top1-drop 0.5%");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("plan: int8 (10 of 10 quantisable layers int8); against: fp32"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("within budget"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(cosine standard error "), std::string::npos) << r.out;
  r = RunStdout("compare " + Path("int8.plan") + " --against " + Path("fp32.plan") + " --texts " +
                eval_ + " --vocab " + vocab200_ + " --json --min-cosine 0.999");
  ASSERT_EQ(r.code, 0) << r.out;
  j = json::parse(r.out);
  EXPECT_GE(j["agreement"]["cosine"].get<double>(), 0.999);
  EXPECT_EQ(j["agreement"]["top1_rows"].get<int>(), 80);  // one [CLS] row per post
  // How far the mean could move on other posts: the rows' spread over sqrt(80).
  EXPECT_GT(j["agreement"]["cosine_stderr"].get<double>(), 0);
  EXPECT_LT(j["agreement"]["cosine_stderr"].get<double>(),
            1 - j["agreement"]["cosine"].get<double>());
  // An impossible budget fails the comparison.
  r = Surge("compare " + Path("int8.plan") + " --against " + Path("fp32.plan") + " --texts " +
            eval_ + " --vocab " + vocab200_ + " --min-cosine 1");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("OUTSIDE budget"), std::string::npos) << r.out;
}

TEST_F(QuantCli, TightBudgetKeepsLayersInFp32AndInspectSaysWhy) {
  ASSERT_EQ(Calibrate(Path("m.calib")).code, 0);
  RunResult r =
      RunStdout("build " + model_ + " -o " + Path("q.plan") + " --precision int8 --calibration " +
                Path("m.calib") + " --min-cosine 0.9999999 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  json j = json::parse(r.out);
  const auto& fallback = j["quant"]["guard"]["fallback"];
  ASSERT_GT(fallback.size(), 0u);
  r = Surge("inspect " + Path("q.plan"));
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(
      r.out.find(fallback[0].get<std::string>() + "': fp32 - kept by the accuracy guard in fp32"),
      std::string::npos)
      << r.out;
  // One stage on the CPU's default ladder (fp32 alone), every layer ranked.
  EXPECT_NE(r.out.find("int8 -> fp32: all 10 layer(s) at fp32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the most sensitive of 10 ranked"), std::string::npos) << r.out;
  r = Surge("build " + model_ + " -o " + Path("q2.plan") + " --precision int8 --calibration " +
            Path("m.calib") + " --min-cosine 0.9999999 --guard-fallback fp32");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("  kept in fp32: " + fallback[0].get<std::string>()), std::string::npos)
      << r.out;
  // Read as a 95 % lower confidence bound the budget is reported as such, by build and inspect.
  r = Surge("build " + model_ + " -o " + Path("q3.plan") + " --precision int8 --calibration " +
            Path("m.calib") + " --min-cosine 0.99 --guard-confidence 95%");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("cosine (95% lower bound) >= 0.99"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cosine 95% lower bound 0.9"), std::string::npos) << r.out;
  r = Surge("inspect " + Path("q3.plan"));
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("budget cosine (95% lower bound) >= 0.99"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(lower bound 0.9"), std::string::npos) << r.out;
  // `surge compare` counts the layers at each precision.
  ASSERT_EQ(Surge("build " + model_ + " -o " + Path("fp32.plan")).code, 0);
  r = Surge("compare " + Path("q2.plan") + " --against " + Path("fp32.plan") + " --texts " + eval_ +
            " --vocab " + vocab200_ + " --min-cosine 0.999");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(
      r.out.find("plan: int8 (" + std::to_string(10 - fallback.size()) +
                 " of 10 quantisable layers int8, " + std::to_string(fallback.size()) + " fp32)"),
      std::string::npos)
      << r.out;
}

TEST_F(QuantCli, BadCalibrationCaches) {
  const std::string int8 = "build " + model_ + " -o " + Path("x.plan") + " --precision int8";
  EXPECT_FAILS_WITH(Surge(int8), "needs a calibration cache (--calibration CACHE)");
  EXPECT_FAILS_WITH(Surge(int8 + " --calibration " + Path("nope.calib")), "cannot open");
  EXPECT_FAILS_WITH(Surge(int8 + " --calibration " + posts_), "is not a calibration cache");
  ASSERT_EQ(Calibrate(Path("m.calib")).code, 0);
  auto bytes = surge::ReadFileToString(Path("m.calib"));
  ASSERT_TRUE(bytes.ok());
  std::string corrupt = *bytes;
  corrupt[corrupt.size() / 2] ^= 0x10;
  EXPECT_FAILS_WITH(Surge(int8 + " --calibration " + Write("bad.calib", corrupt)),
                    "is corrupt: checksum");
  EXPECT_FAILS_WITH(
      Surge(int8 + " --calibration " + Write("short.calib", bytes->substr(0, bytes->size() / 3))),
      "is truncated");
  EXPECT_FAILS_WITH(Surge("build " + kModels + "/electra_seqcls/model.torchscript.onnx -o " +
                          Path("x.plan") + " --precision int8 --calibration " + Path("m.calib")),
                    "was made for another model");
  EXPECT_FALSE(fs::exists(Path("x.plan")));
  EXPECT_FAILS_WITH(
      Surge("build " + model_ + " -o " + Path("x.plan") + " --calibration " + Path("m.calib")),
      "--calibration is for --precision int8, fp8 or bf16");
  EXPECT_FAILS_WITH(Surge(int8 + " --calibration " + Path("m.calib") + " --calibrator kl"),
                    "unknown calibrator 'kl'");
  EXPECT_FAILS_WITH(Surge(int8 + " --calibration " + Path("m.calib") + " --max-top1-drop 5x"),
                    "--max-top1-drop '5x'");
  // The guard's own flags: bad values, with --no-guard, and in a build without a guard.
  const std::string guarded = int8 + " --calibration " + Path("m.calib");
  const std::string fp32 = "build " + model_ + " -o " + Path("x.plan");
  const std::pair<std::string, std::string> flag_errors[] = {
      {guarded + " --guard-fallback fp16",
       "a single layer of the cpu backend runs int8, bf16 or fp32"},
      {guarded + " --guard-fallback int4,fp32", "int4"},
      {guarded + " --guard-fallback fp32,fp32", "fp32 is named twice"},
      {guarded + " --guard-fallback fp32 --no-guard", "cannot go with --no-guard"},
      {fp32 + " --guard-fallback fp32", "--guard-fallback is for --precision int8, fp8 or bf16"},
      {guarded + " --guard-confidence 100%",
       "--guard-confidence '100%' must be a level in [50%, 100%)"},
      {guarded + " --guard-confidence 0.3", "must be a level in [50%, 100%)"},
      {guarded + " --guard-confidence 95x", "--guard-confidence '95x'"},
      {guarded + " --guard-confidence 95% --no-guard", "cannot go with --no-guard"},
      {fp32 + " --guard-confidence 95%", "--guard-confidence is for --precision int8, fp8 or bf16"},
  };
  for (const auto& [command, says] : flag_errors) EXPECT_FAILS_WITH(Surge(command), says);
  // Without a held-out slice the guard cannot run; --no-guard builds anyway.
  ASSERT_EQ(Calibrate(Path("nohold.calib"), "--holdout 0").code, 0);
  EXPECT_FAILS_WITH(Surge(int8 + " --calibration " + Path("nohold.calib")), "no held-out inputs");
  EXPECT_EQ(Surge(int8 + " --calibration " + Path("nohold.calib") + " --no-guard").code, 0);
}

TEST_F(QuantCli, BadCalibrationInputs) {
  const std::string base = "calibrate " + model_ + " -o " + Path("c.calib");
  EXPECT_FAILS_WITH(
      Surge(base + " --texts " + Write("empty.txt", "\n  \n") + " --vocab " + vocab200_),
      "has no non-empty line");
  EXPECT_FAILS_WITH(Surge(base + " --texts " + Path("missing.txt") + " --vocab " + vocab200_),
                    "cannot open text file");
  EXPECT_FAILS_WITH(Surge(base + " --texts " + posts_), "exactly one of --vocab");
  EXPECT_FAILS_WITH(Surge(base + " --texts " + posts_ + " --vocab " + kVocab),
                    "outside the model's 200-row embedding table");
  EXPECT_FAILS_WITH(
      Surge(base + " --texts " + posts_ + " --vocab " + vocab200_ + " --max-length 100"),
      "exceeds the 64 positions");
  EXPECT_FAILS_WITH(
      Surge(base + " --texts " + Write("two.txt", "a\nb\n") + " --vocab " + vocab200_),
      "too few for a held-out slice");
  EXPECT_FAILS_WITH(Surge(base), "exactly one of --texts FILE and --inputs");
  EXPECT_FALSE(fs::exists(Path("c.calib")));
  // Tensors instead of texts.
  json batches = json::array();
  for (int b = 0; b < 5; ++b) {
    json ids = json::array(), mask = json::array(), types = json::array();
    for (int i = 0; i < 2 * 8; ++i) {
      ids.push_back((b * 31 + i * 7) % 199 + 1);
      mask.push_back(i % 8 < 6 ? 1 : 0);
      types.push_back(0);
    }
    batches.push_back({{"input_ids", {{"shape", {2, 8}}, {"data", ids}}},
                       {"attention_mask", {{"shape", {2, 8}}, {"data", mask}}},
                       {"token_type_ids", {{"shape", {2, 8}}, {"data", types}}}});
  }
  RunResult r = Surge(base + " --inputs " + Write("in.json", batches.dump()));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("from 4 batches (8 sequences, 48 tokens); 1 held-out"), std::string::npos)
      << r.out;
}

TEST_F(QuantCli, PrecisionsTheCpuBackendDoesNotRun) {
  for (const char* p : {"fp16", "fp8"}) {
    EXPECT_FAILS_WITH(
        Surge("build " + model_ + " -o " + Path("x.plan") + " --precision " + p +
              (std::string(p) == "fp8" ? " --calibration x" : "")),
        std::string(p) == "fp8" ? "cannot open" : "cpu backend does not run precision fp16");
  }
  ASSERT_EQ(Calibrate(Path("m.calib")).code, 0);
  EXPECT_FAILS_WITH(Surge("build " + model_ + " -o " + Path("x.plan") +
                          " --precision fp8 --calibration " + Path("m.calib")),
                    "cpu backend does not run precision fp8");
}

}  // namespace
