// Quantised builds end to end on the CPU backend: calibration of the fixture models, INT8 and
// BF16 plans against the FP32 plan (cosine, top-1), the accuracy guard falling layers back when
// the budget demands it (including a model built so that exactly one layer must fall back), the
// plan's quant section, and every bad input: no cache, a cache for another model, an empty
// calibration set, no held-out slice, precisions the CPU does not run.
//
// The fixtures have random weights, so their logits are not far apart: top-1 agreement on them
// measures how often INT8 noise flips a near-tie, a harsher test than a trained model gives.
#include "engine/quant/quantize.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include "engine/backends/cpu/isa.h"
#include "engine/backends/cpu/quant_linear.h"
#include "engine/builder/builder.h"
#include "engine/passes/passes.h"
#include "engine/plan/plan_file.h"
#include "engine/quant/calibrate.h"

namespace surge::engine::quant {
namespace {

const std::string kModels = std::string(SURGE_SOURCE_DIR) + "/tests/fixtures/models/";

ir::Graph Import(const std::string& rel) {
  auto g = builder::ImportAndOptimize(kModels + rel, {}, nullptr);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? std::move(g).value() : ir::Graph{};
}

// Token batches for a BERT-style graph: ids in [1, vocab), masks with a random tail of padding.
std::vector<TensorMap> TokenBatches(const ir::Graph& g, int count, int64_t batch, int64_t seq,
                                    int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<TensorMap> out;
  for (int b = 0; b < count; ++b) {
    TensorMap m;
    std::vector<int64_t> len(batch);
    for (auto& l : len) l = std::uniform_int_distribution<int64_t>(2, seq)(rng);
    for (int id : g.inputs) {
      const std::string& name = g.values[id].name;
      Tensor t(DType::kInt64, {batch, seq});
      for (int64_t i = 0; i < batch * seq; ++i) {
        const bool real = i % seq < len[i / seq];
        int64_t v = 0;
        if (name.find("mask") != std::string::npos) {
          v = real;
        } else if (name.find("input_ids") != std::string::npos) {
          v = real ? std::uniform_int_distribution<int64_t>(1, vocab - 1)(rng) : 0;
        }
        t.data_as<int64_t>()[i] = v;
      }
      m.emplace(name, t);
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::shared_ptr<const Engine> Load(const std::string& bytes) {
  auto e = Engine::LoadFromMemory({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? *e : nullptr;
}

Agreement Measure(const Engine& ref, const Engine& cand, const std::vector<TensorMap>& batches) {
  auto a = MeasureAgreement(ref, cand, batches);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? *a : Agreement{};
}

BuilderConfig Config(Precision p) {
  BuilderConfig c;
  c.precision = p;
  c.profile = *Profile::Parse(
      "input_ids:1x1,8x32,16x64;attention_mask:1x1,8x32,16x64;token_type_ids:1x1,8x32,16x64");
  return c;
}

std::string Build(const ir::Graph& g, const BuilderConfig& c) {
  auto bytes = builder::BuildPlanFromGraph(g, c);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : "";
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

struct Fixture {
  ir::Graph graph;
  CalibrationCache cache;
  std::vector<TensorMap> eval;  // inputs neither calibration nor held-out saw
};

const Fixture& BertSeqcls() {
  static Fixture* f = [] {
    auto* x = new Fixture;
    x->graph = Import("bert_seqcls/model.torchscript.onnx");
    auto calib = TokenBatches(x->graph, 6, 8, 32, 200, 1);
    auto holdout = TokenBatches(x->graph, 2, 8, 32, 200, 2);
    auto cache = Calibrate(x->graph, calib, holdout, "bert_seqcls");
    EXPECT_TRUE(cache.ok()) << cache.status().ToString();
    if (cache.ok()) x->cache = std::move(cache).value();
    x->eval = TokenBatches(x->graph, 4, 16, 48, 200, 3);
    return x;
  }();
  return *f;
}

TEST(Calibrate, ObservesEveryLinearInputOnRealTokensOnly) {
  const Fixture& f = BertSeqcls();
  auto layers = QuantizableLayers(f.graph);
  ASSERT_TRUE(layers.ok());
  EXPECT_EQ(layers->size(), 10u);  // QKV, out, FFN1, FFN2 per layer; pooler; classifier
  std::set<std::string> inputs;
  for (const auto& l : *layers) inputs.insert(l.input);
  EXPECT_EQ(f.cache.tensors.size(), inputs.size());
  EXPECT_EQ(f.cache.batches, 6);
  EXPECT_EQ(f.cache.sequences, 48);
  EXPECT_EQ(f.cache.holdout.size(), 2u);
  // Token-row tensors ([B,S,H]) count only real tokens: H values per real token.
  const auto& qkv_in = f.cache.tensors.at((*layers)[0].input);
  EXPECT_EQ(qkv_in.hist.total(), static_cast<uint64_t>(f.cache.tokens * (*layers)[0].k));
  EXPECT_GT(qkv_in.hist.max_abs(), 0);
  EXPECT_LT(qkv_in.min, 0);
  EXPECT_GT(qkv_in.max, 0);
}

TEST(Calibrate, RepeatedLayerNamesAreAmbiguousUntilTheGraphIsOptimised) {
  // A graph built by hand with every Linear node named "Linear": layers are addressed by node
  // name, so calibrating it as it is would be ambiguous; optimising names the nodes uniquely.
  ir::Graph g = BertSeqcls().graph;
  for (ir::Node& n : g.nodes) {
    if (n.op_type == "Linear") n.name = "Linear";
  }
  auto layers = QuantizableLayers(g);
  ASSERT_FALSE(layers.ok());
  EXPECT_EQ(layers.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(layers.status().message().find("both named 'Linear'"), std::string::npos)
      << layers.status().ToString();
  EXPECT_NE(layers.status().message().find("optimise the graph first"), std::string::npos);
  ASSERT_TRUE(passes::Optimize(g, {}, nullptr).ok());
  layers = QuantizableLayers(g);
  ASSERT_TRUE(layers.ok()) << layers.status().ToString();
  ASSERT_EQ(layers->size(), 10u);
  std::set<std::string> names;
  for (const auto& l : *layers) names.insert(l.name);
  EXPECT_EQ(names.size(), 10u);
  EXPECT_TRUE(names.count("Linear"));
  EXPECT_TRUE(names.count("Linear_1"));
  // The renamed graph calibrates and quantises; its spec names every layer once.
  auto cache =
      Calibrate(g, TokenBatches(g, 2, 4, 16, 200, 1), TokenBatches(g, 1, 4, 16, 200, 2), "renamed");
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  BuilderConfig c = Config(Precision::kInt8);
  QuantizeOptions o;
  o.guard = false;
  QuantizeReport report;
  Status st = Quantize(g, &*cache, o, &c, &report);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(c.quant.layers.size(), 10u);
  EXPECT_EQ(c.quant.layers.at("Linear_1").precision, Precision::kInt8);
}

TEST(Quantize, Int8PlanOfBertFixtureAgreesWithFp32) {
  const Fixture& f = BertSeqcls();
  BuilderConfig c = Config(Precision::kInt8);
  QuantizeOptions o;
  o.guard = false;
  QuantizeReport report;
  ASSERT_TRUE(Quantize(f.graph, &f.cache, o, &c, &report).ok());
  EXPECT_EQ(report.quantised, 10);
  auto fp32 = Load(Build(f.graph, Config(Precision::kFp32)));
  auto int8 = Load(Build(f.graph, c));
  ASSERT_TRUE(fp32 && int8);
  const std::string desc = int8->Describe();
  EXPECT_EQ(Count(desc, ": linear(onednn int8)"), 10) << desc;
  // FFN1 (GELU) feeds only FFN2, and the pooler only the classifier: they write INT8 at their
  // consumer's input scale.
  EXPECT_EQ(Count(desc, "out=int8"), 3) << desc;
  const Agreement a = Measure(*fp32, *int8, f.eval);
  std::cout << "bert_seqcls int8 vs fp32 on 64 unseen sequences: " << a.Summary() << '\n';
  EXPECT_GE(a.cosine(), 0.999);
  EXPECT_GE(a.top1_agreement(), 0.95);
  // The plan records every layer's precision and reason.
  const QuantSpec& q = int8->plan_config().builder.quant;
  EXPECT_EQ(q.layers.size(), 10u);
  for (const auto& [name, l] : q.layers) {
    EXPECT_EQ(l.precision, Precision::kInt8) << name;
    EXPECT_NE(l.reason.find("no accuracy guard"), std::string::npos) << l.reason;
  }
  EXPECT_EQ(q.amax, c.quant.amax);
}

// On a CPU without VNNI the INT8 weights are 7-bit (cpu::Int8WeightMax), which
// SURGE_CPU_INT8_WEIGHT_MAX=63 asks for everywhere: such a plan agrees with FP32 and says so;
// a full-range plan is refused where the 16-bit pair sums would saturate.
TEST(Quantize, SevenBitInt8PlansAgreeAndFullRangePlansNeedVnni) {
  const Fixture& f = BertSeqcls();
  // The INT8 config of Int8PlanOfBertFixtureAgreesWithFp32, as the QuantBlob fixture makes it.
  BuilderConfig c = Config(Precision::kInt8);
  QuantizeOptions no_guard;
  no_guard.guard = false;
  ASSERT_TRUE(Quantize(f.graph, &f.cache, no_guard, &c, nullptr).ok());
  const std::string native = Build(f.graph, c);
  setenv("SURGE_CPU_INT8_WEIGHT_MAX", "63", 1);
  const std::string seven = Build(f.graph, c);
  auto refused =
      Engine::LoadFromMemory({reinterpret_cast<const uint8_t*>(native.data()), native.size()});
  auto int8 = Load(seven);
  unsetenv("SURGE_CPU_INT8_WEIGHT_MAX");
  auto fp32 = Load(Build(f.graph, Config(Precision::kFp32)));
  ASSERT_TRUE(fp32 && int8);
  const std::string desc = int8->Describe();
  EXPECT_EQ(Count(desc, "(weights in [-63,63]: no VNNI)"), 10) << desc;
  const Agreement a = Measure(*fp32, *int8, f.eval);
  std::cout << "bert_seqcls int8 (7-bit weights) vs fp32: " << a.Summary() << '\n';
  EXPECT_GE(a.cosine(), 0.999);
  EXPECT_GE(a.top1_agreement(), 0.95);
  if (cpu::CpuHasVnni()) {
    // Packed at 127 here, loaded as if on a CPU without VNNI.
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(refused.status().message().find("no VNNI"), std::string::npos)
        << refused.status().ToString();
  } else {
    // Without VNNI both builds are 7-bit, so the plan loads.
    EXPECT_TRUE(refused.ok()) << refused.status().ToString();
  }
}

// Rows of the word-embedding table (what input ids must stay below).
int64_t Vocab(const ir::Graph& g) {
  for (const auto& n : g.nodes) {
    if (n.op_type == "EmbedLayerNorm" && n.input(3) >= 0)
      return g.values[n.input(3)].constant.dim(0);
  }
  return 100;
}

TEST(Quantize, Int8PlansOfEveryFixtureAgreeWithFp32) {
  for (const char* rel :
       {"bert_tokcls/model.torchscript.onnx", "roberta_seqcls/model.torchscript.onnx",
        "roberta_tokcls/model.torchscript.onnx", "distilbert_seqcls/model.dynamo.onnx",
        "distilbert_tokcls/model.torchscript.onnx", "electra_seqcls/model.torchscript.onnx",
        "electra_tokcls/model.torchscript.onnx", "bert12_tiny/model.torchscript.onnx",
        "bert_seqcls/hf"}) {
    SCOPED_TRACE(rel);
    ir::Graph g = Import(rel);
    const int64_t vocab = Vocab(g);
    auto cache = Calibrate(g, TokenBatches(g, 6, 8, 32, vocab, 11), {}, rel);
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    BuilderConfig c;
    c.precision = Precision::kInt8;
    QuantizeOptions o;
    o.guard = false;
    QuantizeReport report;
    ASSERT_TRUE(Quantize(g, &*cache, o, &c, &report).ok());
    EXPECT_GT(report.quantised, 0);
    EXPECT_EQ(report.quantised, report.layers);
    BuilderConfig fp32_config;
    auto fp32 = Load(Build(g, fp32_config));
    auto int8 = Load(Build(g, c));
    ASSERT_TRUE(fp32 && int8);
    const Agreement a = Measure(*fp32, *int8, TokenBatches(g, 4, 8, 32, vocab, 12));
    std::cout << rel << ": " << report.quantised << " int8 layers, " << a.Summary() << '\n';
    EXPECT_GE(a.cosine(), 0.999);
    EXPECT_GE(a.top1_agreement(), 0.95);
  }
}

TEST(Quantize, EveryCalibratorBuildsAWorkingPlan) {
  const Fixture& f = BertSeqcls();
  auto fp32 = Load(Build(f.graph, Config(Precision::kFp32)));
  for (const char* name : {"minmax", "entropy", "percentile"}) {
    BuilderConfig c = Config(Precision::kInt8);
    QuantizeOptions o;
    o.guard = false;
    o.calibrator = *ParseCalibrator(name, 99.99);
    ASSERT_TRUE(Quantize(f.graph, &f.cache, o, &c, nullptr).ok());
    auto int8 = Load(Build(f.graph, c));
    const Agreement a = Measure(*fp32, *int8, f.eval);
    std::cout << name << ": " << a.Summary() << '\n';
    EXPECT_GE(a.cosine(), 0.995) << name;
  }
}

TEST(Quantize, Bf16PlanAgreesWithFp32) {
  if (!cpu::CpuHasBf16()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  const Fixture& f = BertSeqcls();
  BuilderConfig c = Config(Precision::kBf16);
  ASSERT_TRUE(Quantize(f.graph, nullptr, {}, &c, nullptr).ok());
  auto fp32 = Load(Build(f.graph, Config(Precision::kFp32)));
  auto bf16 = Load(Build(f.graph, c));
  EXPECT_EQ(Count(bf16->Describe(), ": linear(onednn bf16)"), 10);
  const Agreement a = Measure(*fp32, *bf16, f.eval);
  std::cout << "bert_seqcls bf16: " << a.Summary() << '\n';
  EXPECT_GE(a.cosine(), 0.9999);
}

// The guard's report on an INT8 build of `f` at `budget`; `config`, when given, is set to that
// build's config with the quantisation the guard chose.
QuantizeReport GuardInt8(const Fixture& f, const GuardBudget& budget,
                         BuilderConfig* config = nullptr) {
  BuilderConfig own;
  BuilderConfig& c = config ? *config : own;
  c = Config(Precision::kInt8);
  QuantizeOptions o;
  o.guard_options.budget = budget;
  QuantizeReport report;
  const Status st = Quantize(f.graph, &f.cache, o, &c, &report);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return report;
}

TEST(AccuracyGuard, LooseBudgetKeepsEveryLayerInt8) {
  const Fixture& f = BertSeqcls();
  BuilderConfig c = Config(Precision::kInt8);
  QuantizeOptions o;
  o.guard_options.budget = {0.99, 0.2};
  QuantizeReport report;
  ASSERT_TRUE(Quantize(f.graph, &f.cache, o, &c, &report).ok());
  EXPECT_TRUE(report.guarded);
  EXPECT_TRUE(report.guard.fallback.empty());
  EXPECT_TRUE(report.guard.stages.empty());
  EXPECT_EQ(report.guard.plans_evaluated, 1);
  EXPECT_EQ(report.quantised, 10);
  for (const auto& [name, l] : c.quant.layers) {
    EXPECT_NE(l.reason.find("with every layer int8 the budget holds"), std::string::npos)
        << l.reason;
  }
}

TEST(AccuracyGuard, TightBudgetFallsBackTheMostSensitiveLayers) {
  const Fixture& f = BertSeqcls();
  // First the all-INT8 engine's cosine, then a budget halfway between it and 1.
  const double all_int8 = GuardInt8(f, {0.0, 1.0}).guard.all_quantised.cosine();
  ASSERT_LT(all_int8, 1.0);
  BuilderConfig c = Config(Precision::kInt8);
  QuantizeOptions tight;
  tight.guard_options.budget = {(1.0 + all_int8) / 2, 1.0};
  QuantizeReport report;
  ASSERT_TRUE(Quantize(f.graph, &f.cache, tight, &c, &report).ok());
  const GuardResult& g = report.guard;
  ASSERT_FALSE(g.fallback.empty());
  EXPECT_LT(g.fallback.size(), 10u);
  EXPECT_GE(g.final_agreement.cosine(), tight.guard_options.budget.min_cosine);
  // One stage (the CPU's ladder is fp32 alone) that ranked all ten layers.
  ASSERT_EQ(g.stages.size(), 1u);
  EXPECT_EQ(g.ladder, std::vector<Precision>{Precision::kFp32});
  const GuardStage& st = g.stages[0];
  EXPECT_EQ(st.from, Precision::kInt8);
  EXPECT_EQ(st.to, Precision::kFp32);
  EXPECT_EQ(st.effects.size(), 10u);
  EXPECT_EQ(st.moved, g.fallback);
  // The fallen-back layers are the top of the sensitivity ranking, in order.
  for (size_t i = 0; i < g.fallback.size(); ++i) EXPECT_EQ(g.fallback[i], st.effects[i].layer);
  int fp32 = 0;
  for (const auto& [name, l] : c.quant.layers) {
    if (l.precision == Precision::kFp32) {
      ++fp32;
      EXPECT_NE(l.reason.find("kept by the accuracy guard"), std::string::npos) << l.reason;
      EXPECT_NE(l.reason.find("sensitivity #"), std::string::npos) << l.reason;
    }
  }
  EXPECT_EQ(fp32, static_cast<int>(g.fallback.size()));
  EXPECT_EQ(report.quantised, 10 - fp32);
  // The built plan has exactly those layers in FP32 and meets the budget on the held-out inputs.
  auto plan = Load(Build(f.graph, c));
  EXPECT_EQ(Count(plan->Describe(), ": linear(onednn int8)"), 10 - fp32);
  auto ref = Load(Build(f.graph, Config(Precision::kFp32)));
  EXPECT_GE(Measure(*ref, *plan, f.cache.holdout).cosine(), tight.guard_options.budget.min_cosine);
}

// A budget the all-INT8 engine's held-out mean just meets keeps every layer INT8; read as a 95 %
// lower confidence bound over the same rows it moves the most sensitive layers to FP32, and the
// built plan's bound meets it.
TEST(AccuracyGuard, ConfidenceBoundKeepsMoreLayersThanTheMean) {
  const Fixture& f = BertSeqcls();
  const Agreement all_int8 = GuardInt8(f, {0.0, 1.0}).guard.all_quantised;
  ASSERT_GE(all_int8.min_rows(), 2);
  ASSERT_GT(all_int8.cosine_stderr(), 0);
  const double at = all_int8.cosine();
  const QuantizeReport by_mean = GuardInt8(f, {at, 1.0});
  EXPECT_TRUE(by_mean.guard.fallback.empty());
  const GuardBudget bound{at, 1.0, 0.95};
  BuilderConfig cb;
  const QuantizeReport by_bound = GuardInt8(f, bound, &cb);
  const GuardResult& g = by_bound.guard;
  EXPECT_LT(g.all_quantised.cosine_lower_bound(0.95), at);
  ASSERT_FALSE(g.fallback.empty());
  EXPECT_GE(g.final_agreement.cosine_lower_bound(0.95), at);
  auto plan = Load(Build(f.graph, cb));
  auto ref = Load(Build(f.graph, Config(Precision::kFp32)));
  EXPECT_GE(Measure(*ref, *plan, f.cache.holdout).cosine_lower_bound(0.95), at);
  std::cout << "bert_seqcls int8, budget " << at << ": by the mean "
            << by_mean.guard.fallback.size() << " layer(s) in fp32, by the 95% bound "
            << g.fallback.size() << " (" << bound.Describe(g.final_agreement) << ")\n";
}

// The ladder int8 -> bf16 -> fp32 (--guard-fallback bf16,fp32) on the CPU: a budget between the
// all-INT8 and all-BF16 engines moves the most sensitive layers to BF16 and none to FP32; one
// between all-BF16 and FP32 moves every layer to BF16 first and then the most sensitive to FP32.
// Each built plan runs exactly the precisions the guard chose.
TEST(AccuracyGuard, FallsBackThroughBf16BeforeFp32) {
  if (!cpu::CpuHasBf16()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  const Fixture& f = BertSeqcls();
  auto ref = Load(Build(f.graph, Config(Precision::kFp32)));
  BuilderConfig probe;
  const double all_int8 = GuardInt8(f, {0.0, 1.0}, &probe).guard.all_quantised.cosine();
  for (auto& [name, l] : probe.quant.layers) l.precision = Precision::kBf16;
  const double all_bf16 = Measure(*ref, *Load(Build(f.graph, probe)), f.cache.holdout).cosine();
  std::cout << "held-out cosine: all int8 " << all_int8 << ", all bf16 " << all_bf16 << '\n';
  ASSERT_LT(all_int8, all_bf16);
  ASSERT_LT(all_bf16, 1.0);
  const double budgets[] = {(all_int8 + all_bf16) / 2, (all_bf16 + 1.0) / 2};
  for (int step = 0; step < 2; ++step) {
    BuilderConfig c = Config(Precision::kInt8);
    QuantizeOptions o;
    o.guard_options.budget = {budgets[step], 1.0};
    o.guard_options.fallbacks = {Precision::kBf16, Precision::kFp32};
    QuantizeReport report;
    Status st = Quantize(f.graph, &f.cache, o, &c, &report);
    ASSERT_TRUE(st.ok()) << st.ToString();
    const GuardResult& g = report.guard;
    ASSERT_EQ(g.stages.size(), step + 1u);
    EXPECT_GE(g.final_agreement.cosine(), budgets[step]);
    std::map<Precision, int> count;
    for (const auto& [name, l] : c.quant.layers) {
      ++count[l.precision];
      EXPECT_EQ(l.precision, g.precision.at(name)) << name;
      if (l.precision != Precision::kInt8) {
        EXPECT_NE(l.reason.find("kept by the accuracy guard in " +
                                std::string(PrecisionName(l.precision))),
                  std::string::npos)
            << l.reason;
      }
    }
    if (step == 0) {
      EXPECT_GT(count[Precision::kBf16], 0);
      EXPECT_GT(count[Precision::kInt8], 0);
      EXPECT_EQ(count[Precision::kFp32], 0);
      EXPECT_EQ(g.stages[0].to, Precision::kBf16);
      EXPECT_EQ(g.stages[0].moved.size(), static_cast<size_t>(count[Precision::kBf16]));
    } else {
      EXPECT_TRUE(g.stages[0].effects.empty());  // every layer had to reach BF16
      EXPECT_EQ(g.stages[0].moved.size(), 10u);
      EXPECT_EQ(count[Precision::kInt8], 0);
      EXPECT_GT(count[Precision::kFp32], 0);
      EXPECT_GT(count[Precision::kBf16], 0);
      const std::string& moved = g.stages[1].moved.front();
      EXPECT_NE(c.quant.layers.at(moved).reason.find("every layer went from int8 to bf16"),
                std::string::npos)
          << c.quant.layers.at(moved).reason;
    }
    auto plan = Load(Build(f.graph, c));
    const std::string desc = plan->Describe();
    EXPECT_EQ(Count(desc, ": linear(onednn int8)"), count[Precision::kInt8]) << desc;
    EXPECT_EQ(Count(desc, ": linear(onednn bf16)"), count[Precision::kBf16]) << desc;
    EXPECT_GE(Measure(*ref, *plan, f.cache.holdout).cosine(), budgets[step]);
  }
}

// x[B,16] -> l1 (16x32) -> l2 (32x32) -> l3 (32x8). l1 gives channel 0 of l2's input a constant
// offset of 500 while the other channels stay near 1, and l2 barely reads channel 0: with one
// per-tensor scale (minmax: 500/127 = 3.9 per step) l2's useful inputs all round to 0 or +-1.
ir::Graph OutlierMlp() {
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.f, 0.3f);
  ir::Graph g;
  const ir::Dim b = ir::Dim::Symbol("batch");
  int x = g.AddInput("x", DType::kFloat32, {b, 16});
  auto linear = [&](const std::string& name, int in, int64_t k, int64_t nn, float channel0_bias,
                    float row0_scale) {
    Tensor w(DType::kFloat32, {k, nn}), bias(DType::kFloat32, {nn});
    for (int64_t i = 0; i < k * nn; ++i)
      w.data_as<float>()[i] = n(rng) * (i / nn == 0 ? row0_scale : 1);
    for (int64_t i = 0; i < nn; ++i) bias.data_as<float>()[i] = i == 0 ? channel0_bias : n(rng);
    ir::Node node;
    node.op_type = "Linear";
    node.domain = std::string(ir::kSurgeDomain);
    node.name = name;
    node.inputs = {in, g.AddConstant(name + ".w", w), g.AddConstant(name + ".b", bias)};
    node.outputs = {g.AddValue(name + ".y", DType::kFloat32, ir::SymShape{b, nn})};
    g.AddNode(node);
    return node.outputs[0];
  };
  int h1 = linear("l1", x, 16, 32, 500.f, 1.f);
  int h2 = linear("l2", h1, 32, 32, 0.f, 1e-4f);
  int y = linear("l3", h2, 32, 8, 0.f, 1.f);
  g.outputs = {y};
  return g;
}

std::vector<TensorMap> FloatBatches(int count, int64_t batch, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<TensorMap> out;
  for (int i = 0; i < count; ++i) {
    Tensor t(DType::kFloat32, {batch, 16});
    for (float& v : t.span<float>()) v = n(rng);
    out.push_back({{"x", t}});
  }
  return out;
}

TEST(AccuracyGuard, FallsBackExactlyTheLayerWithAnOutlierChannel) {
  const ir::Graph g = OutlierMlp();
  auto cache = Calibrate(g, FloatBatches(4, 32, 1), FloatBatches(2, 32, 2), "outlier_mlp");
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  BuilderConfig c;
  c.precision = Precision::kInt8;
  c.profile = *Profile::Parse("x:1x16,32x16,64x16");
  QuantizeOptions o;
  o.calibrator = *ParseCalibrator("minmax");
  o.guard_options.budget = {0.999, 0.05};
  QuantizeReport report;
  Status st = Quantize(g, &*cache, o, &c, &report);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::cout << "all int8: " << report.guard.all_quantised.Summary()
            << "; final: " << report.guard.final_agreement.Summary() << '\n';
  EXPECT_FALSE(o.guard_options.budget.Met(report.guard.all_quantised));
  ASSERT_EQ(report.guard.fallback, std::vector<std::string>{"l2"});
  ASSERT_EQ(report.guard.stages.size(), 1u);
  EXPECT_EQ(report.guard.stages[0].effects.front().layer, "l2");
  EXPECT_EQ(c.quant.layers.at("l2").precision, Precision::kFp32);
  EXPECT_EQ(c.quant.layers.at("l1").precision, Precision::kInt8);
  EXPECT_EQ(c.quant.layers.at("l3").precision, Precision::kInt8);
  EXPECT_TRUE(o.guard_options.budget.Met(report.guard.final_agreement));
}

TEST(QuantizeErrors, Int8WithoutCacheOrCalibration) {
  const Fixture& f = BertSeqcls();
  BuilderConfig c = Config(Precision::kInt8);
  Status st = Quantize(f.graph, nullptr, {}, &c, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("needs a calibration cache"), std::string::npos) << st.ToString();
  // The backend itself refuses an int8 build without scales.
  auto bytes = builder::BuildPlanFromGraph(f.graph, Config(Precision::kInt8));
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("int8 needs calibration"), std::string::npos)
      << bytes.status().ToString();
}

TEST(QuantizeErrors, CacheForAnotherModel) {
  const Fixture& f = BertSeqcls();
  ir::Graph other = Import("electra_seqcls/model.torchscript.onnx");
  BuilderConfig c = Config(Precision::kInt8);
  Status st = Quantize(other, &f.cache, {}, &c, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("made for another model ('bert_seqcls'"), std::string::npos)
      << st.ToString();
}

TEST(QuantizeErrors, EmptyCalibrationSetAndMissingHoldout) {
  const Fixture& f = BertSeqcls();
  auto empty = Calibrate(f.graph, {}, {}, "bert_seqcls");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("calibration set is empty"), std::string::npos);
  CalibrationCache no_holdout = f.cache;
  no_holdout.holdout.clear();
  BuilderConfig c = Config(Precision::kInt8);
  Status st = Quantize(f.graph, &no_holdout, {}, &c, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no held-out inputs"), std::string::npos) << st.ToString();
  QuantizeOptions no_guard;
  no_guard.guard = false;
  EXPECT_TRUE(Quantize(f.graph, &no_holdout, no_guard, &c, nullptr).ok());
}

TEST(QuantizeErrors, BatchTheModelRejects) {
  const Fixture& f = BertSeqcls();
  auto bad = TokenBatches(f.graph, 1, 2, 8, 5000, 9);  // ids beyond the 200-row vocabulary
  auto r = Calibrate(f.graph, bad, {}, "bert_seqcls");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("calibration batch 1 of 1"), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().ToString().find("out of range"), std::string::npos);
}

TEST(QuantizeErrors, PrecisionsTheCpuDoesNotRun) {
  const Fixture& f = BertSeqcls();
  for (Precision p : {Precision::kFp16, Precision::kFp8}) {
    auto bytes = builder::BuildPlanFromGraph(f.graph, Config(p));
    ASSERT_FALSE(bytes.ok());
    EXPECT_NE(bytes.status().message().find("does not run precision"), std::string::npos)
        << bytes.status().ToString();
    EXPECT_NE(bytes.status().message().find("--backend cuda"), std::string::npos);
  }
  setenv("SURGE_CPU_ISA", "avx2", 1);
  auto bf16 = builder::BuildPlanFromGraph(f.graph, Config(Precision::kBf16));
  unsetenv("SURGE_CPU_ISA");
  ASSERT_FALSE(bf16.ok());
  EXPECT_NE(bf16.status().message().find("bf16 needs AVX-512 BF16"), std::string::npos)
      << bf16.status().ToString();
}

TEST(QuantizeErrors, GuardBudgetOutOfRange) {
  const Fixture& f = BertSeqcls();
  BuilderConfig c = Config(Precision::kInt8);
  QuantizeOptions o;
  o.guard_options.budget = {1.5, 0.01};
  Status st = Quantize(f.graph, &f.cache, o, &c, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("min cosine 1.5"), std::string::npos) << st.ToString();
  o.guard_options.budget = {0.999, 0.01, 1.0};
  st = Quantize(f.graph, &f.cache, o, &c, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("confidence 1 must lie in [0.5, 1)"), std::string::npos)
      << st.ToString();
}

TEST(QuantizeErrors, FallbackLadders) {
  auto ok = ParseFallbacks("bf16, fp32");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, (std::vector<Precision>{Precision::kBf16, Precision::kFp32}));
  for (const char* bad : {"int8,,fp32", "", "fp32,"}) {
    auto r = ParseFallbacks(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("empty entry"), std::string::npos) << r.status().ToString();
  }
  auto unknown = ParseFallbacks("int4,fp32");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("int4"), std::string::npos)
      << unknown.status().ToString();
  // Each refused before any plan is built, guarded or not.
  const Fixture& f = BertSeqcls();
  struct Case {
    Precision target;
    std::vector<Precision> ladder;
    bool guard;
    const char* says;
  };
  const Case cases[] = {
      {Precision::kInt8, {Precision::kFp16}, true, "cpu backend runs int8, bf16 or fp32"},
      {Precision::kInt8, {Precision::kFp8, Precision::kFp32}, false, "cpu backend runs"},
      {Precision::kInt8, {Precision::kInt8, Precision::kFp32}, true, "build's own precision"},
      {Precision::kInt8, {Precision::kFp32, Precision::kFp32}, true, "fp32 is named twice"},
      {Precision::kBf16, {Precision::kInt8, Precision::kFp32}, true, "needs calibrated scales"},
  };
  for (const Case& k : cases) {
    BuilderConfig c = Config(k.target);
    QuantizeOptions o;
    o.guard = k.guard;
    o.guard_options.fallbacks = k.ladder;
    Status st = Quantize(f.graph, &f.cache, o, &c, nullptr);
    ASSERT_FALSE(st.ok()) << k.says;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(k.says), std::string::npos) << st.ToString();
  }
  EXPECT_EQ(DefaultFallbacks("cuda", Precision::kFp8),
            (std::vector<Precision>{Precision::kInt8, Precision::kFp16}));
  EXPECT_EQ(DefaultFallbacks("cuda", Precision::kInt8), std::vector<Precision>{Precision::kFp16});
  EXPECT_EQ(DefaultFallbacks("cpu", Precision::kInt8), std::vector<Precision>{Precision::kFp32});
  EXPECT_TRUE(CheckFallbacks("cuda", Precision::kFp8, {Precision::kInt8, Precision::kFp16}).ok());
  EXPECT_FALSE(CheckFallbacks("cuda", Precision::kInt8, {Precision::kBf16}).ok());
}

// The CPU tactics blob of an INT8 plan (version 3: quantised weight entries with their weight
// range), corrupted where it
// matters; each corruption is a clear error at load, never a crash or a silently wrong engine.
class QuantBlob : public ::testing::Test {
 protected:
  void SetUp() override {
    const Fixture& f = BertSeqcls();
    config_ = Config(Precision::kInt8);
    QuantizeOptions o;
    o.guard = false;
    ASSERT_TRUE(Quantize(f.graph, &f.cache, o, &config_, nullptr).ok());
    const std::string plan_bytes = Build(f.graph, config_);
    auto plan = plan::PlanFile::FromBytes(
        {reinterpret_cast<const uint8_t*>(plan_bytes.data()), plan_bytes.size()});
    ASSERT_TRUE(plan.ok());
    auto t = (*plan)->Section(plan::kTacticsSection);
    ASSERT_TRUE(t.ok());
    blob_.assign(reinterpret_cast<const char*>(t->data()), t->size());
    graph_ = std::make_shared<ir::Graph>(f.graph);
    // Walk the header to the weight table: magic, version, isa, oneDNN version, descriptor
    // size, node count, one kernel byte per node, weight count.
    size_t at = 8;
    auto str = [&] {
      uint32_t n;
      std::memcpy(&n, blob_.data() + at, 4);
      at += 4 + n;
    };
    str();
    str();
    at += 4;
    uint32_t nodes;
    std::memcpy(&nodes, blob_.data() + at, 4);
    at += 4;
    kernels_at_ = at;
    at += nodes + 4;
    // Entries: node, k, n, bias, residual, activation, format, [x_scale, y_scale, count, scales,
    // weight range], descriptor, impl, offset, size (every entry here is INT8).
    while (entries_.size() < 10) {
      Entry e;
      std::memcpy(&e.node, blob_.data() + at, 4);
      e.format_at = at + 4 + 16 + 3;
      e.x_scale_at = e.format_at + 1;
      e.y_scale_at = e.x_scale_at + 4;
      e.count_at = e.y_scale_at + 4;
      uint32_t count;
      std::memcpy(&count, blob_.data() + e.count_at, 4);
      e.w_max_at = e.count_at + 4 + 4 * count;
      at = e.w_max_at + 1;
      str();
      str();
      at += 16;
      entries_.push_back(e);
    }
  }
  Status Load(const std::string& b) {
    return FindBackend("cpu")
        ->Load(graph_, {reinterpret_cast<const uint8_t*>(b.data()), b.size()}, config_, {})
        .status();
  }
  template <typename T>
  std::string With(size_t at, T v) const {
    std::string b = blob_;
    std::memcpy(b.data() + at, &v, sizeof(T));
    return b;
  }
  float Scale(size_t at) const {
    float f;
    std::memcpy(&f, blob_.data() + at, 4);
    return f;
  }
  struct Entry {
    uint32_t node = 0;
    size_t format_at = 0, x_scale_at = 0, y_scale_at = 0, count_at = 0, w_max_at = 0;
  };
  BuilderConfig config_;
  std::string blob_;
  std::shared_ptr<ir::Graph> graph_;
  size_t kernels_at_ = 0;
  std::vector<Entry> entries_;
};

TEST_F(QuantBlob, IntactLoadsAndEveryCorruptionIsNamed) {
  ASSERT_TRUE(Load(blob_).ok()) << Load(blob_).ToString();
  EXPECT_EQ(blob_[4], 3);  // quantised plans are version 3
  auto expect = [&](const std::string& b, const std::string& text) {
    Status st = Load(b);
    EXPECT_FALSE(st.ok()) << text;
    EXPECT_NE(st.ToString().find(text), std::string::npos) << st.ToString();
  };
  expect(With<uint32_t>(4, 4), "version 4 is not supported");
  const Entry& first = entries_[0];
  EXPECT_EQ(blob_[first.format_at], 1);  // int8
  expect(With<uint8_t>(first.format_at, 7), "has format 7");
  expect(With<uint8_t>(first.format_at, 2), "which is not a Linear without weights");
  expect(With<float>(first.x_scale_at, -1.f), "must be a positive number");
  expect(With<float>(first.x_scale_at, std::nanf("")), "must be a positive number");
  expect(With<uint32_t>(first.count_at, 1u << 30), "claims");
  EXPECT_EQ(static_cast<int>(static_cast<uint8_t>(blob_[first.w_max_at])), cpu::Int8WeightMax());
  expect(With<uint8_t>(first.w_max_at, 0), "INT8 weight range 0");
  expect(With<uint8_t>(first.w_max_at, 200), "INT8 weight range 200");
  if (!cpu::CpuHasVnni()) {
    expect(With<uint8_t>(first.w_max_at, 127), "this CPU has no VNNI");
  }
  expect(With<uint8_t>(kernels_at_ + first.node, 1), "which is not a Linear without weights");
  // A requantising producer (FFN1) and its consumer (FFN2) must agree on the INT8 scale.
  bool found = false;
  for (size_t i = 0; i + 1 < entries_.size(); ++i) {
    if (Scale(entries_[i].y_scale_at) > 0) {
      found = true;
      expect(With<float>(entries_[i + 1].x_scale_at, Scale(entries_[i + 1].x_scale_at) * 2),
             "is written as int8 but is read by something other than an INT8 Linear");
      // Without requantisation the consumer quantises the float output itself: still correct.
      EXPECT_TRUE(Load(With<float>(entries_[i].y_scale_at, 0.f)).ok());
      break;
    }
  }
  EXPECT_TRUE(found);
  for (size_t cut : {size_t{6}, size_t{40}, entries_[3].count_at, blob_.size() - 1}) {
    EXPECT_FALSE(Load(blob_.substr(0, cut)).ok()) << cut;
  }
}

}  // namespace
}  // namespace surge::engine::quant
