// INT8 and FP8 plans of the CUDA backend end to end, against the FP32 CPU engine: calibration
// runs on the CPU (surge calibrate's path), the plans are built through engine/quant and run on
// the GPU. Tests that need a GPU skip without one; the build-time checks run anywhere.
//
//  * BERT-base-shaped random weights (bench/gpu_vs_pytorch/bert_base_graph.h), pooled output:
//    cosine to FP32 >= 0.999 for INT8 and FP8 (the target), FP16's shown beside it.
//  * The bert_seqcls fixture: cosine >= 0.999 and top-1 agreement with FP32, its 64x3 classifier
//    kept FP16 (not a multiple of 16), and the accuracy guard falling layers back on CUDA.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>

#include "bert_base_graph.h"
#include "engine/backends/cuda/cuda_backend.h"
#include "engine/backends/cuda/lowering.h"
#include "engine/backends/cuda/quant_linear.h"
#include "engine/builder/builder.h"
#include "engine/plan/plan_file.h"
#include "engine/quant/calibrate.h"
#include "engine/quant/calibrator.h"
#include "engine/quant/quantize.h"
#include "engine/runtime/graph_codec.h"

namespace surge::engine::quant {
namespace {

// The fixtures are found under $SURGE_SOURCE_DIR (set by scripts/gpu/check_quant on the GPU
// machine, where the build tree's path does not exist), else the source tree this was built from.
std::string Models() {
  const char* env = std::getenv("SURGE_SOURCE_DIR");
  return std::string(env && *env ? env : SURGE_SOURCE_DIR) + "/tests/fixtures/models/";
}

#define SKIP_WITHOUT_GPU()                                                  \
  do {                                                                      \
    Status gpu = cuda::CudaDeviceAvailable();                               \
    if (!gpu.ok()) GTEST_SKIP() << "needs an sm_90 GPU: " << gpu.message(); \
  } while (0)

BuilderConfig Config(const std::string& backend, Precision p, int64_t max_batch, int64_t max_seq) {
  BuilderConfig c;
  c.backend = backend;
  c.precision = p;
  for (const char* name : {"input_ids", "token_type_ids", "attention_mask"}) {
    c.profile.inputs.push_back({name, {1, 1}, {max_batch, max_seq}, {max_batch, max_seq}});
  }
  return c;
}

// Quantises `c` from `cache` without the accuracy guard (every quantisable Linear at c.precision).
Status QuantizeUnguarded(const ir::Graph& g, const CalibrationCache& cache, BuilderConfig* c,
                         QuantizeReport* report = nullptr) {
  QuantizeOptions o;
  o.guard = false;
  return Quantize(g, &cache, o, c, report);
}

std::shared_ptr<const Engine> Load(const ir::Graph& g, const BuilderConfig& c) {
  auto bytes = builder::BuildPlanFromGraph(g, c);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  if (!bytes.ok()) return nullptr;
  auto e = Engine::LoadFromMemory({reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()});
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? *e : nullptr;
}

Agreement Measure(const Engine& ref, const Engine& cand, const std::vector<TensorMap>& batches) {
  auto a = MeasureAgreement(ref, cand, batches);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? *a : Agreement{};
}

std::vector<TensorMap> Batches(uint32_t seed, int count, int64_t batch, int64_t seq, int64_t vocab,
                               bool padding) {
  return bench::BertBatches(seed, count, batch, seq, vocab, padding);
}

TEST(CudaQuantModel, BertBaseRandomWeightsInt8AndFp8CosineToFp32) {
  SKIP_WITHOUT_GPU();
  auto graph = bench::BertEncoderGraph(2026);
  const auto calib = Batches(1, 6, 4, 128, 21128, true);
  const auto eval = Batches(2, 2, 8, 128, 21128, true);
  auto cache = Calibrate(*graph, calib, {}, "bert_base_random");
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  auto fp32 = Load(*graph, Config("cpu", Precision::kFp32, 8, 128));
  auto fp16 = Load(*graph, Config("cuda", Precision::kFp16, 8, 128));
  ASSERT_TRUE(fp32 && fp16);
  std::printf("bert-base random, fp16 vs fp32: %s\n",
              Measure(*fp32, *fp16, eval).Summary().c_str());
  for (Precision p : {Precision::kInt8, Precision::kFp8}) {
    BuilderConfig c = Config("cuda", p, 8, 128);
    QuantizeReport report;
    ASSERT_TRUE(QuantizeUnguarded(*graph, *cache, &c, &report).ok());
    EXPECT_EQ(report.quantised, 49);  // 12 x (QKV, out, FFN1, FFN2) + pooler
    auto plan = Load(*graph, c);
    ASSERT_TRUE(plan);
    const std::string desc = plan->Describe();
    const std::string kind =
        p == Precision::kInt8 ? "cublasLt int8 gemm" : "cublasLt fp8 e4m3 gemm";
    size_t count = 0;
    for (size_t at = desc.find(kind); at != std::string::npos; at = desc.find(kind, at + 1))
      ++count;
    EXPECT_EQ(count, 49u) << desc;
    const Agreement a = Measure(*fp32, *plan, eval);
    std::printf("bert-base random, %s vs fp32: %s\n", std::string(PrecisionName(p)).c_str(),
                a.Summary().c_str());
    EXPECT_GE(a.cosine(), 0.999) << PrecisionName(p);
    // How much the calibrator matters: e4m3 keeps 3 mantissa bits at any scale, so clipping
    // (percentile) trades saturated outliers for nothing; minmax does not clip.
    for (const char* name : {"minmax", "entropy"}) {
      BuilderConfig c2 = Config("cuda", p, 8, 128);
      QuantizeOptions o2;
      o2.guard = false;
      o2.calibrator = *ParseCalibrator(name);
      ASSERT_TRUE(Quantize(*graph, &*cache, o2, &c2, &report).ok());
      auto plan2 = Load(*graph, c2);
      ASSERT_TRUE(plan2);
      std::printf("bert-base random, %s (%s) vs fp32: %s\n", std::string(PrecisionName(p)).c_str(),
                  name, Measure(*fp32, *plan2, eval).Summary().c_str());
    }
  }
}

ir::Graph Fixture() {
  auto g = builder::ImportAndOptimize(Models() + "bert_seqcls/model.torchscript.onnx", {}, nullptr);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? std::move(g).value() : ir::Graph{};
}

// The fixture calibrated on 48 random sequences, 16 more held out for the guard.
Result<CalibrationCache> FixtureCalibration(const ir::Graph& g) {
  return Calibrate(g, Batches(3, 6, 8, 32, 200, true), Batches(4, 2, 8, 32, 200, true),
                   "bert_seqcls");
}

TEST(CudaQuantModel, FixtureInt8AndFp8AgreeWithFp32) {
  SKIP_WITHOUT_GPU();
  const ir::Graph g = Fixture();
  auto cache = FixtureCalibration(g);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  const auto eval = Batches(5, 4, 16, 48, 200, true);
  auto fp32 = Load(g, Config("cpu", Precision::kFp32, 16, 64));
  for (Precision p : {Precision::kInt8, Precision::kFp8}) {
    BuilderConfig c = Config("cuda", p, 16, 64);
    QuantizeOptions o;
    o.guard_options.budget = {0.999, 0.05};
    QuantizeReport report;
    Status st = Quantize(g, &*cache, o, &c, &report);
    ASSERT_TRUE(st.ok()) << st.ToString();
    const LayerPrecision& head = c.quant.layers.at("/classifier/Gemm");
    EXPECT_EQ(head.precision, Precision::kFp16);
    EXPECT_NE(head.reason.find("multiples of 16"), std::string::npos) << head.reason;
    auto plan = Load(g, c);
    ASSERT_TRUE(plan);
    const Agreement a = Measure(*fp32, *plan, eval);
    std::printf("bert_seqcls %s (cuda) vs fp32 (cpu): %s\n", std::string(PrecisionName(p)).c_str(),
                a.Summary().c_str());
    EXPECT_GE(a.cosine(), 0.999);
    EXPECT_GE(a.top1_agreement(), 0.95);
  }
}

// Quantisation folded into the ops before each quantised Linear (LayerNorm / Attention copies,
// FP8 FFN1 writing FFN2's e4m3 input) against separate quantise passes
// (SURGE_CUDA_QUANT_FUSION=0): the copies are the same bytes (QuantKernels test), so INT8 plans
// agree to accumulation order; FP8 FFN1 rounds its float32 result to e4m3 directly rather than
// through FP16, which moves a few FFN2 inputs by one e4m3 step.
TEST(CudaQuantModel, FusedQuantisationAgreesWithSeparateQuantisePasses) {
  SKIP_WITHOUT_GPU();
  const ir::Graph g = Fixture();
  auto cache = FixtureCalibration(g);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  const auto eval = Batches(6, 3, 16, 48, 200, true);
  for (Precision p : {Precision::kInt8, Precision::kFp8}) {
    BuilderConfig c = Config("cuda", p, 16, 64);
    QuantizeReport report;
    ASSERT_TRUE(QuantizeUnguarded(g, *cache, &c, &report).ok());
    auto fused = Load(g, c);
    setenv("SURGE_CUDA_QUANT_FUSION", "0", 1);
    auto plain = Load(g, c);
    unsetenv("SURGE_CUDA_QUANT_FUSION");
    ASSERT_TRUE(fused && plain);
    const std::string desc = fused->Describe();
    std::printf("%s\n", desc.c_str());
    EXPECT_NE(desc.find("copy for"), std::string::npos) << desc;
    EXPECT_NE(desc.find("input quantised by the op before"), std::string::npos) << desc;
    EXPECT_EQ(plain->Describe().find("copy for"), std::string::npos);
    EXPECT_EQ(plain->Describe().find("input quantised by the op before"), std::string::npos);
    const Agreement a = Measure(*plain, *fused, eval);
    std::printf("bert_seqcls %s fused vs separate quantise passes: %s\n",
                std::string(PrecisionName(p)).c_str(), a.Summary().c_str());
    EXPECT_GE(a.cosine(), p == Precision::kInt8 ? 0.99999 : 0.9995);
    EXPECT_GE(a.top1_agreement(), 0.95);
  }
}

// The LayerNorm after the attention projection and FFN2 in their own GEMM's epilogue
// (QuantLinearOp::ln_op; SURGE_CUDA_LAYER_NORM_FUSION=always takes it at every row count, 0 never)
// against the GEMM and the LayerNorm kernel apart, on a 2-layer hidden-256 BERT (clusters of two
// CTAs): the fused form normalises the float32 sum rather than its FP16 rounding, which moves a
// few quantised inputs by one step.
TEST(CudaQuantModel, LayerNormInTheGemmEpilogueAgreesWithTheLayerNormKernel) {
  SKIP_WITHOUT_GPU();
  bench::BertShape shape;
  shape.hidden = 256;
  shape.heads = 4;
  shape.ffn = 1024;
  shape.layers = 2;
  shape.vocab = 1000;
  auto graph = bench::BertEncoderGraph(77, shape);
  auto cache = Calibrate(*graph, Batches(1, 4, 4, 128, 1000, true), {}, "bert_256");
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  const auto eval = Batches(2, 3, 8, 128, 1000, true);
  for (Precision p : {Precision::kInt8, Precision::kFp8}) {
    BuilderConfig c = Config("cuda", p, 8, 128);
    QuantizeReport report;
    ASSERT_TRUE(QuantizeUnguarded(*graph, *cache, &c, &report).ok());
    setenv("SURGE_CUDA_LAYER_NORM_FUSION", "always", 1);
    auto fused = Load(*graph, c);
    setenv("SURGE_CUDA_LAYER_NORM_FUSION", "0", 1);
    auto plain = Load(*graph, c);
    unsetenv("SURGE_CUDA_LAYER_NORM_FUSION");
    ASSERT_TRUE(fused && plain);
    const std::string desc = fused->Describe();
    const std::string mark = "in the epilogue of the GEMM before it";
    size_t count = 0;
    for (size_t at = desc.find(mark); at != std::string::npos; at = desc.find(mark, at + 1)) {
      ++count;
    }
    EXPECT_EQ(count, 4u) << desc;  // 2 layers x (projection, FFN2)
    EXPECT_EQ(plain->Describe().find(mark), std::string::npos);
    const Agreement a = Measure(*plain, *fused, eval);
    std::printf("bert 2x256 %s, LayerNorm in the GEMM epilogue vs apart: %s\n",
                std::string(PrecisionName(p)).c_str(), a.Summary().c_str());
    EXPECT_GE(a.cosine(), p == Precision::kInt8 ? 0.9999 : 0.9995);
  }
}

TEST(CudaQuantModel, AccuracyGuardFallsBackLayersToFp16) {
  SKIP_WITHOUT_GPU();
  const ir::Graph g = Fixture();
  auto cache = FixtureCalibration(g);
  ASSERT_TRUE(cache.ok());
  BuilderConfig probe = Config("cuda", Precision::kFp8, 16, 64);
  QuantizeOptions loose;
  loose.guard_options.budget = {0.0, 1.0};
  QuantizeReport first;
  ASSERT_TRUE(Quantize(g, &*cache, loose, &probe, &first).ok());
  // Halfway between the all-FP8 engine and the FP16 one: some layers must fall back.
  BuilderConfig fp16_only = Config("cuda", Precision::kFp16, 16, 64);
  auto fp32 = Load(g, Config("cpu", Precision::kFp32, 16, 64));
  auto fp16 = Load(g, fp16_only);
  const double fp16_cos = Measure(*fp32, *fp16, cache->holdout).cosine();
  const double all_fp8 = first.guard.all_quantised.cosine();
  ASSERT_LT(all_fp8, fp16_cos);
  BuilderConfig c = Config("cuda", Precision::kFp8, 16, 64);
  QuantizeOptions tight;
  tight.guard_options.budget = {(fp16_cos + all_fp8) / 2, 1.0};
  tight.guard_options.fallbacks = {Precision::kFp16};  // straight to FP16, not through INT8
  QuantizeReport report;
  Status st = Quantize(g, &*cache, tight, &c, &report);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(report.guard.fallback.empty());
  for (const auto& name : report.guard.fallback) {
    EXPECT_EQ(c.quant.layers.at(name).precision, Precision::kFp16) << name;
  }
  EXPECT_GE(report.guard.final_agreement.cosine(), tight.guard_options.budget.min_cosine);
}

// The CUDA FP8 ladder (fp8 -> int8 -> fp16, the default): a budget between the all-FP8 and
// all-INT8 engines moves layers to INT8 only, and the plan runs INT8 and FP8 GEMMs side by side
// (their fusions across the boundary dropped); one between all-INT8 and FP16 moves every layer
// to INT8 and then the most sensitive to FP16.
TEST(CudaQuantModel, Fp8GuardFallsBackThroughInt8BeforeFp16) {
  SKIP_WITHOUT_GPU();
  const ir::Graph g = Fixture();
  auto cache = FixtureCalibration(g);
  ASSERT_TRUE(cache.ok());
  auto fp32 = Load(g, Config("cpu", Precision::kFp32, 16, 64));
  auto fp16 = Load(g, Config("cuda", Precision::kFp16, 16, 64));
  ASSERT_TRUE(fp32 && fp16);
  const double fp16_cos = Measure(*fp32, *fp16, cache->holdout).cosine();
  double all[2] = {0, 0};  // all FP8, all INT8 on the held-out slice
  for (int i = 0; i < 2; ++i) {
    BuilderConfig c = Config("cuda", i == 0 ? Precision::kFp8 : Precision::kInt8, 16, 64);
    QuantizeOptions loose;
    loose.guard_options.budget = {0.0, 1.0};
    QuantizeReport r;
    ASSERT_TRUE(Quantize(g, &*cache, loose, &c, &r).ok());
    all[i] = r.guard.all_quantised.cosine();
  }
  std::printf("bert_seqcls held-out cosine: all fp8 %.6f, all int8 %.6f, fp16 %.6f\n", all[0],
              all[1], fp16_cos);
  ASSERT_LT(all[0], all[1]);
  ASSERT_LT(all[1], fp16_cos);
  const double budgets[] = {(all[0] + all[1]) / 2, (all[1] + fp16_cos) / 2};
  for (int step = 0; step < 2; ++step) {
    BuilderConfig c = Config("cuda", Precision::kFp8, 16, 64);
    QuantizeOptions o;
    o.guard_options.budget = {budgets[step], 1.0};
    QuantizeReport report;
    Status st = Quantize(g, &*cache, o, &c, &report);
    ASSERT_TRUE(st.ok()) << st.ToString();
    const GuardResult& guard = report.guard;
    EXPECT_EQ(guard.ladder, (std::vector<Precision>{Precision::kInt8, Precision::kFp16}));
    ASSERT_EQ(guard.stages.size(), step + 1u);
    std::map<Precision, int> count;
    for (const auto& [name, p] : guard.precision) ++count[p];
    if (step == 0) {
      EXPECT_GT(count[Precision::kInt8], 0);
      EXPECT_GT(count[Precision::kFp8], 0);
      EXPECT_EQ(count[Precision::kFp16], 0);
    } else {
      EXPECT_EQ(count[Precision::kFp8], 0);
      EXPECT_GT(count[Precision::kFp16], 0);
    }
    auto plan = Load(g, c);
    ASSERT_TRUE(plan);
    const std::string desc = plan->Describe();
    auto occurrences = [&](const std::string& what) {
      int n = 0;
      for (size_t at = desc.find(what); at != std::string::npos; at = desc.find(what, at + 1)) ++n;
      return n;
    };
    EXPECT_EQ(occurrences("cublasLt fp8 e4m3 gemm"), count[Precision::kFp8]) << desc;
    EXPECT_EQ(occurrences("cublasLt int8 gemm"), count[Precision::kInt8]) << desc;
    const Agreement a = Measure(*fp32, *plan, cache->holdout);
    std::printf("budget %.6f: fp8 %d, int8 %d, fp16 %d layers: %s\n", budgets[step],
                count[Precision::kFp8], count[Precision::kInt8], count[Precision::kFp16],
                a.Summary().c_str());
    EXPECT_GE(a.cosine(), budgets[step]);
  }
}

// Build-time checks: no GPU needed.

// Two layers of hidden 64: 9 Linears (2 x QKV, out, FFN1, FFN2, and the pooler).
bench::BertShape SmallBert() {
  bench::BertShape small;
  small.hidden = 64;
  small.heads = 2;
  small.ffn = 128;
  small.vocab = 300;
  small.layers = 2;
  small.max_pos = 64;
  return small;
}

TEST(CudaQuantBuild, HandBuiltEncoderCalibratesAndBuildsWithUniqueLayerNames) {
  // The benchmark's encoder graph is built by hand (not imported): its Linear nodes get unique
  // names, so calibration, the quantisation spec and the plan agree on every layer.
  const bench::BertShape small = SmallBert();
  auto graph = bench::BertEncoderGraph(7, small);
  auto cache = Calibrate(*graph, Batches(1, 2, 2, 16, small.vocab, true), {}, "small");
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  BuilderConfig c = Config("cuda", Precision::kFp8, 4, 32);
  QuantizeReport report;
  Status st = QuantizeUnguarded(*graph, *cache, &c, &report);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(report.quantised, 9);  // 2 x (QKV, out, FFN1, FFN2) + pooler
  EXPECT_EQ(c.quant.layers.size(), 9u);
  EXPECT_TRUE(c.quant.layers.count("Linear_8"));
  auto bytes = builder::BuildPlanFromGraph(*graph, c);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
}

// Where the LayerNorm after a residual Linear is planned into that Linear's epilogue (needs no
// GPU): after the attention projection and FFN2 when N is a multiple of 128 (clusters of N / 128
// CTAs), never with SURGE_CUDA_LAYER_NORM_FUSION=0 or at hidden 64; and no fused kernel writes
// the slot it reads (the Linear after the LayerNorm reads the other one).
TEST(CudaQuantBuild, LayerNormsAfterResidualLinearsArePlannedIntoTheirEpilogue) {
  bench::BertShape shape = SmallBert();
  shape.hidden = 256;
  shape.heads = 4;
  shape.ffn = 512;
  for (int64_t hidden : {int64_t{256}, int64_t{64}}) {
    shape.hidden = hidden;
    auto graph = bench::BertEncoderGraph(13, shape);
    auto cache = Calibrate(*graph, Batches(1, 2, 2, 16, shape.vocab, true), {}, "small");
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    for (Precision p : {Precision::kInt8, Precision::kFp8}) {
      for (bool off : {false, true}) {
        SCOPED_TRACE(
            fmt::format("hidden {}, {}{}", hidden, PrecisionName(p), off ? ", fusion off" : ""));
        BuilderConfig c = Config("cuda", p, 4, 32);
        ASSERT_TRUE(QuantizeUnguarded(*graph, *cache, &c).ok());
        auto program = cuda::AnalyzeGraph(*graph, cuda::QuantBaseConfig(c));
        ASSERT_TRUE(program.ok());
        if (off) setenv("SURGE_CUDA_LAYER_NORM_FUSION", "0", 1);
        auto layers = cuda::QuantLinears::Analyze(*graph, *program, c, false);
        unsetenv("SURGE_CUDA_LAYER_NORM_FUSION");
        ASSERT_TRUE(layers.ok()) << layers.status().ToString();
        int fused = 0;
        for (const auto& [i, op] : layers->ops()) {
          SCOPED_TRACE(op.node);
          if (op.int8_out || op.fp8_out) {
            EXPECT_NE(op.in_slot, op.out_slot);
          }
          if (op.ln_op == 0) continue;
          ++fused;
          EXPECT_TRUE(op.residual);
          EXPECT_EQ(op.ln_op, i + 1);
          EXPECT_EQ(program->ops[op.ln_op].kind, cuda::OpKind::kLayerNorm);
          // The quantised Linear reading the LayerNorm's copy (QKV, FFN1, the pooler).
          if (const cuda::QuantLinearOp* next = layers->CopyFor(op.ln_op)) {
            EXPECT_NE(next->in_slot, op.in_slot);
          }
        }
        // Per layer the projection and FFN2 (the last layer's on [CLS] rows as well).
        EXPECT_EQ(fused, hidden % 128 == 0 && !off ? 2 * shape.layers : 0);
      }
    }
  }
}

// A quantised plan stores its INT8/FP8 layers' weights quantised (bytes and scales, as the load
// used to make them from float32) and nothing else of them: no float32 copy in the graph, no FP16
// copy in the tactics; every other weight, a quantised layer's bias included, as in FP16.
TEST(CudaQuantBuild, QuantisedPlansStoreQuantisedWeightsOnly) {
  const bench::BertShape small = SmallBert();
  auto graph = bench::BertEncoderGraph(11, small);
  auto cache = Calibrate(*graph, Batches(1, 2, 2, 16, small.vocab, true), {}, "small");
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  auto plan_of = [&](const BuilderConfig& c) {
    auto bytes = builder::BuildPlanFromGraph(*graph, c);
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    return bytes.ok() ? *bytes : std::string();
  };
  const std::string fp16 = plan_of(Config("cuda", Precision::kFp16, 4, 32));
  ASSERT_FALSE(fp16.empty());
  for (Precision p : {Precision::kInt8, Precision::kFp8}) {
    SCOPED_TRACE(PrecisionName(p));
    BuilderConfig c = Config("cuda", p, 4, 32);
    ASSERT_TRUE(QuantizeUnguarded(*graph, *cache, &c).ok());
    c.quant.layers["Linear_8"].precision = Precision::kFp16;  // the pooler stays FP16
    const std::string bytes = plan_of(c);
    ASSERT_FALSE(bytes.empty());
    // Weights of 8 of the 9 Linears at one byte instead of two.
    EXPECT_LT(bytes.size(), fp16.size() * 3 / 4) << bytes.size() << " vs " << fp16.size();
    auto plan =
        plan::PlanFile::FromBytes({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    auto decoded = DecodeGraph(*(*plan)->Section(plan::kGraphSection),
                               *(*plan)->Section(plan::kWeightsSection));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    auto blob = cuda::ParseBlob(*(*plan)->Section(plan::kTacticsSection));
    ASSERT_TRUE(blob.ok()) << blob.status().ToString();
    auto program = cuda::AnalyzeGraph(*graph, cuda::QuantBaseConfig(c));
    ASSERT_TRUE(program.ok());
    auto layers = cuda::QuantLinears::Analyze(*graph, *program, c, false);
    ASSERT_TRUE(layers.ok()) << layers.status().ToString();
    ASSERT_EQ(layers->ops().size(), 8u);
    EXPECT_EQ(blob->quant_weights.size(), 8u);
    for (const auto& [i, op] : layers->ops()) {
      SCOPED_TRACE(op.node);
      const int w = program->ops[i].inputs[1], bias = program->ops[i].inputs[2];
      auto q = blob->quant_weights.find({w, op.type});
      ASSERT_NE(q, blob->quant_weights.end());
      std::vector<uint8_t> expect;
      std::vector<float> scales;
      cuda::QuantizeLinearWeight(graph->values[w].constant, op.type, &expect, &scales);
      EXPECT_EQ(q->second.bytes, expect);
      EXPECT_EQ(q->second.scales, scales);
      EXPECT_EQ(q->second.n, op.n);
      EXPECT_EQ(q->second.k, op.k);
      EXPECT_EQ(blob->weights.count(w), 0u) << "an FP16 copy of a quantised weight";
      EXPECT_TRUE(decoded->values[w].is_constant());
      EXPECT_TRUE(decoded->values[w].constant.empty()) << "a float32 copy of a quantised weight";
      EXPECT_EQ(blob->weights.count(bias), 1u) << "the bias is read in FP16";
      // Back to floats: within half a quantisation step of W (e4m3: of its 3-bit mantissa).
      const Tensor back = cuda::DequantizeLinearWeight(q->second, true);
      const float* orig = graph->values[w].constant.data_as<float>();
      const float* got = back.data_as<float>();
      for (int64_t e = 0; e < op.n * op.k; ++e) {
        const float step = op.type == cuda::QuantType::kInt8
                               ? scales[e % op.n] / 2
                               : std::abs(orig[e]) / 16 + scales[0] / 512;
        ASSERT_NEAR(got[e], orig[e], step * 1.0001f) << "element " << e;
      }
    }
    for (size_t i = 0; i < program->ops.size(); ++i) {
      if (program->ops[i].kind != cuda::OpKind::kLinear || layers->Find(i)) continue;
      EXPECT_EQ(blob->weights.count(program->ops[i].inputs[1]), 1u) << "the FP16 pooler's weight";
    }
    // The load takes each layer's weight from the plan; the decoded graph has no float32 data
    // to quantise instead.
    auto loaded = cuda::QuantLinears::Analyze(*decoded, *program, c, true, &blob->quant_weights);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    for (const auto& [i, op] : loaded->ops()) {
      EXPECT_EQ(op.weight, blob->quant_weights.at({program->ops[i].inputs[1], op.type}).bytes);
    }
    auto none = cuda::QuantLinears::Analyze(*decoded, *program, c, true);
    ASSERT_FALSE(none.ok());
    EXPECT_EQ(none.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(none.status().message().find("neither its quantised weight nor the float32 one"),
              std::string::npos)
        << none.status().ToString();
    cuda::QuantWeights wrong = blob->quant_weights;
    wrong.begin()->second.scales.push_back(1.f);
    auto bad = cuda::QuantLinears::Analyze(*decoded, *program, c, true, &wrong);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss) << bad.status().ToString();
  }
}

TEST(CudaQuantBuild, Int8WithoutCalibrationAndBadLayerMarks) {
  const ir::Graph g = Fixture();
  auto bytes = builder::BuildPlanFromGraph(g, Config("cuda", Precision::kInt8, 16, 64));
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("int8 needs calibration"), std::string::npos)
      << bytes.status().ToString();
  BuilderConfig c = Config("cuda", Precision::kFp8, 16, 64);
  c.quant.amax["/bert/pooler/activation/Tanh_output_0"] = 1.f;
  c.quant.layers["/classifier/Gemm"] = {Precision::kFp8, "test"};
  bytes = builder::BuildPlanFromGraph(g, c);
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("not a multiple of 16"), std::string::npos)
      << bytes.status().ToString();
  c.quant.layers.clear();
  c.quant.layers["/bert/pooler/dense/Gemm"] = {Precision::kBf16, "test"};
  bytes = builder::BuildPlanFromGraph(g, c);
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("is marked bf16"), std::string::npos)
      << bytes.status().ToString();
  c.quant.layers.clear();
  c.quant.layers["/bert/pooler/dense/Gemm"] = {Precision::kFp8, "test"};
  c.quant.amax.clear();
  c.quant.amax["unrelated"] = 1.f;
  bytes = builder::BuildPlanFromGraph(g, c);
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("no calibrated threshold"), std::string::npos)
      << bytes.status().ToString();
}

}  // namespace
}  // namespace surge::engine::quant
