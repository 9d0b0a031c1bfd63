// The INT8 and BF16 Linear kernels (quant_linear.h) against references, on random shapes and
// values (odd sizes included), with every epilogue.
//
// Two references for INT8:
//  * exact: the same quantisation (per-channel weight scales, round to nearest even, saturation)
//    done in double precision. The kernel's int32 accumulation is exact (VNNI/AMX have no 16-bit
//    saturation), so it must match up to float rounding of the epilogue: 2e-5 relative.
//  * FP32: the unquantised Linear. With rounding errors |dx| <= sx/2 and |dw| <= sw[n]/2, each
//    output is off by at most sum_k (|x_k| sw[n]/2 + |w_kn| sx/2 + sx sw[n]/4) before the
//    activation (no clipping: amax covers the data); GELU is 1.13-Lipschitz (max of its
//    derivative), tanh and the residual add 1-Lipschitz. That bound is checked per element.
// BF16: each operand is rounded to 8 significant bits (relative error <= 2^-9), so an output is
// off by at most sum_k |x_k w_kn| (2^-8 + 2^-18) plus float accumulation (K 2^-24 of the same).
#include "engine/backends/cpu/quant_linear.h"

#include <cmath>

#include "op_harness.h"

namespace surge::engine::cpu {
namespace {

using namespace testing;

double GeluD(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

double Act(Activation a, double v) {
  switch (a) {
    case Activation::kGelu:
      return GeluD(v);
    case Activation::kTanh:
      return std::tanh(v);
    case Activation::kRelu:
      return v > 0 ? v : 0;
    default:
      return v;
  }
}

double Lipschitz(Activation a) { return a == Activation::kGelu ? 1.13 : 1.0; }

struct Case {
  int64_t m, k, n;
  Activation act;
  bool bias, residual;
};

struct Data {
  Tensor x, w, b, r;
  float amax = 0;
};

Data MakeData(Rng& rng, const Case& c) {
  Data d;
  d.x = rng.Floats({c.m, c.k}, 3.0f);
  d.w = rng.Floats({c.k, c.n}, 0.2f);
  d.b = rng.Floats({c.n}, 0.5f);
  d.r = rng.Floats({c.m, c.n}, 1.0f);
  for (float v : d.x.span<float>()) d.amax = std::max(d.amax, std::abs(v));
  return d;
}

QuantLinearSpec Spec(const Case& c, LinearPrecision p, float amax) {
  QuantLinearSpec s;
  s.base.k = c.k;
  s.base.n = c.n;
  s.base.act = c.act;
  s.base.has_bias = c.bias;
  s.base.has_residual = c.residual;
  s.precision = p;
  s.x_scale = p == LinearPrecision::kInt8 ? amax / 127.f : 0.f;
  return s;
}

std::unique_ptr<QuantLinearKernel> MakeKernel(const QuantLinearSpec& spec, const Tensor& w,
                                              int64_t m_opt, PackedQuantWeights* keep) {
  Result<PackedQuantWeights> pw = PackQuantLinearWeights(spec, w.data_as<float>(), m_opt);
  EXPECT_TRUE(pw.ok()) << pw.status().ToString();
  if (!pw.ok()) return nullptr;
  *keep = std::move(pw).value();
  // The kernel wants 64-byte aligned weights, as the plan loader provides.
  static std::vector<AlignedBuffer> buffers;
  buffers.emplace_back(keep->data.size());
  std::memcpy(buffers.back().data(), keep->data.data(), keep->data.size());
  auto k = QuantLinearKernel::Create(spec, keep->desc, buffers.back().data(), keep->data.size(),
                                     keep->w_scales);
  EXPECT_TRUE(k.ok()) << k.status().ToString();
  return k.ok() ? std::move(k).value() : nullptr;
}

// y = act(x w + b) + r in double, with x and w optionally replaced by their quantised values.
std::vector<double> Reference(const Case& c, const Data& d, const std::vector<double>* xq,
                              const std::vector<double>* wq) {
  std::vector<double> y(c.m * c.n);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double xv = xq ? (*xq)[i * c.k + p] : d.x.data_as<float>()[i * c.k + p];
        const double wv = wq ? (*wq)[p * c.n + j] : d.w.data_as<float>()[p * c.n + j];
        acc += xv * wv;
      }
      if (c.bias) acc += d.b.data_as<float>()[j];
      double v = Act(c.act, acc);
      if (c.residual) v += d.r.data_as<float>()[i * c.n + j];
      y[i * c.n + j] = v;
    }
  }
  return y;
}

Status RunKernel(const QuantLinearKernel& k, const Case& c, const Data& d, void* y,
                 const void* x = nullptr, bool x_int8 = false) {
  AlignedBuffer scratch;
  return k.Run(x ? x : d.x.data(), x_int8, c.bias ? d.b.data_as<float>() : nullptr,
               c.residual ? d.r.data_as<float>() : nullptr, y, c.m, &scratch);
}

const std::vector<Case> kCases = {
    {1, 64, 64, Activation::kNone, true, false},    {37, 33, 7, Activation::kGelu, true, false},
    {128, 256, 96, Activation::kNone, true, true},  {5, 5, 1, Activation::kTanh, false, false},
    {64, 768, 192, Activation::kGelu, true, false}, {3, 130, 65, Activation::kRelu, true, true},
    {200, 72, 40, Activation::kNone, false, true},
};

TEST(QuantLinear, PerChannelWeightQuantisation) {
  // Column 0: max 2.54 -> scale 0.02; column 1 all zero -> scale 1; column 2 max 1.27.
  const float w[] = {2.54f, 0.f, -1.27f, -1.0f, 0.f, 0.005f, 0.01f, 0.f, 0.00635f};
  int8_t q[9];
  float s[3];
  QuantizeWeightsPerChannel(w, 3, 3, q, s);
  EXPECT_FLOAT_EQ(s[0], 0.02f);
  EXPECT_FLOAT_EQ(s[1], 1.f);
  EXPECT_FLOAT_EQ(s[2], 0.01f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[3], -50);
  EXPECT_EQ(q[6], 0);  // 0.01 / 0.02 = 0.5 rounds to even
  EXPECT_EQ(q[2], -127);
  EXPECT_EQ(q[5], 0);  // 0.5 -> 0 (even)
  EXPECT_EQ(q[8], 1);  // 0.635 -> 1
  EXPECT_EQ(q[1], 0);
}

TEST(QuantLinear, SevenBitWeightsWithoutVnni) {
  const float w[] = {2.52f, 0.f, -1.26f, -1.0f, 0.f, 0.005f};
  int8_t q[6];
  float s[3];
  QuantizeWeightsPerChannel(w, 2, 3, q, s, 63);
  EXPECT_FLOAT_EQ(s[0], 0.04f);
  EXPECT_FLOAT_EQ(s[2], 0.02f);
  EXPECT_EQ(q[0], 63);
  EXPECT_EQ(q[2], -63);
  EXPECT_EQ(q[3], -25);  // -1.0 / 0.04
  EXPECT_EQ(Int8WeightMax(), CpuHasVnni() ? 127 : 63);
}

TEST(QuantLinear, Int8MatchesExactQuantisedReferenceAndFp32Bound) {
  // Exact on every CPU: without VNNI the weights are 7-bit (Int8WeightMax), so oneDNN's 16-bit
  // pair sums cannot saturate.
  Rng rng(7);
  for (const Case& c : kCases) {
    const std::string what = fmt::format("m={} k={} n={} act={} bias={} res={}", c.m, c.k, c.n,
                                         static_cast<int>(c.act), c.bias, c.residual);
    Data d = MakeData(rng, c);
    QuantLinearSpec spec = Spec(c, LinearPrecision::kInt8, d.amax);
    PackedQuantWeights pw;
    auto k = MakeKernel(spec, d.w, 64, &pw);
    ASSERT_NE(k, nullptr) << what;
    Tensor y(DType::kFloat32, {c.m, c.n});
    Status s = RunKernel(*k, c, d, y.data());
    ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
    // The exact quantised values.
    std::vector<double> xq(c.m * c.k), wq(c.k * c.n);
    std::vector<int8_t> wi(c.k * c.n);
    std::vector<float> ws(c.n);
    QuantizeWeightsPerChannel(d.w.data_as<float>(), c.k, c.n, wi.data(), ws.data(),
                              Int8WeightMax());
    EXPECT_EQ(pw.w_scales, ws) << what;
    for (int64_t i = 0; i < c.k * c.n; ++i) wq[i] = wi[i] * static_cast<double>(ws[i % c.n]);
    for (int64_t i = 0; i < c.m * c.k; ++i) {
      const double q = std::clamp<double>(
          std::nearbyint(d.x.data_as<float>()[i] * (1.f / spec.x_scale)), -128.0, 127.0);
      xq[i] = q * spec.x_scale;
    }
    const std::vector<double> exact = Reference(c, d, &xq, &wq);
    const std::vector<double> fp32 = Reference(c, d, nullptr, nullptr);
    double worst_exact = 0, worst_bound_ratio = 0;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        const double got = y.data_as<float>()[i * c.n + j];
        worst_exact = std::max(worst_exact, std::abs(got - exact[i * c.n + j]) /
                                                std::max(1.0, std::abs(exact[i * c.n + j])));
        double bound = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          bound += std::abs(d.x.data_as<float>()[i * c.k + p]) * ws[j] / 2 +
                   std::abs(d.w.data_as<float>()[p * c.n + j]) * spec.x_scale / 2 +
                   spec.x_scale * ws[j] / 4;
        }
        bound = bound * Lipschitz(c.act) + 1e-5 * std::max(1.0, std::abs(fp32[i * c.n + j]));
        worst_bound_ratio = std::max(worst_bound_ratio, std::abs(got - fp32[i * c.n + j]) / bound);
      }
    }
    EXPECT_LE(worst_exact, 2e-5) << what;
    EXPECT_LE(worst_bound_ratio, 1.0) << what;
    // Quantisation did happen: the result is not the FP32 one.
    EXPECT_GT(worst_bound_ratio, 0.0) << what;
  }
}

TEST(QuantLinear, Int8InputFromARequantisingProducerMatchesFloatInput) {
  Rng rng(9);
  const Case c{19, 40, 24, Activation::kGelu, true, false};
  Data d = MakeData(rng, c);
  QuantLinearSpec spec = Spec(c, LinearPrecision::kInt8, d.amax);
  PackedQuantWeights pw;
  auto k = MakeKernel(spec, d.w, 16, &pw);
  ASSERT_NE(k, nullptr);
  std::vector<int8_t> xi(c.m * c.k);
  for (int64_t i = 0; i < c.m * c.k; ++i) {
    xi[i] = static_cast<int8_t>(
        std::clamp(std::nearbyint(d.x.data_as<float>()[i] * (1.f / spec.x_scale)), -128.f, 127.f));
  }
  Tensor a(DType::kFloat32, {c.m, c.n}), b(DType::kFloat32, {c.m, c.n});
  ASSERT_TRUE(RunKernel(*k, c, d, a.data()).ok());
  ASSERT_TRUE(RunKernel(*k, c, d, b.data(), xi.data(), true).ok());
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data_as<float>()[i], b.data_as<float>()[i]);
}

TEST(QuantLinear, Int8OutputIsRequantisedAtTheConsumerScale) {
  Rng rng(11);
  const Case c{33, 48, 72, Activation::kGelu, true, false};
  Data d = MakeData(rng, c);
  QuantLinearSpec fspec = Spec(c, LinearPrecision::kInt8, d.amax);
  PackedQuantWeights pw;
  auto float_out = MakeKernel(fspec, d.w, 32, &pw);
  Tensor yf(DType::kFloat32, {c.m, c.n});
  ASSERT_TRUE(RunKernel(*float_out, c, d, yf.data()).ok());
  // Requantise at a step that clips the largest outputs, so saturation is exercised too.
  float ymax = 0;
  for (float v : yf.span<float>()) ymax = std::max(ymax, std::abs(v));
  QuantLinearSpec qspec = fspec;
  qspec.y_scale = 0.8f * ymax / 127.f;
  auto int_out = MakeKernel(qspec, d.w, 32, &pw);
  ASSERT_TRUE(int_out->int8_output());
  std::vector<int8_t> yi(c.m * c.n);
  ASSERT_TRUE(RunKernel(*int_out, c, d, yi.data()).ok());
  int saturated = 0;
  for (int64_t i = 0; i < yf.numel(); ++i) {
    const double want =
        std::clamp<double>(std::nearbyint(yf.data_as<float>()[i] / qspec.y_scale), -128.0, 127.0);
    // The float kernel rounds its own result once more than the requantising one: +-1 at ties.
    ASSERT_LE(std::abs(yi[i] - want), 1.0) << "element " << i;
    saturated += std::abs(want) >= 127;
  }
  EXPECT_GT(saturated, 0);
}

TEST(QuantLinear, InputsBeyondTheThresholdSaturate) {
  Rng rng(13);
  const Case c{2, 16, 8, Activation::kNone, false, false};
  Data d = MakeData(rng, c);
  QuantLinearSpec spec = Spec(c, LinearPrecision::kInt8, 1.0f);  // amax 1, data up to 3
  PackedQuantWeights pw;
  auto k = MakeKernel(spec, d.w, 2, &pw);
  Data clipped = d;
  clipped.x = d.x.Clone();
  // Saturation is to the int8 range [-128, 127] steps (as TensorRT's quantise does).
  for (float& v : clipped.x.span<float>()) v = std::clamp(v, -128.f / 127.f, 1.f);
  Tensor a(DType::kFloat32, {c.m, c.n}), b(DType::kFloat32, {c.m, c.n});
  ASSERT_TRUE(RunKernel(*k, c, d, a.data()).ok());
  ASSERT_TRUE(RunKernel(*k, c, clipped, b.data()).ok());
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(a.data_as<float>()[i], b.data_as<float>()[i]);
}

TEST(QuantLinear, Bf16WithinRoundingBound) {
  if (!CpuHasBf16()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  Rng rng(17);
  for (const Case& c : kCases) {
    const std::string what = fmt::format("bf16 m={} k={} n={}", c.m, c.k, c.n);
    Data d = MakeData(rng, c);
    QuantLinearSpec spec = Spec(c, LinearPrecision::kBf16, 0);
    PackedQuantWeights pw;
    auto k = MakeKernel(spec, d.w, 64, &pw);
    ASSERT_NE(k, nullptr) << what;
    EXPECT_TRUE(pw.w_scales.empty());
    Tensor y(DType::kFloat32, {c.m, c.n});
    ASSERT_TRUE(RunKernel(*k, c, d, y.data()).ok()) << what;
    const std::vector<double> fp32 = Reference(c, d, nullptr, nullptr);
    double worst = 0;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double mag = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          mag += std::abs(d.x.data_as<float>()[i * c.k + p] * d.w.data_as<float>()[p * c.n + j]);
        }
        const double bound =
            Lipschitz(c.act) * mag *
                (std::ldexp(1.0, -8) + std::ldexp(1.0, -18) + c.k * std::ldexp(1.0, -24)) +
            1e-5 * std::max(1.0, std::abs(fp32[i * c.n + j]));
        worst =
            std::max(worst, std::abs(y.data_as<float>()[i * c.n + j] - fp32[i * c.n + j]) / bound);
      }
    }
    EXPECT_LE(worst, 1.0) << what;
    EXPECT_GT(worst, 0.0) << what;
  }
}

TEST(QuantLinear, RejectsBadSpecsAndWeights) {
  Case c{4, 8, 4, Activation::kNone, true, false};
  Rng rng(19);
  Data d = MakeData(rng, c);
  QuantLinearSpec spec = Spec(c, LinearPrecision::kInt8, 0.f);
  auto pw = PackQuantLinearWeights(spec, d.w.data_as<float>(), 4);
  ASSERT_FALSE(pw.ok());
  EXPECT_NE(pw.status().message().find("input scale"), std::string::npos) << pw.status().ToString();
  spec.x_scale = 0.1f;
  auto good = PackQuantLinearWeights(spec, d.w.data_as<float>(), 4);
  ASSERT_TRUE(good.ok());
  AlignedBuffer buf(good->data.size());
  std::memcpy(buf.data(), good->data.data(), good->data.size());
  auto few = QuantLinearKernel::Create(spec, good->desc, buf.data(), buf.size(), {1.f, 1.f});
  ASSERT_FALSE(few.ok());
  EXPECT_NE(few.status().message().find("2 weight scales for N=4"), std::string::npos);
  auto size =
      QuantLinearKernel::Create(spec, good->desc, buf.data(), buf.size() - 1, good->w_scales);
  ASSERT_FALSE(size.ok());
  EXPECT_NE(size.status().message().find("bytes stored"), std::string::npos);
  std::vector<float> bad = good->w_scales;
  bad[2] = std::nanf("");
  auto nan = QuantLinearKernel::Create(spec, good->desc, buf.data(), buf.size(), bad);
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("not a positive number"), std::string::npos);
}

}  // namespace
}  // namespace surge::engine::cpu
