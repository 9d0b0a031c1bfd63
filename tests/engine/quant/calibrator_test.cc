// Calibrator maths: the |x| histogram (exact range doubling), KL divergence, and the minmax,
// percentile and entropy thresholds on distributions whose answer is known.
#include "engine/quant/calibrator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace surge::engine::quant {
namespace {

std::vector<float> Uniform(std::mt19937& g, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

TEST(AbsHistogram, DoublingTheRangeIsExact) {
  std::mt19937 g(1);
  AbsHistogram h(64);
  std::vector<float> all;
  // Growing maxima force several doublings; signs do not matter.
  for (float hi : {1.0f, 1.5f, 3.9f, 3.0f, 17.0f}) {
    std::vector<float> v = Uniform(g, 5000, -hi, hi);
    h.Add(v);
    all.insert(all.end(), v.begin(), v.end());
  }
  ASSERT_GT(h.range(), 17.0);
  float max_abs = 0;
  std::vector<uint64_t> direct(64, 0);
  for (float v : all) {
    max_abs = std::max(max_abs, std::abs(v));
    direct[std::min(63, static_cast<int>(std::abs(v) * (64 / h.range())))]++;
  }
  EXPECT_EQ(h.counts(), direct);
  EXPECT_EQ(h.total(), all.size());
  EXPECT_EQ(h.max_abs(), max_abs);
  // The range is the first batch's maximum (plus a 2^-16 margin) times a power of two.
  float first_max = 0;
  for (size_t i = 0; i < 5000; ++i) first_max = std::max(first_max, std::abs(all[i]));
  const double doublings = std::log2(h.range() / (first_max * (1 + 1.0 / 65536)));
  EXPECT_NEAR(doublings, std::round(doublings), 1e-9);
  EXPECT_EQ(std::round(doublings), 5);  // 1 -> 17: five doublings
}

TEST(AbsHistogram, CountsNonFiniteApartAndRebuildsFromParts) {
  AbsHistogram h(8);
  const float v[] = {0.f, 1.f, -2.f, NAN, INFINITY, 0.5f};
  h.Add(v);
  EXPECT_EQ(h.total(), 4u);
  EXPECT_EQ(h.non_finite(), 2u);
  EXPECT_EQ(h.max_abs(), 2.f);
  auto back = AbsHistogram::FromParts(h.range(), h.counts(), h.max_abs(), h.non_finite());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->counts(), h.counts());
  EXPECT_EQ(back->total(), h.total());
  EXPECT_FALSE(AbsHistogram::FromParts(1.0, {1, 2, 3}, 0.5f, 0).ok());  // odd bin count
  EXPECT_FALSE(AbsHistogram::FromParts(1.0, {1, 2}, 5.0f, 0).ok());     // max beyond range
  EXPECT_FALSE(AbsHistogram::FromParts(NAN, {1, 2}, 0.5f, 0).ok());     // no range
  EXPECT_FALSE(AbsHistogram::FromParts(0.0, {1, 2}, 0.0f, 0).ok());     // counts without range
}

TEST(Calibrator, KlDivergenceOfKnownDistributions) {
  const double p[] = {0.5, 0.5}, q[] = {0.25, 0.75};
  EXPECT_NEAR(KlDivergence(p, q), 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0), 1e-12);
  const double p2[] = {1, 1}, q2[] = {1, 3};  // normalised first
  EXPECT_NEAR(KlDivergence(p2, q2), KlDivergence(p, q), 1e-12);
  EXPECT_EQ(KlDivergence(p, p), 0.0);
  const double z[] = {1, 0};
  EXPECT_TRUE(std::isinf(KlDivergence(p, z)));
  EXPECT_EQ(KlDivergence(z, p), std::log(2.0));  // bins with p = 0 add nothing
}

TEST(Calibrator, MinMaxAndPercentileOnUniform) {
  std::mt19937 g(2);
  AbsHistogram h;
  h.Add(Uniform(g, 1000000, -1.f, 1.f));
  const double w = h.bin_width();
  EXPECT_FLOAT_EQ(MinMaxThreshold(h), h.max_abs());
  EXPECT_NEAR(PercentileThreshold(h, 50), 0.5, 2 * w + 0.003);
  EXPECT_NEAR(PercentileThreshold(h, 99), 0.99, 2 * w + 0.001);
  EXPECT_LE(PercentileThreshold(h, 100), h.max_abs());
  EXPECT_NEAR(PercentileThreshold(h, 100), h.max_abs(), w);
}

TEST(Calibrator, EntropyKeepsTheWholeRangeOfAUniformDistribution) {
  std::mt19937 g(3);
  AbsHistogram h;
  h.Add(Uniform(g, 1000000, -1.f, 1.f));
  // Clipping a distribution without outliers only loses information.
  EXPECT_GE(EntropyThreshold(h), 0.95f * h.max_abs());
}

TEST(Calibrator, EntropyAndPercentileClipRareOutliersMinMaxDoesNot) {
  std::mt19937 g(4);
  AbsHistogram h;
  std::vector<float> v = Uniform(g, 1000000, -1.f, 1.f);
  for (int i = 0; i < 20; ++i) v.push_back(i % 2 ? 100.f : -100.f);
  h.Add(v);
  EXPECT_FLOAT_EQ(MinMaxThreshold(h), 100.f);
  // Entropy cannot cut below 128 bins (1/16 of the range with 2048 bins); here the whole bulk
  // lies in the first 21 bins, so it clips the outliers at 100 but stops above the bulk.
  const float e = EntropyThreshold(h);
  EXPECT_GE(e, 1.0f);
  EXPECT_LE(e, 100.f / 8);
  EXPECT_GE(e, 128 * h.bin_width() * 0.999);
  // Percentile has no such floor.
  const float p = PercentileThreshold(h, 99.99);
  EXPECT_GE(p, 0.98f);
  EXPECT_LE(p, 1.0f + h.bin_width());
}

TEST(Calibrator, EntropyCutsHeavyTailsInsideTheMaximum) {
  std::mt19937 g(5);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::exponential_distribution<float> expo(1.f);
  std::vector<float> gauss(2000000), laplace(2000000);
  for (float& x : gauss) x = normal(g);
  for (size_t i = 0; i < laplace.size(); ++i) laplace[i] = (i % 2 ? 1 : -1) * expo(g);
  AbsHistogram hg, hl;
  hg.Add(gauss);
  hl.Add(laplace);
  // Max of 2e6 normals is about 5 sigma: the cut lies beyond the bulk but inside the maximum.
  const float tg = EntropyThreshold(hg);
  EXPECT_GT(tg, 3.0f);
  EXPECT_LT(tg, hg.max_abs());
  // Laplace (b = 1): the maximum is about ln(2e6) = 14.5 b; the rare far tail is clipped harder.
  const float tl = EntropyThreshold(hl);
  EXPECT_GT(tl, 4.0f);
  EXPECT_LT(tl, 0.8f * hl.max_abs());
}

TEST(Calibrator, EntropyThresholdIsTheArgminOfTheDivergences) {
  std::mt19937 g(6);
  std::exponential_distribution<float> d(3.f);
  std::vector<float> v(300000);
  for (float& x : v) x = d(g);
  AbsHistogram h;
  h.Add(v);
  const std::vector<double> div = EntropyDivergences(h);
  ASSERT_EQ(div.size(), static_cast<size_t>(h.bins() - 128 + 1));
  const size_t best = std::min_element(div.begin(), div.end()) - div.begin();
  EXPECT_FLOAT_EQ(EntropyThreshold(h), std::min<float>((128 + best) * h.bin_width(), h.max_abs()));
  // Cutting at the first candidate folds most of the tail into one bin: much worse than the best.
  EXPECT_GT(div.front(), div[best] * 2);
}

TEST(Calibrator, ThresholdDispatchAndErrors) {
  AbsHistogram empty;
  auto e = Threshold(empty, {});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no finite values"), std::string::npos);
  AbsHistogram zeros;
  const float z[] = {0.f, 0.f, -0.f};
  zeros.Add(z);
  auto ez = Threshold(zeros, {CalibratorKind::kMinMax, 0});
  ASSERT_FALSE(ez.ok());
  EXPECT_NE(ez.status().message().find("zero"), std::string::npos);

  std::mt19937 g(7);
  AbsHistogram h;
  h.Add(Uniform(g, 10000, -2.f, 2.f));
  EXPECT_EQ(*Threshold(h, *ParseCalibrator("minmax")), h.max_abs());
  EXPECT_EQ(*Threshold(h, *ParseCalibrator("percentile", 99.0)), PercentileThreshold(h, 99.0));
  EXPECT_EQ(*Threshold(h, *ParseCalibrator("entropy")), EntropyThreshold(h));
  EXPECT_EQ(CalibratorName(*ParseCalibrator("percentile", 99.9)), "percentile 99.9");
  auto bad = ParseCalibrator("kl");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("valid: entropy, percentile, minmax"), std::string::npos);
  EXPECT_FALSE(ParseCalibrator("percentile", 0).ok());
  EXPECT_FALSE(ParseCalibrator("percentile", 100.5).ok());
}

}  // namespace
}  // namespace surge::engine::quant
