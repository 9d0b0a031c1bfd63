// The accuracy guard's search (SearchFallbacks) on a model whose agreement is known exactly:
// each layer at each precision costs a fixed amount of cosine, and the engine's cosine is 1 minus
// their sum. The ladder's stages, the smallest set of moves, the number of plans measured and
// every malformed request, without building an engine.
#include "engine/quant/accuracy_guard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace surge::engine::quant {
namespace {

constexpr Precision kFp8 = Precision::kFp8;
constexpr Precision kInt8 = Precision::kInt8;
constexpr Precision kFp16 = Precision::kFp16;

Agreement CosineOf(double cosine) {
  OutputAgreement o;
  o.name = "pooled";
  o.rows = 1;
  o.cosine_sum = cosine;
  o.cosine_min = cosine;
  return {{o}};
}

// `rows` rows whose cosines average `mean` with the mean's standard error `stderr`.
Agreement CosineWithSpread(double mean, double stderr, int64_t rows) {
  OutputAgreement o;
  o.name = "pooled";
  o.rows = rows;
  o.cosine_sum = mean * static_cast<double>(rows);
  o.cosine_min = mean;
  const double n = static_cast<double>(rows), loss_sum = n * (1 - mean);
  o.loss_sq_sum = stderr * stderr * n * (n - 1) + loss_sum * loss_sum / n;
  return {{o}};
}

// Layer i costs cost[i][precision] of cosine; unknown precisions cost nothing (full precision).
struct AdditiveModel {
  std::map<std::string, std::map<Precision, double>> cost;
  int calls = 0;
  std::vector<LayerPrecisions> seen;
  double stderr = 0;  // with rows > 1: every configuration's standard error
  int64_t rows = 1;

  EvaluateFn Fn() {
    return [this](const LayerPrecisions& p) -> Result<Agreement> {
      ++calls;
      seen.push_back(p);
      double loss = 0;
      for (const auto& [name, prec] : p) {
        auto it = cost.at(name).find(prec);
        if (it != cost.at(name).end()) loss += it->second;
      }
      return rows > 1 ? CosineWithSpread(1.0 - loss, stderr, rows) : CosineOf(1.0 - loss);
    };
  }
};

// Eight layers: FP8 costs 4e-4 each except "l3" (4e-3) and "l6" (2e-3); INT8 costs 1e-4 each.
AdditiveModel EightLayers() {
  AdditiveModel m;
  for (int i = 0; i < 8; ++i) {
    const std::string name = "l" + std::to_string(i);
    m.cost[name] = {{kFp8, i == 3 ? 4e-3 : i == 6 ? 2e-3 : 4e-4}, {kInt8, 1e-4}};
  }
  return m;
}

std::vector<std::string> Names(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("l" + std::to_string(i));
  return out;
}

TEST(GuardSearch, BudgetMetWithEveryLayerQuantisedMovesNothingInOnePlan) {
  AdditiveModel m = EightLayers();
  // All FP8: 1 - (6 * 4e-4 + 4e-3 + 2e-3) = 0.9916.
  auto r = SearchFallbacks(Names(8), kFp8, {kInt8, kFp16}, {0.99, 1.0}, m.Fn());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->plans_evaluated, 1);
  EXPECT_EQ(m.calls, 1);
  EXPECT_TRUE(r->stages.empty());
  EXPECT_TRUE(r->fallback.empty());
  for (const auto& [name, p] : r->precision) EXPECT_EQ(p, kFp8) << name;
  EXPECT_NEAR(r->final_agreement.cosine(), 0.9916, 1e-12);
}

TEST(GuardSearch, FirstRungTakesTheFewestMostSensitiveLayers) {
  AdditiveModel m = EightLayers();
  // 0.995 needs loss <= 5e-3 from 8.4e-3: l3 to INT8 saves 3.9e-3 (-> 4.5e-3), enough alone.
  auto r = SearchFallbacks(Names(8), kFp8, {kInt8, kFp16}, {0.995, 1.0}, m.Fn());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->stages.size(), 1u);
  const GuardStage& st = r->stages[0];
  EXPECT_EQ(st.from, kFp8);
  EXPECT_EQ(st.to, kInt8);
  EXPECT_EQ(st.layers, 8);
  ASSERT_EQ(st.effects.size(), 8u);
  EXPECT_EQ(st.effects[0].layer, "l3");
  EXPECT_EQ(st.effects[1].layer, "l6");
  EXPECT_EQ(st.effects[0].rank, 1);
  // Alone: l3 at FP8, the other seven at INT8: loss 4e-3 + 7e-4.
  EXPECT_NEAR(st.effects[0].alone.cosine(), 1 - 4.7e-3, 1e-12);
  EXPECT_EQ(r->fallback, std::vector<std::string>{"l3"});
  EXPECT_EQ(st.moved, r->fallback);
  EXPECT_EQ(r->precision.at("l3"), kInt8);
  EXPECT_EQ(r->precision.at("l6"), kFp8);
  EXPECT_NEAR(r->final_agreement.cosine(), 1 - 4.5e-3, 1e-12);
  EXPECT_NEAR(st.result.cosine(), r->final_agreement.cosine(), 0);
  // all FP8, all INT8, eight alone, top 1: no configuration measured twice.
  EXPECT_EQ(r->plans_evaluated, 11);
  EXPECT_EQ(m.calls, 11);
}

TEST(GuardSearch, SmallestKIsFoundByDoublingAndBisecting) {
  AdditiveModel m = EightLayers();
  // 0.9965 (loss <= 3.5e-3): l3 (-> 4.5e-3), l6 (-> 2.6e-3): two layers, not one, not four.
  auto r = SearchFallbacks(Names(8), kFp8, {kInt8, kFp16}, {0.9965, 1.0}, m.Fn());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->fallback, (std::vector<std::string>{"l3", "l6"}));
  EXPECT_NEAR(r->final_agreement.cosine(), 1 - 2.6e-3, 1e-12);
  // all, all INT8, 8 alone, k = 1, 2.
  EXPECT_EQ(r->plans_evaluated, 12);
}

TEST(GuardSearch, WhenTheFirstRungCannotMeetTheBudgetEveryLayerMovesAndTheNextRungRanks) {
  AdditiveModel m = EightLayers();
  m.cost["l5"][kInt8] = 5e-4;  // the one layer INT8 hurts most
  // 0.99945 (loss <= 5.5e-4): all INT8 is 1.2e-3, so all move to INT8; then l5 to FP16
  // (-> 7e-4) is not enough, l5 + one more (-> 6e-4) neither, l5 + two more (5e-4) is.
  auto r = SearchFallbacks(Names(8), kFp8, {kInt8, kFp16}, {0.99945, 1.0}, m.Fn());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->stages.size(), 2u);
  const GuardStage& first = r->stages[0];
  EXPECT_TRUE(first.effects.empty());
  EXPECT_EQ(first.moved, Names(8));
  EXPECT_NEAR(first.all_moved.cosine(), 1 - 1.2e-3, 1e-12);
  const GuardStage& second = r->stages[1];
  EXPECT_EQ(second.from, kInt8);
  EXPECT_EQ(second.to, kFp16);
  ASSERT_EQ(second.effects.size(), 8u);
  EXPECT_EQ(second.effects[0].layer, "l5");
  ASSERT_EQ(second.moved.size(), 3u);
  EXPECT_EQ(second.moved[0], "l5");
  int fp16 = 0, int8 = 0;
  for (const auto& [name, p] : r->precision) {
    fp16 += p == kFp16;
    int8 += p == kInt8;
    EXPECT_NE(p, kFp8) << name;
  }
  EXPECT_EQ(fp16, 3);
  EXPECT_EQ(int8, 5);
  EXPECT_EQ(r->fallback.size(), 8u);  // every layer left FP8
  EXPECT_NEAR(r->final_agreement.cosine(), 1 - 5e-4, 1e-12);
  // The all-FP16 engine was measured (the second stage's all_moved) and met the budget.
  EXPECT_NEAR(second.all_moved.cosine(), 1.0, 1e-12);
}

TEST(GuardSearch, OneRungLadderIsThePlainFallbackToTheBase) {
  AdditiveModel m = EightLayers();
  auto r = SearchFallbacks(Names(8), kFp8, {kFp16}, {0.9965, 1.0}, m.Fn());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->stages.size(), 1u);
  EXPECT_EQ(r->stages[0].to, kFp16);
  EXPECT_EQ(r->fallback, (std::vector<std::string>{"l3", "l6"}));
  EXPECT_EQ(r->precision.at("l3"), kFp16);
  // FP16 costs nothing here: l3 and l6 out leave 6 * 4e-4.
  EXPECT_NEAR(r->final_agreement.cosine(), 1 - 2.4e-3, 1e-12);
}

TEST(GuardSearch, ABudgetNoRungMeetsIsAnErrorNamingTheLastRung) {
  AdditiveModel m = EightLayers();
  for (auto& [name, c] : m.cost) c[kInt8] = c[kFp16] = 1e-3;  // even all FP16 loses 8e-3
  auto r = SearchFallbacks(Names(8), kFp8, {kInt8, kFp16}, {0.999, 1.0}, m.Fn());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("cannot be met"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("all 8 quantisable layers in fp16"), std::string::npos)
      << r.status().ToString();
}

TEST(GuardSearch, TopOneDropCountsAsMuchAsCosine) {
  // Cosine stays at 1; only "b" flips predictions at FP8 (top-1 10 % of rows).
  int calls = 0;
  EvaluateFn fn = [&](const LayerPrecisions& p) -> Result<Agreement> {
    ++calls;
    OutputAgreement o;
    o.name = "logits";
    o.top1 = true;
    o.rows = 10;
    o.cosine_sum = 10;
    o.top1_agree = p.at("b") == kFp8 ? 9 : 10;
    return Agreement{{o}};
  };
  auto r = SearchFallbacks({"a", "b", "c"}, kFp8, {kInt8, kFp16}, {0.999, 0.05}, fn);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->fallback, std::vector<std::string>{"b"});
  EXPECT_EQ(r->precision.at("b"), kInt8);
}

TEST(GuardSearch, MalformedRequestsAreRefusedBeforeAnyPlan) {
  AdditiveModel m = EightLayers();
  struct Case {
    std::vector<Precision> ladder;
    GuardBudget budget;
    const char* says;
  };
  const Case cases[] = {
      {{}, {0.999, 0.01}, "at least one precision"},
      {{kInt8, kFp8, kFp16}, {0.999, 0.01}, "build's own precision"},
      {{kInt8, kFp16, kInt8}, {0.999, 0.01}, "int8 is named twice"},
      {{kFp16}, {1.5, 0.01}, "min cosine 1.5"},
      {{kFp16}, {0.999, -0.1}, "max top-1 drop -0.1"},
      {{kFp16}, {0.999, 0.01, 1.0}, "confidence 1 must lie in [0.5, 1)"},
      {{kFp16}, {0.999, 0.01, 0.3}, "confidence 0.3 must lie in [0.5, 1)"},
  };
  for (const Case& c : cases) {
    auto r = SearchFallbacks(Names(8), kFp8, c.ladder, c.budget, m.Fn());
    ASSERT_FALSE(r.ok()) << c.says;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().ToString();
  }
  EXPECT_EQ(m.calls, 0);
}

TEST(GuardSearch, AConfidenceLevelBudgetsTheLowerBoundAndMovesMoreLayers) {
  // As FirstRungTakesTheFewestMostSensitiveLayers (0.995: l3 alone reaches 0.9955), but every
  // measurement is the mean of 8 rows with standard error 1e-3 / t(0.95, 7): the 95 % lower bound
  // sits 1e-3 under the mean, so l3 alone (0.9945) no longer does and l6 moves too (0.9964).
  AdditiveModel m = EightLayers();
  m.rows = 8;
  m.stderr = 1e-3 / StudentTQuantile(0.95, 7);
  GuardBudget budget{0.995, 1.0, 0.95};
  auto r = SearchFallbacks(Names(8), kFp8, {kInt8, kFp16}, budget, m.Fn());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->fallback, (std::vector<std::string>{"l3", "l6"}));
  EXPECT_NEAR(r->final_agreement.cosine(), 1 - 2.6e-3, 1e-12);
  EXPECT_NEAR(budget.Cosine(r->final_agreement), 1 - 3.6e-3, 1e-9);
  EXPECT_NE(budget.ToString().find("cosine (95% lower bound) >= 0.995"), std::string::npos)
      << budget.ToString();
  EXPECT_NE(budget.Describe(r->final_agreement).find("95% lower bound 0.996400"), std::string::npos)
      << budget.Describe(r->final_agreement);
  EXPECT_NE(r->ToJson().find("\"confidence\":0.95"), std::string::npos);
  // The same measurements, budgeting the mean: l3 alone.
  budget.confidence = 0;
  auto mean = SearchFallbacks(Names(8), kFp8, {kInt8, kFp16}, budget, m.Fn());
  ASSERT_TRUE(mean.ok());
  EXPECT_EQ(mean->fallback, std::vector<std::string>{"l3"});
}

TEST(GuardSearch, AConfidenceLevelNeedsTwoRowsPerOutput) {
  AdditiveModel m = EightLayers();  // one row per measurement
  auto r = SearchFallbacks(Names(8), kFp8, {kInt8, kFp16}, {0.995, 1.0, 0.95}, m.Fn());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("needs 2 or more held-out rows"), std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(m.calls, 1);
}

TEST(Agreement, StandardErrorAndLowerBoundOfTheMeanRowCosine) {
  // Four rows at known angles: reference (1, 0), candidate (cos a, sin a).
  const double cosines[] = {0.999, 0.998, 0.997, 0.996};
  Tensor ref(DType::kFloat32, {4, 2}), cand(DType::kFloat32, {4, 2});
  for (int r = 0; r < 4; ++r) {
    ref.data_as<float>()[2 * r] = 1;
    ref.data_as<float>()[2 * r + 1] = 0;
    cand.data_as<float>()[2 * r] = static_cast<float>(cosines[r]);
    cand.data_as<float>()[2 * r + 1] = static_cast<float>(std::sqrt(1 - cosines[r] * cosines[r]));
  }
  AgreementMeter meter;
  ASSERT_TRUE(meter.Add({}, {{"pooled", ref}}, {{"pooled", cand}}).ok());
  const Agreement& a = meter.result();
  ASSERT_EQ(a.min_rows(), 4);
  // Mean 0.9975; sample spread sqrt(5e-6 / 3); standard error that over 2.
  EXPECT_NEAR(a.cosine(), 0.9975, 1e-6);  // float inputs
  EXPECT_NEAR(a.cosine_stderr(), std::sqrt(5e-6 / 3) / 2, 1e-6);
  EXPECT_NEAR(a.cosine_lower_bound(0.95), 0.9975 - 2.3534 * std::sqrt(5e-6 / 3) / 2, 1e-6);
  EXPECT_NEAR(a.cosine_lower_bound(0.5), a.cosine(), 1e-12);
  // One row: no spread to estimate, the mean itself.
  AgreementMeter one;
  const Tensor ref1 = Tensor::View(DType::kFloat32, {1, 2}, ref.data());
  const Tensor cand1 = Tensor::View(DType::kFloat32, {1, 2}, cand.data());
  ASSERT_TRUE(one.Add({}, {{"pooled", ref1}}, {{"pooled", cand1}}).ok());
  EXPECT_EQ(one.result().cosine_stderr(), 0);
  EXPECT_NEAR(one.result().cosine_lower_bound(0.95), 0.999, 1e-6);
}

TEST(Agreement, StudentTQuantilesMatchTheTables) {
  const struct {
    double p;
    int64_t dof;
    double t;
  } table[] = {{0.95, 1, 6.3138},  {0.95, 2, 2.9200},  {0.95, 3, 2.3534},   {0.95, 7, 1.8946},
               {0.95, 30, 1.6973}, {0.99, 1, 31.8205}, {0.99, 2, 6.9646},   {0.99, 3, 4.5407},
               {0.99, 10, 2.7638}, {0.9, 7, 1.4149},   {0.975, 60, 2.0003}, {0.95, 0, 1.6449}};
  for (const auto& row : table) {
    EXPECT_NEAR(StudentTQuantile(row.p, row.dof), row.t, 0.004 * row.t)
        << row.p << " with " << row.dof << " degrees of freedom";
  }
  EXPECT_NEAR(StudentTQuantile(0.5, 5), 0, 1e-9);
}

TEST(GuardSearch, AnEvaluationErrorStopsTheSearchWithIt) {
  int calls = 0;
  EvaluateFn fn = [&](const LayerPrecisions&) -> Result<Agreement> {
    if (++calls == 3) return InternalError("the candidate plan failed to run");
    return CosineOf(0.99);
  };
  auto r = SearchFallbacks(Names(4), kFp8, {kInt8, kFp16}, {0.999, 1.0}, fn);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("failed to run"), std::string::npos);
  EXPECT_EQ(calls, 3);
}

TEST(GuardSearch, ResultJsonCarriesTheLadderStagesAndPrecisions) {
  AdditiveModel m = EightLayers();
  auto r = SearchFallbacks(Names(8), kFp8, {kInt8, kFp16}, {0.995, 1.0}, m.Fn());
  ASSERT_TRUE(r.ok());
  const std::string j = r->ToJson();
  for (const char* key :
       {"\"ladder\":[\"int8\",\"fp16\"]", "\"target\":\"fp8\"", "\"from\":\"fp8\"",
        "\"to\":\"int8\"", "\"l3\":\"int8\"", "\"l6\":\"fp8\"", "\"moved\":[\"l3\"]"}) {
    EXPECT_NE(j.find(key), std::string::npos) << key << " in " << j;
  }
  EXPECT_NE(j.find("\"layer\":\"l6\",\"rank\":2"), std::string::npos) << j;
}

}  // namespace
}  // namespace surge::engine::quant
