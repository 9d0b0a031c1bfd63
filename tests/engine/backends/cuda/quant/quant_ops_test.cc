// The CUDA backend's quantised Linear pieces on the GPU (each test skips without one): the
// quantise kernel against the host conversion (bit-exact), and the whole quantised Linear
// (quantise, cuBLASLt INT8/FP8 GEMM in each epilogue mode cuBLASLt offers, chosen by running it
// as an engine load does, epilogue; large shapes check every 8th row) against
//  * the exact-quantised reference: the same quantised operands multiplied in double;
//    INT8 accumulates exactly, FP8 with Hopper's reduced-precision accumulation (allowed:
//    2^-12 of sum |xq wq|); outputs are FP16 (2^-9 of the magnitude covers two roundings); a
//    fused GELU epilogue is the tanh form, so that reference uses it too;
//  * the FP32 CPU reference (ir::EvalNode of the surge::Linear node): cosine >= 0.999 and a
//    per-element bound from the rounding of both operands (INT8: |x| sw/2 + |w| sx/2 + sx sw/4
//    per product; FP8: 2^-4 relative per operand, 3 mantissa bits, plus the subnormal spacing
//    2^-9 of each scale), times 1.13 after GELU (its largest slope), plus 5e-4 when the GELU is
//    the tanh form.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>
#include <utility>

#include "engine/backends/cuda/attention_kernels.h"
#include "engine/backends/cuda/cuda_backend.h"
#include "engine/backends/cuda/layer_norm_kernels.h"
#include "engine/backends/cuda/qgemm_kernels.h"
#include "engine/backends/cuda/quant_linear.h"
#include "engine/ir/eval.h"

namespace surge::engine::cuda {
namespace {

#define SKIP_WITHOUT_GPU()                                                  \
  do {                                                                      \
    Status gpu = CudaDeviceAvailable();                                     \
    if (!gpu.ok()) GTEST_SKIP() << "needs an sm_90 GPU: " << gpu.message(); \
  } while (0)

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(bytes, 16)), cudaSuccess);
  }
  ~Dev() { cudaFree(p); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

std::vector<uint16_t> ToHalf(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = FloatToHalfHost(v[i]);
  return h;
}

// Values as the device sees them: rounded to FP16.
std::vector<float> RoundHalf(std::vector<float> v) {
  for (float& x : v) x = HalfToFloatHost(FloatToHalfHost(x));
  return v;
}

std::vector<float> Uniform(std::mt19937& g, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

double GeluErfD(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double GeluTanhD(double x) {
  return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
double Act(Activation a, double v, bool tanh_gelu) {
  switch (a) {
    case Activation::kGelu:
      return tanh_gelu ? GeluTanhD(v) : GeluErfD(v);
    case Activation::kGeluTanh:
      return GeluTanhD(v);
    case Activation::kTanh:
      return std::tanh(v);
    case Activation::kRelu:
      return v > 0 ? v : 0;
    case Activation::kNone:
      break;
  }
  return v;
}

TEST(QuantKernels, QuantizeMatchesTheHostConversionBitForBit) {
  SKIP_WITHOUT_GPU();
  std::mt19937 g(1);
  for (int64_t n : {1, 7, 8, 1000, 4099}) {
    // Values beyond the saturation point too.
    std::vector<float> x = RoundHalf(Uniform(g, n, -600.f, 600.f));
    const std::vector<uint16_t> xh = ToHalf(x);
    Dev dx(n * 2), dy(n);
    ASSERT_EQ(cudaMemcpy(dx.p, xh.data(), n * 2, cudaMemcpyHostToDevice), cudaSuccess);
    for (QuantType t : {QuantType::kInt8, QuantType::kFp8E4M3}) {
      const float inv = t == QuantType::kInt8 ? 127.f / 400.f : 448.f / 300.f;
      QuantizeArgs a{t, n, dx.p, inv, dy.p};
      ASSERT_TRUE(QuantizeCanImplement(a));
      ASSERT_EQ(QuantizeRun(a, nullptr, nullptr), cudaSuccess);
      std::vector<uint8_t> got(n);
      ASSERT_EQ(cudaMemcpy(got.data(), dy.p, n, cudaMemcpyDeviceToHost), cudaSuccess);
      for (int64_t i = 0; i < n; ++i) {
        uint8_t want;
        const float v = x[i] * inv;
        if (t == QuantType::kInt8) {
          want = static_cast<uint8_t>(
              static_cast<int8_t>(std::clamp(std::nearbyint(v), -128.f, 127.f)));
        } else {
          FloatToE4m3Host(&v, &want, 1);
        }
        ASSERT_EQ(got[i], want) << "n=" << n << " i=" << i << " x=" << x[i];
      }
    }
  }
}

TEST(QuantKernels, HostE4m3RoundTripIsTheFormat) {
  // Host-only: e4m3 keeps 3 mantissa bits and saturates at 448.
  const float in[] = {0.f, 1.f, 1.0625f, 1.125f, 448.f, 1000.f, -3.3f, 0.001953125f};
  uint8_t q[8];
  FloatToE4m3Host(in, q, 8);
  EXPECT_EQ(E4m3ToFloatHost(q[0]), 0.f);
  EXPECT_EQ(E4m3ToFloatHost(q[1]), 1.f);
  EXPECT_EQ(E4m3ToFloatHost(q[2]), 1.f);  // halfway to 1.125 rounds to even
  EXPECT_EQ(E4m3ToFloatHost(q[3]), 1.125f);
  EXPECT_EQ(E4m3ToFloatHost(q[4]), 448.f);
  EXPECT_EQ(E4m3ToFloatHost(q[5]), 448.f);  // saturates
  EXPECT_EQ(E4m3ToFloatHost(q[6]), -3.25f);
  EXPECT_EQ(E4m3ToFloatHost(q[7]), 0.001953125f);  // 2^-9, the smallest subnormal
}

// The quantised copy a LayerNorm or Attention writes for the quantised GEMM after it is the
// quantise kernel applied to the FP16 output it stores, bit for bit (so fusing changes nothing).
std::vector<uint8_t> QuantizeOnDevice(const void* x, int64_t n, QuantType t, float inv) {
  Dev dq(n);
  QuantizeArgs a{t, n, x, inv, dq.p};
  EXPECT_TRUE(QuantizeCanImplement(a));
  EXPECT_EQ(QuantizeRun(a, nullptr, nullptr), cudaSuccess);
  std::vector<uint8_t> out(n);
  EXPECT_EQ(cudaMemcpy(out.data(), dq.p, n, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

std::vector<uint8_t> Bytes(const void* p, int64_t n) {
  std::vector<uint8_t> out(n);
  EXPECT_EQ(cudaMemcpy(out.data(), p, n, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

TEST(QuantKernels, LayerNormAndAttentionQuantisedCopiesEqualTheQuantisePass) {
  SKIP_WITHOUT_GPU();
  std::mt19937 g(5);
  for (QuantType t : {QuantType::kInt8, QuantType::kFp8E4M3}) {
    const float inv = t == QuantType::kInt8 ? 127.f / 3.f : 448.f / 3.f;
    // 768 columns take the warp kernels (37 rows one row per warp, 20011 rows the strided one
    // that holds gamma and beta in shared memory), 100 the scalar one; with and without a skip
    // input.
    for (auto [cols, rows] : {std::pair<int, int64_t>{768, 37}, {768, 20011}, {100, 37}}) {
      for (bool skip : {false, true}) {
        const int64_t n = rows * cols;
        const auto x = ToHalf(Uniform(g, n, -4.f, 4.f)), s = ToHalf(Uniform(g, n, -1.f, 1.f));
        const auto gamma = Uniform(g, cols, 0.5f, 1.5f), beta = Uniform(g, cols, -0.2f, 0.2f);
        Dev dx(n * 2), ds(n * 2), dg(cols * 4), db(cols * 4), dy(n * 2), dq(n);
        cudaMemcpy(dx.p, x.data(), n * 2, cudaMemcpyHostToDevice);
        cudaMemcpy(ds.p, s.data(), n * 2, cudaMemcpyHostToDevice);
        cudaMemcpy(dg.p, gamma.data(), cols * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(db.p, beta.data(), cols * 4, cudaMemcpyHostToDevice);
        LayerNormArgs a;
        a.rows = rows;
        a.cols = cols;
        a.x = dx.p;
        a.skip = skip ? ds.p : nullptr;
        a.gamma = dg.as<float>();
        a.beta = db.as<float>();
        a.y = dy.p;
        a.q = {t, dq.p, inv};
        ASSERT_TRUE(LayerNormCanImplement(a));
        ASSERT_EQ(LayerNormRun(a, nullptr, nullptr), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_EQ(Bytes(dq.p, n), QuantizeOnDevice(dy.p, n, t, inv))
            << "layer norm, cols " << cols << " rows " << rows << " skip " << skip;
      }
    }
    // Attention, packed: three sequences of 5, 70 and 1 tokens, 2 heads of 64.
    const int heads = 2, d = 64, hidden = heads * d;
    const std::vector<int32_t> cu = {0, 5, 75, 76};
    const int64_t tokens = cu.back();
    const auto qkv = ToHalf(Uniform(g, tokens * 3 * hidden, -2.f, 2.f));
    Dev dqkv(qkv.size() * 2), dcu(cu.size() * 4), dout(tokens * hidden * 2), dq(tokens * hidden),
        dq2(tokens * hidden);
    cudaMemcpy(dqkv.p, qkv.data(), qkv.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dcu.p, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice);
    AttentionArgs a;
    a.batch = 3;
    a.seq = 70;
    a.num_heads = heads;
    a.head_dim = d;
    a.scale = 0.125f;
    a.cu_seqlens = dcu.as<int32_t>();
    a.qkv = dqkv.p;
    a.out = dout.p;
    a.q = {t, dq.p, inv};
    ASSERT_TRUE(AttentionCanImplement(a));
    ASSERT_EQ(AttentionRun(a, nullptr, nullptr), cudaSuccess);
    // Without the FP16 output: the same bytes.
    a.out = nullptr;
    a.q.y = dq2.p;
    ASSERT_TRUE(AttentionCanImplement(a));
    ASSERT_EQ(AttentionRun(a, nullptr, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto want = QuantizeOnDevice(dout.p, tokens * hidden, t, inv);
    EXPECT_EQ(Bytes(dq.p, tokens * hidden), want) << "attention";
    EXPECT_EQ(Bytes(dq2.p, tokens * hidden), want) << "attention without the fp16 output";
    a.q.y = nullptr;
    EXPECT_FALSE(AttentionCanImplement(a)) << "neither output";
  }
}

struct OpCase {
  QuantType type;
  int64_t m, n, k;
  Activation act;
  bool bias, residual;
  QuantGemmMode first;
  bool fp8_out = false;  // e4m3 output for a next FP8 layer (QuantGemmDesc::fp8_out)
  // The own GEMM (qgemm_kernels.h) in this tile configuration instead of cuBLASLt's (-1:
  // cuBLASLt) where it takes the case; INT8: the next INT8 layer's input as output
  // (QuantLinearOp::int8_out).
  int own_tile = -1;
  bool int8_out = false;
};

std::string Name(const OpCase& c) {
  return fmt::format(
      "{} m={} n={} k={} act={} bias={} res={} first={}{}{}{}",
      c.type == QuantType::kInt8 ? "int8" : "fp8", c.m, c.n, c.k, static_cast<int>(c.act), c.bias,
      c.residual, QuantGemmModeName(c.first), c.fp8_out ? " e4m3 out" : "",
      c.int8_out ? " int8 out" : "",
      c.own_tile >= 0 ? fmt::format(" own gemm {}", QGemmTileName(c.own_tile)) : std::string());
}

void CheckLinear(const OpCase& c, uint32_t seed) {
  const std::string what = Name(c);
  std::mt19937 g(seed);
  const std::vector<float> x = RoundHalf(Uniform(g, c.m * c.k, -2.f, 2.f));
  const std::vector<float> w = Uniform(g, c.k * c.n, -0.1f, 0.1f);
  const std::vector<float> bias = RoundHalf(Uniform(g, c.n, -0.5f, 0.5f));
  const std::vector<float> res = RoundHalf(Uniform(g, c.m * c.n, -1.f, 1.f));
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::abs(v));
  const bool int8 = c.type == QuantType::kInt8;
  const float sx = amax / (int8 ? 127.f : 448.f);

  Tensor wt(DType::kFloat32, {c.k, c.n});
  std::copy(w.begin(), w.end(), wt.data_as<float>());
  QuantLinearOp op;
  op.op = 0;
  op.node = "test";
  op.type = c.type;
  op.k = c.k;
  op.n = c.n;
  op.bias = c.bias;
  op.residual = c.residual;
  op.activation = c.act;
  op.x_scale = sx;
  QuantizeLinearWeight(wt, c.type, &op.weight, &op.w_scales);
  // The e4m3 output's step: that of a next layer calibrated on outputs up to about 3.
  const float out_step = 3.f / 448.f;
  if (c.fp8_out) {
    op.fp8_out = true;
    op.out_inv_scale = 1.f / out_step;
    op.out_slot = 1;
  }
  const bool q_out = c.fp8_out || c.int8_out;
  const float out_step8 = 3.f / 127.f;  // int8_out: the next layer's step
  if (c.int8_out) {
    op.int8_out = true;
    op.out_inv_scale = 1.f / out_step8;
    op.out_slot = 1;
  }
  if (c.own_tile >= 0) op.own[RowBucket(c.m)] = {c.own_tile, 0.f};

  cublasLtHandle_t lt = nullptr;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  constexpr size_t kWs = 32u << 20;
  {
    // How the layer runs is chosen as an engine load chooses it: by running the GEMM.
    QuantProbeBuffers probe;
    ASSERT_TRUE(probe.Allocate(c.m, c.n, c.k, kWs).ok()) << what;
    const int64_t counts[] = {c.m};
    Status chosen = ChooseQuantGemm(lt, probe, counts, c.first, &op);
    if (!chosen.ok()) {
      cublasLtDestroy(lt);
      // Starting from the first mode, some form must run; a later starting mode (or an e4m3
      // output, which the engine then replaces by FP16 and a quantise pass) cuBLASLt does not
      // offer for this case is only logged.
      ASSERT_TRUE(c.first != QuantGemmMode::kFusedEpilogue || c.fp8_out)
          << what << ": " << chosen.ToString();
      std::printf("%s: not offered (%s)\n", what.c_str(), chosen.message().c_str());
      return;
    }
  }
  std::printf("%s: mode %s%s%s\n", what.c_str(), std::string(QuantGemmModeName(op.mode)).c_str(),
              int8 ? "" : (op.scale_in_alpha ? ", scales as alpha" : ", scale pointers"),
              op.pad_rows ? ", rows padded to 16" : "");

  const std::vector<float> scales = QuantScaleFloats(op);
  Dev dw(op.weight.size()), ds(scales.size() * 4), dx(c.m * c.k * 2), db(c.n * 2),
      dr(c.m * c.n * 2), dy(c.m * c.n * 2), ws(kWs);
  const auto xh = ToHalf(x), bh = ToHalf(bias), rh = ToHalf(res);
  cudaMemcpy(dw.p, op.weight.data(), op.weight.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(ds.p, scales.data(), scales.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dx.p, xh.data(), xh.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(db.p, bh.data(), bh.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dr.p, rh.data(), rh.size() * 2, cudaMemcpyHostToDevice);
  op.w_dev = dw.p;
  op.scales_dev = ds.as<float>();
  QuantLinearRunner runner;
  ASSERT_TRUE(runner.Init(QuantLinears::ScratchFor(op, c.m)).ok());
  Status st = runner.Run(op, lt, c.m, dx.p, c.bias ? db.p : nullptr, c.residual ? dr.p : nullptr,
                         dy.p, ws.p, kWs, nullptr);
  ASSERT_TRUE(st.ok()) << what << ": " << st.ToString();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  std::vector<uint16_t> yh(c.m * c.n);
  cudaMemcpy(yh.data(), dy.p, yh.size() * 2, cudaMemcpyDeviceToHost);
  std::vector<uint8_t> y8;
  if (q_out) y8 = Bytes(runner.Slot(1), c.m * c.n);
  // Whether the own GEMM ran (it cannot take every epilogue; the others run cuBLASLt).
  QGemmArgs own_args = OwnGemmArgs(op, c.m, dw.p, ds.as<float>(), runner.Slot(0),
                                   c.bias ? db.p : nullptr, c.residual ? dr.p : nullptr, dy.p);
  own_args.q_out = q_out;
  own_args.tile = std::max(c.own_tile, 0);
  const bool own = c.own_tile >= 0 && QGemmCanImplement(own_args);
  if (own) std::printf("  ran the own int8 GEMM\n");
  cublasLtDestroy(lt);

  // The rows checked: all of them, or on large shapes every 8th and the last (rows are
  // independent; the host references are O(rows n k) in double).
  std::vector<int64_t> rows;
  const int64_t stride = c.m * c.n * c.k > (int64_t{1} << 27) ? 8 : 1;
  for (int64_t i = 0; i < c.m; i += stride) rows.push_back(i);
  if (rows.back() != c.m - 1) rows.push_back(c.m - 1);
  const int64_t nr = static_cast<int64_t>(rows.size());

  // Dequantised operands.
  std::vector<double> xq(nr * c.k), wq(c.k * c.n);
  for (int64_t r = 0; r < nr; ++r) {
    for (int64_t p = 0; p < c.k; ++p) {
      const float v = x[rows[r] * c.k + p] * (1.f / sx);
      if (int8) {
        xq[r * c.k + p] = std::clamp(std::nearbyint(v), -128.f, 127.f) * static_cast<double>(sx);
      } else {
        uint8_t q;
        FloatToE4m3Host(&v, &q, 1);
        xq[r * c.k + p] = E4m3ToFloatHost(q) * static_cast<double>(sx);
      }
    }
  }
  for (int64_t j = 0; j < c.n; ++j) {
    for (int64_t i = 0; i < c.k; ++i) {
      const uint8_t q = op.weight[j * c.k + i];
      wq[i * c.n + j] = int8 ? static_cast<int8_t>(q) * static_cast<double>(op.w_scales[j])
                             : E4m3ToFloatHost(q) * static_cast<double>(op.w_scales[0]);
    }
  }
  // The CPU reference of the FP32 Linear on the checked rows.
  ir::Node node;
  node.op_type = "Linear";
  node.domain = std::string(ir::kSurgeDomain);
  node.name = "ref";
  const char* act_name[] = {"none", "gelu", "gelu_tanh", "tanh", "relu"};
  node.attrs["activation"] = std::string(act_name[static_cast<int>(c.act)]);
  Tensor xt(DType::kFloat32, {nr, c.k}), bt(DType::kFloat32, {c.n}), rt(DType::kFloat32, {nr, c.n});
  for (int64_t r = 0; r < nr; ++r) {
    std::copy_n(x.begin() + rows[r] * c.k, c.k, xt.data_as<float>() + r * c.k);
    std::copy_n(res.begin() + rows[r] * c.n, c.n, rt.data_as<float>() + r * c.n);
  }
  std::copy(bias.begin(), bias.end(), bt.data_as<float>());
  std::vector<Tensor> ins = {xt, wt, c.bias ? bt : Tensor()};
  node.inputs = {0, 1, c.bias ? 2 : -1};
  if (c.residual) {
    ins.push_back(rt);
    node.inputs.push_back(3);
  }
  std::vector<Tensor> ref_out;
  ASSERT_TRUE(ir::EvalNode(node, ins, &ref_out).ok());
  const float* ref32 = ref_out[0].data_as<float>();

  const bool tanh_gelu =
      (own || op.mode == QuantGemmMode::kFusedEpilogue) && c.act == Activation::kGelu;
  const double lip = (c.act == Activation::kGelu || c.act == Activation::kGeluTanh) ? 1.13 : 1.0;
  // The checked rows in parallel blocks (the GPU machine has the cores; the sums are per block,
  // added in block order).
  struct Tally {
    double worst_exact = 0, worst_bound = 0, dot = 0, na = 0, nb = 0;
    int64_t saturated = 0, nonfinite = 0;
  };
  const int64_t blocks = std::min<int64_t>(nr, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<Tally> tallies(blocks);
  auto check_rows = [&](int64_t r0, int64_t r1, Tally& t) {
    auto& [worst_exact, worst_bound, dot, na, nb, saturated, nonfinite] = t;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = rows[r];
      for (int64_t j = 0; j < c.n; ++j) {
        double acc = 0, mag = 0, qbound = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          acc += xq[r * c.k + p] * wq[p * c.n + j];
          mag += std::abs(xq[r * c.k + p] * wq[p * c.n + j]);
          const double ax = std::abs(x[i * c.k + p]), aw = std::abs(w[p * c.n + j]);
          if (int8) {
            qbound += ax * op.w_scales[j] / 2 + aw * sx / 2 + sx * op.w_scales[j] / 4;
          } else {
            qbound += ax * aw * (0.0625 + 0.0625 + 0.004) + (aw * sx + ax * op.w_scales[0]) / 1024;
          }
        }
        const double pre = acc + (c.bias ? bias[j] : 0.0);
        double want = Act(c.act, pre, tanh_gelu) + (c.residual ? res[i * c.n + j] : 0.0);
        double ref = ref32[r * c.n + j];
        // An e4m3 output is the value at the next layer's step, saturating at 448 steps (never
        // NaN): 2^-4 relative rounding plus the subnormal spacing 2^-9 of the step.
        if (c.fp8_out) {
          const double sat = 448.0 * out_step;
          saturated += std::abs(want) > sat;
          want = std::clamp(want, -sat, sat);
          ref = std::clamp(ref, -sat, sat);
        }
        // An int8 output: the value in steps of the next layer, saturating at -128 .. 127 steps.
        if (c.int8_out) {
          const double lo = -128.0 * out_step8, hi = 127.0 * out_step8;
          saturated += want < lo || want > hi;
          want = std::clamp(want, lo, hi);
          ref = std::clamp(ref, lo, hi);
        }
        const double got = c.fp8_out    ? E4m3ToFloatHost(y8[i * c.n + j]) * double{out_step}
                           : c.int8_out ? static_cast<int8_t>(y8[i * c.n + j]) * double{out_step8}
                                        : HalfToFloatHost(yh[i * c.n + j]);
        // The cuBLASLt path rounds to FP16 before quantising: up to a step more than half of one.
        const double out_round =
            c.fp8_out    ? std::ldexp(std::abs(want), -4) + std::ldexp(double{out_step}, -9)
            : c.int8_out ? double{out_step8} * (own ? 0.5 : 1.0) * 1.001
                         : 0.0;
        const double tol = std::ldexp(std::abs(want) + std::abs(pre), -9) +
                           mag * (int8 ? 1e-7 : std::ldexp(1.0, -12)) + 1e-4 + out_round;
        nonfinite += !std::isfinite(got);
        worst_exact = std::max(worst_exact, std::abs(got - want) / tol);
        const double bound = qbound * lip + (tanh_gelu ? 5e-4 : 0) + std::ldexp(std::abs(ref), -9) +
                             1e-4 + out_round * 1.1;
        worst_bound = std::max(worst_bound, std::abs(got - ref) / bound);
        dot += got * ref;
        na += got * got;
        nb += ref * ref;
      }
    }
  };
  {
    std::vector<std::thread> threads;
    for (int64_t b = 0; b < blocks; ++b) {
      threads.emplace_back(check_rows, nr * b / blocks, nr * (b + 1) / blocks,
                           std::ref(tallies[b]));
    }
    for (std::thread& th : threads) th.join();
  }
  double worst_exact = 0, worst_bound = 0, dot = 0, na = 0, nb = 0;
  int64_t saturated = 0, nonfinite = 0;
  for (const Tally& t : tallies) {
    worst_exact = std::max(worst_exact, t.worst_exact);
    worst_bound = std::max(worst_bound, t.worst_bound);
    dot += t.dot;
    na += t.na;
    nb += t.nb;
    saturated += t.saturated;
    nonfinite += t.nonfinite;
  }
  EXPECT_EQ(nonfinite, 0) << what << ": outputs that are NaN or infinite";
  EXPECT_LE(worst_exact, 1.0) << what << " vs the exact-quantised reference";
  EXPECT_LE(worst_bound, 1.0) << what << " vs the FP32 reference bound";
  const double cosine = dot / std::sqrt(na) / std::sqrt(nb);
  // The element bounds above are the check; the cosine is a summary. e4m3 keeps 3 mantissa bits,
  // so one rounding of each FP8 operand leaves a layer's outputs at a cosine of about 0.9987 to
  // the FP32 ones on random data (seen 0.99899 at 1 x 64 x 64).
  if (c.k >= 64) {
    EXPECT_GE(cosine, q_out || !int8 ? 0.998 : 0.999) << what;
  }
  std::printf("  cosine to FP32 %.6f (%lld of %lld rows checked", cosine,
              static_cast<long long>(nr), static_cast<long long>(c.m));
  if (q_out) std::printf(", %lld outputs saturated", static_cast<long long>(saturated));
  std::printf(")\n");
}

TEST(QuantLinearGpu, Int8AndFp8InEveryModeMatchTheReferences) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {1, 64, 64},      {37, 192, 64},    {128, 768, 768},
      {513, 3072, 768}, {256, 768, 3072}, {16, 48, 80}};
  const std::vector<std::tuple<Activation, bool, bool>> epilogues = {
      {Activation::kNone, true, false},
      {Activation::kGelu, true, false},
      {Activation::kNone, true, true},
      {Activation::kTanh, true, false},
      {Activation::kNone, false, false}};
  uint32_t seed = 1;
  for (QuantType t : {QuantType::kInt8, QuantType::kFp8E4M3}) {
    for (auto [m, n, k] : shapes) {
      for (auto [act, bias, residual] : epilogues) {
        for (QuantGemmMode first : {QuantGemmMode::kFusedEpilogue, QuantGemmMode::kScaled,
                                    QuantGemmMode::kInt32, QuantGemmMode::kFloat32}) {
          if (first == QuantGemmMode::kInt32 && t != QuantType::kInt8) continue;
          if (first == QuantGemmMode::kFloat32 && t != QuantType::kFp8E4M3) continue;
          // The host references are O(m n k) in double: the two large shapes run the plain and
          // GELU epilogues in the preferred mode only.
          const bool large = m * n * k > (int64_t{1} << 27);
          if (large && (first != QuantGemmMode::kFusedEpilogue || residual ||
                        act == Activation::kTanh || !bias)) {
            continue;
          }
          CheckLinear({t, m, n, k, act, bias, residual, first}, seed++);
          // FFN1's form with an e4m3 output for the next FP8 layer.
          if (t == QuantType::kFp8E4M3 && first == QuantGemmMode::kFusedEpilogue && !residual &&
              act != Activation::kTanh) {
            CheckLinear({t, m, n, k, act, bias, residual, first, true}, seed++);
          }
        }
      }
    }
  }
}

TEST(QuantLinearGpu, OwnGemmInEveryTypeTileAndEpilogueMatchesTheReferences) {
  SKIP_WITHOUT_GPU();
  // Odd row counts (partial tiles), one row, rows past one wave of tiles, N and K of 16 steps.
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {1, 64, 64},     {37, 192, 64},    {16, 48, 80},
      {200, 768, 768}, {513, 3072, 768}, {256, 768, 3072}};
  // (activation, bias, residual, quantised out); tanh is not the own GEMM's, nor FP8 GELU with
  // FP16 out: those run cuBLASLt (the cases check that fallback).
  const std::vector<std::tuple<Activation, bool, bool, bool>> epilogues = {
      {Activation::kNone, true, false, false},     {Activation::kGelu, true, false, false},
      {Activation::kNone, true, true, false},      {Activation::kNone, false, false, false},
      {Activation::kGelu, true, false, true},      {Activation::kGelu, false, false, true},
      {Activation::kGeluTanh, true, false, false}, {Activation::kTanh, true, false, false}};
  uint32_t seed = 1000;
  for (QuantType t : {QuantType::kInt8, QuantType::kFp8E4M3}) {
    for (int tile = 0; tile < QGemmTileCount(); ++tile) {
      if (tile == QGemmLayerNormTile()) continue;  // OwnGemmWithLayerNormMatchesGemmThenLayerNorm
      for (auto [m, n, k] : shapes) {
        for (auto [act, bias, residual, q_out] : epilogues) {
          const bool large = m * n * k > (int64_t{1} << 27);
          if (large && (act == Activation::kTanh || !bias)) continue;
          OpCase c{t, m, n, k, act, bias, residual, QuantGemmMode::kFusedEpilogue};
          c.own_tile = tile;
          (t == QuantType::kInt8 ? c.int8_out : c.fp8_out) = q_out;
          CheckLinear(c, seed++);
        }
      }
    }
  }
  // The int8 output where cuBLASLt runs the layer: FP16 y, then a quantise pass.
  OpCase c{QuantType::kInt8,  37,   192,   64,
           Activation::kGelu, true, false, QuantGemmMode::kFusedEpilogue};
  c.int8_out = true;
  CheckLinear(c, seed++);
}

// The context scratch keeps the quantised-input slots and the accumulators apart: a layer
// reading slot 1 (FFN2, after an FFN1 that writes its quantised input) may run in an
// accumulating mode at some row counts.
TEST(QuantLinearGpu, ScratchRegionsDoNotOverlap) {
  SKIP_WITHOUT_GPU();
  QuantLinears::Scratch s;
  s.xq = 1024;
  s.slots = 2;
  s.acc = 4096;
  QuantLinearRunner runner;
  ASSERT_TRUE(runner.Init(s).ok());
  const auto at = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  const uintptr_t base = at(runner.Slot(0));
  const std::vector<std::pair<uintptr_t, size_t>> regions = {
      {at(runner.Slot(0)), s.xq}, {at(runner.Slot(1)), s.xq}, {at(runner.Accumulators()), s.acc}};
  for (size_t i = 0; i < regions.size(); ++i) {
    EXPECT_GE(regions[i].first, base);
    EXPECT_LE(regions[i].first + regions[i].second, base + s.total()) << i;
    for (size_t j = i + 1; j < regions.size(); ++j) {
      const bool apart = regions[i].first + regions[i].second <= regions[j].first ||
                         regions[j].first + regions[j].second <= regions[i].first;
      EXPECT_TRUE(apart) << "regions " << i << " and " << j;
    }
  }
  QuantLinears::Scratch no_acc;
  no_acc.xq = 1024;
  QuantLinearRunner none;
  ASSERT_TRUE(none.Init(no_acc).ok());
  EXPECT_EQ(none.Accumulators(), nullptr);

  // End to end: an INT8 layer in cuBLASLt's INT32 mode reading slot 1 gives the bytes it gives
  // reading slot 0. With the accumulators over slot 1 its GEMM wrote over its own input, which
  // shows once the tiles take more than one wave (4096 rows: 192 tiles of 128 x 128 or more).
  std::mt19937 g(21);
  const int64_t m = 4096, n = 768, k = 768;
  Tensor wt(DType::kFloat32, {k, n});
  for (float& v : wt.span<float>()) v = std::uniform_real_distribution<float>(-0.1f, 0.1f)(g);
  QuantLinearOp op;
  op.node = "slot test";
  op.type = QuantType::kInt8;
  op.k = k;
  op.n = n;
  op.x_scale = 2.f / 127;
  QuantizeLinearWeight(wt, op.type, &op.weight, &op.w_scales);
  cublasLtHandle_t lt = nullptr;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  constexpr size_t kWs = 32u << 20;
  QuantProbeBuffers probe;
  ASSERT_TRUE(probe.Allocate(m, n, k, kWs).ok());
  const int64_t counts[] = {m};
  ASSERT_TRUE(ChooseQuantGemm(lt, probe, counts, QuantGemmMode::kInt32, &op).ok());
  ASSERT_EQ(op.mode, QuantGemmMode::kInt32);
  const std::vector<float> scales = QuantScaleFloats(op);
  const auto x = ToHalf(Uniform(g, m * k, -2.f, 2.f));
  Dev dw(op.weight.size()), dsc(scales.size() * 4), dx(m * k * 2), dy0(m * n * 2), dy1(m * n * 2),
      ws(kWs);
  cudaMemcpy(dw.p, op.weight.data(), op.weight.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dsc.p, scales.data(), scales.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dx.p, x.data(), m * k * 2, cudaMemcpyHostToDevice);
  op.w_dev = dw.p;
  op.scales_dev = dsc.as<float>();
  QuantLinears::Scratch two = QuantLinears::ScratchFor(op, m);
  two.slots = 2;
  QuantLinearRunner both;
  ASSERT_TRUE(both.Init(two).ok());
  for (int slot : {0, 1}) {
    op.in_slot = slot;
    ASSERT_TRUE(
        both.Run(op, lt, m, dx.p, nullptr, nullptr, slot ? dy1.p : dy0.p, ws.p, kWs, nullptr).ok());
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cublasLtDestroy(lt);
  EXPECT_EQ(Bytes(dy1.p, m * n * 2), Bytes(dy0.p, m * n * 2));
}

// The own GEMM with FP16 operands (QGemmArgs::half; the FP16 Linear's GEMM of our own at few
// rows): every FP16 tile and epilogue against a double reference on the same FP16 values.
TEST(QuantLinearGpu, OwnGemmWithHalfOperandsMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {1, 64, 64},     {37, 192, 64},    {16, 48, 80},
      {128, 768, 768}, {200, 3072, 768}, {128, 768, 3072}};
  // (activation, bias, residual)
  const std::vector<std::tuple<Activation, bool, bool>> epilogues = {
      {Activation::kNone, true, false},
      {Activation::kGeluTanh, true, false},
      {Activation::kGelu, true, false},
      {Activation::kNone, true, true},
      {Activation::kNone, false, false}};
  std::mt19937 g(77);
  int ran = 0;
  for (auto [m, n, k] : shapes) {
    const auto x = RoundHalf(Uniform(g, m * k, -2.f, 2.f));
    const auto w = RoundHalf(Uniform(g, n * k, -0.1f, 0.1f));  // [n, k]
    const auto bias = RoundHalf(Uniform(g, n, -0.5f, 0.5f));
    const auto res = RoundHalf(Uniform(g, m * n, -1.f, 1.f));
    Dev dx(m * k * 2), dw(n * k * 2), db(n * 2), dr(m * n * 2), dy(m * n * 2), ws(32u << 20);
    cudaMemcpy(dx.p, ToHalf(x).data(), m * k * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dw.p, ToHalf(w).data(), n * k * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(db.p, ToHalf(bias).data(), n * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dr.p, ToHalf(res).data(), m * n * 2, cudaMemcpyHostToDevice);
    for (int tile = 0; tile < QGemmTileCount(); ++tile) {
      for (auto [act, has_bias, residual] : epilogues) {
        QGemmArgs a;
        a.half = true;
        a.m = m;
        a.n = n;
        a.k = k;
        a.x = dx.p;
        a.w = dw.p;
        a.bias = has_bias ? db.p : nullptr;
        a.activation = act;
        a.residual = residual ? dr.p : nullptr;
        a.y = dy.p;
        a.tile = tile;
        const std::string what = fmt::format(
            "FP16 tile {} ({}), {} x {} x {}, act {}{}{}", tile, QGemmTileName(tile), m, n, k,
            static_cast<int>(act), has_bias ? ", bias" : "", residual ? ", residual" : "");
        // Tiles 1 and 2 only; none with a quantised output.
        EXPECT_EQ(QGemmCanImplement(a), tile == 1 || tile == 2) << what;
        a.q_out = true;
        EXPECT_FALSE(QGemmCanImplement(a)) << what << ", quantised out";
        a.q_out = false;
        if (!QGemmCanImplement(a)) continue;
        ASSERT_LE(QGemmWorkspaceSize(a), size_t{32} << 20) << what;
        cudaMemset(dy.p, 0xff, m * n * 2);  // NaN halves: every output must be written
        ASSERT_EQ(QGemmRun(a, ws.p, nullptr), cudaSuccess) << what;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
        std::vector<uint16_t> yh(m * n);
        cudaMemcpy(yh.data(), dy.p, m * n * 2, cudaMemcpyDeviceToHost);
        double worst = 0;
        int64_t nonfinite = 0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double acc = 0, mag = 0;
            for (int64_t p = 0; p < k; ++p) {
              acc += double{x[i * k + p]} * w[j * k + p];
              mag += std::abs(double{x[i * k + p]} * w[j * k + p]);
            }
            const double pre = acc + (has_bias ? bias[j] : 0.0);
            // Both GELU forms run the tanh form with the hardware tanh (qgemm_kernels.h).
            const double want = Act(act, pre, true) + (residual ? res[i * n + j] : 0.0);
            const double got = HalfToFloatHost(yh[i * n + j]);
            nonfinite += !std::isfinite(got);
            // FP16 output rounding, FP32 accumulation, the hardware tanh (about 2^-11 absolute).
            const double tol = std::ldexp(std::abs(want) + std::abs(pre), -10) +
                               mag * std::ldexp(1.0, -16) + (act != Activation::kNone ? 1e-3 : 0) +
                               1e-4;
            worst = std::max(worst, std::abs(got - want) / tol);
          }
        }
        EXPECT_EQ(nonfinite, 0) << what;
        EXPECT_LE(worst, 1.0) << what;
        ++ran;
      }
    }
  }
  EXPECT_EQ(ran, static_cast<int>(shapes.size() * epilogues.size() * 2));
}

TEST(QuantLinearGpu, OwnGemmRefusesWhatItCannotRun) {
  SKIP_WITHOUT_GPU();
  Dev x(4096), w(4096), s(1024), y(8192);
  QGemmArgs a;
  a.m = 16;
  a.n = 64;
  a.k = 64;
  a.x = x.p;
  a.w = w.p;
  a.scale = s.as<float>();
  a.y = y.p;
  Dev gamma(1024 * 4), beta(1024 * 4);
  const QGemmArgs plain = a;
  // Every tile refuses the same inputs (each has its own kernels' checks behind the common ones).
  for (int tile = 0; tile < QGemmTileCount(); ++tile) {
    SCOPED_TRACE(QGemmTileName(tile));
    a = plain;
    a.tile = tile;
    const bool ln = tile == QGemmLayerNormTile();
    QGemmArgs with_ln = a;
    with_ln.n = 128;
    with_ln.residual = y.p;
    with_ln.ln.gamma = gamma.as<float>();
    with_ln.ln.beta = beta.as<float>();
    // The LayerNorm tile runs a residual Linear with the LayerNorm only; the others never.
    EXPECT_EQ(QGemmCanImplement(a), !ln);
    EXPECT_EQ(QGemmCanImplement(with_ln), ln);
    if (ln) {
      a = with_ln;
      for (int64_t n : {int64_t{1024}, int64_t{384}}) {
        with_ln.n = n;
        EXPECT_TRUE(QGemmCanImplement(with_ln)) << n << " columns";
      }
    }
    ASSERT_TRUE(QGemmCanImplement(a));
    auto refused = [&](auto change, const char* what) {
      QGemmArgs b = a;
      change(b);
      EXPECT_FALSE(QGemmCanImplement(b)) << what;
    };
    refused([](QGemmArgs& b) { b.n = 72; }, "N not a multiple of 16");
    refused([](QGemmArgs& b) { b.k = 40; }, "K not a multiple of 16");
    refused([](QGemmArgs& b) { b.m = 0; }, "no rows");
    refused([&](QGemmArgs& b) { b.x = x.as<char>() + 8; }, "misaligned input");
    refused([](QGemmArgs& b) { b.scale = nullptr; }, "no dequantisation steps");
    refused([](QGemmArgs& b) { b.activation = Activation::kRelu; }, "relu");
    refused([](QGemmArgs& b) { b.q_out = true; }, "quantised output without GELU");
    refused(
        [](QGemmArgs& b) {
          b.type = QuantType::kFp8E4M3;
          b.activation = Activation::kGelu;
        },
        "FP8 GELU with FP16 out (not instantiated)");
    refused(
        [&](QGemmArgs& b) {
          b.activation = Activation::kGelu;
          b.residual = y.p;
        },
        "GELU with a residual");
    if (!ln) continue;
    refused([](QGemmArgs& b) { b.n = 1152; }, "N / 128 over 8 (a cluster's most CTAs)");
    refused([](QGemmArgs& b) { b.n = 192; }, "N not a multiple of 128");
    refused([](QGemmArgs& b) { b.residual = nullptr; }, "LayerNorm without a residual");
    refused([](QGemmArgs& b) { b.ln.beta = nullptr; }, "no beta");
    refused([](QGemmArgs& b) { b.ln.epsilon = -1.f; }, "negative epsilon");
    refused([](QGemmArgs& b) { b.activation = Activation::kGelu; }, "GELU before the LayerNorm");
    refused([&](QGemmArgs& b) { b.ln.gamma = gamma.as<float>() + 1; }, "misaligned gamma");
    refused(
        [&](QGemmArgs& b) {
          b.ln.q.y = x.p;
          b.ln.q.inv_scale = 0.f;
        },
        "a quantised copy with no step");
    refused([&](QGemmArgs& b) { b.ln.q.y = x.as<char>() + 8; }, "misaligned quantised copy");
  }
  a.tile = QGemmTileCount();
  EXPECT_FALSE(QGemmCanImplement(a)) << "unknown tile";
  EXPECT_EQ(QGemmRun(QGemmArgs{}, nullptr, nullptr), cudaErrorInvalidValue);
}

// The LayerNorm in the residual Linear's epilogue (QGemmArgs::ln) against the own GEMM writing the
// FP16 sum, then the LayerNorm kernel with its quantised copy: the same quantised operands, so
// the two differ only by the FP16 rounding of the sum, which the fused form does not do (at most
// 2^-11 of |sum| per value, times rstd · |gamma|), and the rounding of y (2^-11 of |y|). The
// quantised copies then differ by at most one step where y sits near a rounding boundary. Row
// counts span one partial row tile to more row tiles than clusters (each CTA running several),
// N from one column tile to eight (clusters of 1 to 8 CTAs); the most rows give each warpgroup of
// a CTA more tiles than its two exchange buffers, so that each buffer's barrier runs through both
// phases; each case runs twice, and the second call must write the same values.
TEST(QuantLinearGpu, OwnGemmWithLayerNormMatchesGemmThenLayerNorm) {
  SKIP_WITHOUT_GPU();
  const int ln_tile = QGemmLayerNormTile();
  ASSERT_GE(ln_tile, 0);
  ASSERT_LT(ln_tile, QGemmTileCount());
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {1, 768, 768}, {200, 768, 768},  {513, 768, 3072}, {37, 256, 64},
      {16, 128, 64}, {300, 1024, 128}, {8300, 768, 768}, {20000, 768, 128}};
  std::mt19937 g(4242);
  for (QuantType t : {QuantType::kInt8, QuantType::kFp8E4M3}) {
    for (auto [m, n, k] : shapes) {
      const bool int8 = t == QuantType::kInt8;
      const std::string what = fmt::format("{} {} x {} x {}", int8 ? "int8" : "e4m3", m, n, k);
      // Quantised operands: int8 steps, or e4m3 values of moderate size.
      std::vector<uint8_t> xq(m * k), wq(n * k);
      std::uniform_int_distribution<int> i8(-127, 127);
      auto fill = [&](std::vector<uint8_t>& v, float lo, float hi) {
        if (int8) {
          for (uint8_t& b : v) b = static_cast<uint8_t>(static_cast<int8_t>(i8(g)));
        } else {
          const auto f = Uniform(g, v.size(), lo, hi);
          FloatToE4m3Host(f.data(), v.data(), static_cast<int64_t>(v.size()));
        }
      };
      fill(xq, -4.f, 4.f);
      fill(wq, -2.f, 2.f);
      // Steps so that the sums are O(1) and a row's spread is uneven.
      const float step = int8 ? 1.f / (127.f * 127.f * std::sqrt(float(k)) / 3.f)
                              : 1.f / (8.f * std::sqrt(float(k)));
      std::vector<float> scale(n);
      for (int64_t j = 0; j < n; ++j) scale[j] = step * (0.5f + 1.5f * (j % 7) / 6.f);
      const auto bias = RoundHalf(Uniform(g, n, -0.5f, 0.5f));
      const auto res = RoundHalf(Uniform(g, m * n, -2.f, 2.f));
      const auto gamma = Uniform(g, n, 0.5f, 1.5f);
      const auto beta = Uniform(g, n, -0.3f, 0.3f);
      const float q_inv_scale = int8 ? 127.f / 4.f : 448.f / 8.f;
      Dev dx(m * k), dw(n * k), ds(n * 4), db(n * 2), dr(m * n * 2), dg(n * 4), dbe(n * 4),
          dsum(m * n * 2), dyr(m * n * 2), dqr(m * n), dy(m * n * 2), dq(m * n), ws(32u << 20);
      cudaMemcpy(dx.p, xq.data(), m * k, cudaMemcpyHostToDevice);
      cudaMemcpy(dw.p, wq.data(), n * k, cudaMemcpyHostToDevice);
      cudaMemcpy(ds.p, scale.data(), n * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(db.p, ToHalf(bias).data(), n * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(dr.p, ToHalf(res).data(), m * n * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(dg.p, gamma.data(), n * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(dbe.p, beta.data(), n * 4, cudaMemcpyHostToDevice);

      // The reference: the own GEMM's FP16 sum (any tile that takes it), then the LayerNorm.
      QGemmArgs a;
      a.type = t;
      a.m = m;
      a.n = n;
      a.k = k;
      a.x = dx.p;
      a.w = dw.p;
      a.scale = ds.as<float>();
      a.bias = db.p;
      a.residual = dr.p;
      a.y = dsum.p;
      for (a.tile = 0; a.tile < QGemmTileCount() && !QGemmCanImplement(a); ++a.tile) {
      }
      ASSERT_LT(a.tile, QGemmTileCount()) << what << ": no tile writes the sum";
      ASSERT_EQ(QGemmRun(a, ws.p, nullptr), cudaSuccess) << what;
      LayerNormArgs la;
      la.rows = m;
      la.cols = static_cast<int>(n);
      la.x = dsum.p;
      la.gamma = dg.as<float>();
      la.beta = dbe.as<float>();
      la.epsilon = 1e-5f;
      la.y = dyr.p;
      la.q = QuantizedCopy{t, dqr.p, q_inv_scale};
      ASSERT_TRUE(LayerNormCanImplement(la)) << what;
      ASSERT_EQ(LayerNormRun(la, nullptr, nullptr), cudaSuccess) << what;

      QGemmArgs f = a;
      f.tile = ln_tile;
      f.y = dy.p;
      f.ln.gamma = dg.as<float>();
      f.ln.beta = dbe.as<float>();
      f.ln.epsilon = 1e-5f;
      f.ln.q = QuantizedCopy{t, dq.p, q_inv_scale};
      ASSERT_TRUE(QGemmCanImplement(f)) << what;
      ASSERT_EQ(QGemmWorkspaceSize(f), 0u) << what;
      std::vector<uint16_t> sum(m * n), yr(m * n), y(m * n), y_first;
      std::vector<uint8_t> qr(m * n), q(m * n);
      cudaMemcpy(sum.data(), dsum.p, m * n * 2, cudaMemcpyDeviceToHost);
      cudaMemcpy(yr.data(), dyr.p, m * n * 2, cudaMemcpyDeviceToHost);
      cudaMemcpy(qr.data(), dqr.p, m * n, cudaMemcpyDeviceToHost);
      for (int run = 0; run < 2; ++run) {
        cudaMemset(dy.p, 0xff, m * n * 2);  // NaN halves: every output must be written
        cudaMemset(dq.p, 0x7f, m * n);
        ASSERT_EQ(QGemmRun(f, ws.p, nullptr), cudaSuccess) << what;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
        cudaMemcpy(y.data(), dy.p, m * n * 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(q.data(), dq.p, m * n, cudaMemcpyDeviceToHost);
        if (run == 1) {
          EXPECT_EQ(y, y_first) << what << ": a second call wrote other values";
        }
        y_first = y;
      }
      double worst = 0, worst_q = 0;
      int64_t nonfinite = 0, q_off = 0;
      for (int64_t i = 0; i < m; ++i) {
        double mean = 0, var = 0;
        for (int64_t j = 0; j < n; ++j) mean += HalfToFloatHost(sum[i * n + j]);
        mean /= n;
        for (int64_t j = 0; j < n; ++j) {
          const double d = HalfToFloatHost(sum[i * n + j]) - mean;
          var += d * d;
        }
        const double rstd = 1 / std::sqrt(var / n + 1e-5);
        for (int64_t j = 0; j < n; ++j) {
          const double want = HalfToFloatHost(yr[i * n + j]);
          const double got = HalfToFloatHost(y[i * n + j]);
          nonfinite += !std::isfinite(got);
          const double s = HalfToFloatHost(sum[i * n + j]);
          const double tol = std::ldexp(std::abs(want), -9) +
                             rstd * gamma[j] * std::ldexp(std::abs(s) + std::abs(mean), -10) + 1e-3;
          worst = std::max(worst, std::abs(got - want) / tol);
          const uint8_t a8 = q[i * n + j], b8 = qr[i * n + j];
          if (a8 == b8) continue;
          ++q_off;
          // One step apart at most (int8 by one, e4m3 by one mantissa step, 2^-3 relative) beyond
          // what y's own tolerance moves the scaled value: a y near zero may round to either sign.
          const double qa = int8 ? static_cast<int8_t>(a8) : E4m3ToFloatHost(a8);
          const double qb = int8 ? static_cast<int8_t>(b8) : E4m3ToFloatHost(b8);
          const double step_tol = int8 ? 1.0 : std::ldexp(std::max(std::abs(qa), std::abs(qb)), -3);
          worst_q = std::max(worst_q,
                             std::abs(qa - qb) / ((step_tol + tol * q_inv_scale) * 1.001 + 1e-9));
        }
      }
      EXPECT_EQ(nonfinite, 0) << what;
      EXPECT_LE(worst, 1.0) << what << ": y against GEMM then LayerNorm";
      EXPECT_LE(worst_q, 1.0) << what << ": quantised copies more than a step apart";
      EXPECT_LE(q_off, m * n / 50 + 1) << what << ": quantised copies that differ";
      std::printf(
          "  %s: worst y error %.3f of its bound, %lld of %lld quantised bytes a step off\n",
          what.c_str(), worst, static_cast<long long>(q_off), static_cast<long long>(m * n));
    }
  }
}

TEST(QuantLinearGpu, Fp8ScalesSitApartAndCanBeTheAlpha) {
  // No GPU needed: what the device scale buffer and the GEMM descriptor of a layer hold.
  QuantLinearOp op;
  op.type = QuantType::kFp8E4M3;
  op.k = 64;
  op.n = 32;
  op.x_scale = 0.25f;
  op.w_scales = {0.5f};
  const std::vector<float> s = QuantScaleFloats(op);
  ASSERT_EQ(s.size(), static_cast<size_t>(kFp8ColumnScalesAt + op.n));
  EXPECT_EQ(s[0], 0.5f);
  EXPECT_EQ(s[kFp8XScaleAt], 0.25f);
  EXPECT_EQ(s[kFp8DScaleAt], 0.f);  // no e4m3 output
  // The own GEMM's per-column steps: sw · sx in every column.
  EXPECT_EQ(std::vector<float>(s.begin() + kFp8ColumnScalesAt, s.end()),
            std::vector<float>(op.n, 0.125f));
  for (int at : {kFp8XScaleAt, kFp8DScaleAt, kFp8ColumnScalesAt}) {
    EXPECT_EQ(at * sizeof(float) % 16, 0u) << at;  // each 16-byte aligned
  }
  QuantGemmDesc d = QuantLinearGemmDesc(op, 37);
  EXPECT_EQ(d.m, 37);
  EXPECT_FALSE(d.scale_in_alpha);
  op.scale_in_alpha = true;
  op.pad_rows = true;
  d = QuantLinearGemmDesc(op, 37);
  EXPECT_EQ(d.m, 48);
  EXPECT_TRUE(d.scale_in_alpha);
  EXPECT_EQ(d.alpha, 0.125f);
  EXPECT_EQ(QuantLinears::ScratchFor(op, 37).xq, 48u * 64);  // padded rows, 256-byte multiple
  op.mode = QuantGemmMode::kFloat32;
  EXPECT_GE(QuantLinears::ScratchFor(op, 37).acc, 48u * 32 * 4);
  EXPECT_FALSE(QuantGemmModeApplies(d, QuantGemmMode::kInt32));
  EXPECT_TRUE(QuantGemmModeApplies(d, QuantGemmMode::kFloat32));
  QuantLinearOp i8 = op;
  i8.type = QuantType::kInt8;
  i8.w_scales.assign(32, 2.f);
  EXPECT_EQ(QuantScaleFloats(i8), std::vector<float>(32, 0.5f));
}

TEST(QuantLinearGpu, RejectsShapesCublasLtCannotTake) {
  QuantGemmDesc d{QuantType::kFp8E4M3, 8, 3, 64, true, Activation::kNone, false};
  auto g = QuantGemm::Create(nullptr, d, 1 << 20);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("multiples of 16"), std::string::npos);
  EXPECT_FALSE(QuantGemmShapeSupported(3, 64));
  EXPECT_TRUE(QuantGemmShapeSupported(768, 3072));
}

}  // namespace
}  // namespace surge::engine::cuda
