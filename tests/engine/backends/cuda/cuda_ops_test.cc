// Each CUDA kernel against the reference evaluator (ir::EvalNode) on random inputs: odd sizes,
// masks with padding, FP16 and BF16. Tolerances: see op_test_harness.h.
#include <cuda_runtime_api.h>

#include "engine/backends/cuda/attention_kernels.h"
#include "engine/backends/cuda/bias_act_kernels.h"
#include "engine/backends/cuda/delay_kernels.h"
#include "engine/backends/cuda/embed_layer_norm_kernels.h"
#include "engine/backends/cuda/gemm.h"
#include "engine/backends/cuda/layer_norm_kernels.h"
#include "engine/backends/cuda/lowering.h"
#include "engine/backends/cuda/pack_kernels.h"
#include "op_test_harness.h"

namespace surge::engine::cuda::testing {
namespace {

ir::Node Fused(std::string op, std::map<std::string, ir::Attribute> attrs = {}) {
  ir::Node n;
  n.op_type = std::move(op);
  n.domain = std::string(ir::kSurgeDomain);
  n.name = "test";
  n.attrs = std::move(attrs);
  return n;
}

Tensor Ints(Shape shape, const std::vector<int64_t>& v) {
  Tensor t(DType::kInt64, std::move(shape));
  std::copy(v.begin(), v.end(), t.data_as<int64_t>());
  return t;
}

class CudaOpTest : public ::testing::TestWithParam<DataType> {
 protected:
  void SetUp() override { SURGE_SKIP_WITHOUT_GPU(); }
  DataType dt() const { return GetParam(); }
  std::mt19937 rng_{1234};
};

TEST_P(CudaOpTest, LayerNormMatchesReference) {
  // 16-byte warp-per-row path at several chunk counts (768: 3, 2056: 12, 4096: 16 chunks a lane),
  // the scalar path (1001, 33), and with 20011 rows the strided path (a resident grid, each warp
  // over many rows, gamma and beta in shared memory) at 1, 3 and 4 chunks a lane.
  for (auto [cols, rows] : {std::pair<int, int64_t>{768, 37},
                            {2056, 37},
                            {4096, 37},
                            {64, 37},
                            {1001, 37},
                            {33, 37},
                            {256, 20011},
                            {768, 20011},
                            {1024, 20011}}) {
    Tensor x = Random({rows, cols}, rng_, dt(), -3.f, 5.f);
    Tensor gamma = Random({cols}, rng_, DataType::kF16),
           beta = Random({cols}, rng_, DataType::kF16);
    DeviceTensor dx(x, dt()), dg(gamma, dt(), true), db(beta, dt(), true), dy(rows * cols * 2);
    LayerNormArgs a{dt(),
                    rows,
                    cols,
                    dx.get(),
                    nullptr,
                    nullptr,
                    static_cast<const float*>(dg.get()),
                    static_cast<const float*>(db.get()),
                    1e-5f,
                    dy.get(),
                    nullptr,
                    {}};
    ASSERT_TRUE(LayerNormCanImplement(a));
    CheckCuda(LayerNormRun(a, nullptr, nullptr), "LayerNormRun");
    auto ref =
        Reference(Fused("LayerNorm", {{"epsilon", 1e-5}}), std::vector<Tensor>{x, gamma, beta});
    EXPECT_LT(RelError(dy.Download({rows, cols}, dt()), ref[0]), Tolerance(dt()))
        << "cols " << cols << " rows " << rows;
  }
}

TEST_P(CudaOpTest, LayerNormLargeValuesDoNotOverflow) {
  // Squares of these values overflow FP16 (max 65504); statistics are float32.
  const int64_t rows = 5, cols = 768;
  Tensor x = Random({rows, cols}, rng_, dt(), 200.f, 900.f);
  Tensor gamma = Random({cols}, rng_, DataType::kF16), beta = Random({cols}, rng_, DataType::kF16);
  DeviceTensor dx(x, dt()), dg(gamma, dt(), true), db(beta, dt(), true), dy(rows * cols * 2);
  LayerNormArgs a{dt(),
                  rows,
                  cols,
                  dx.get(),
                  nullptr,
                  nullptr,
                  static_cast<const float*>(dg.get()),
                  static_cast<const float*>(db.get()),
                  1e-5f,
                  dy.get(),
                  nullptr,
                  {}};
  CheckCuda(LayerNormRun(a, nullptr, nullptr), "LayerNormRun");
  auto ref = Reference(Fused("LayerNorm"), std::vector<Tensor>{x, gamma, beta});
  EXPECT_LT(RelError(dy.Download({rows, cols}, dt()), ref[0]), 4 * Tolerance(dt()));
}

// The scalar path (391 columns), one row per warp (29 x 768), and rows of up to 1024 columns on a
// grid capped at the blocks resident at once, each warp striding over rows: 24001 rows (about 3x
// the warps an H200 holds) cover the stride loop, its prefetch of the next row and the ragged
// last step.
TEST_P(CudaOpTest, SkipLayerNormWithBiasAndSum) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{29, 391}, {29, 768}, {24001, 768}}) {
    Tensor x = Random({rows, cols}, rng_, dt()), skip = Random({rows, cols}, rng_, dt());
    Tensor gamma = Random({cols}, rng_, DataType::kF16),
           beta = Random({cols}, rng_, DataType::kF16);
    Tensor bias = Random({cols}, rng_, dt());
    DeviceTensor dx(x, dt()), ds(skip, dt()), dbias(bias, dt()), dg(gamma, dt(), true),
        db(beta, dt(), true), dy(rows * cols * 2), dsum(rows * cols * 2);
    LayerNormArgs a{dt(),
                    rows,
                    static_cast<int>(cols),
                    dx.get(),
                    ds.get(),
                    dbias.get(),
                    static_cast<const float*>(dg.get()),
                    static_cast<const float*>(db.get()),
                    1e-6f,
                    dy.get(),
                    dsum.get(),
                    {}};
    CheckCuda(LayerNormRun(a, nullptr, nullptr), "LayerNormRun");
    auto ref = Reference(Fused("SkipLayerNorm", {{"epsilon", 1e-6}}),
                         std::vector<Tensor>{x, skip, gamma, beta, bias});
    // Row by row too, so that one row skipped or written twice cannot hide in a whole-tensor norm.
    auto worst_row = [&](const Tensor& got, const Tensor& want) {
      double worst = 0.0;
      for (int64_t r = 0; r < rows; ++r) {
        double err = 0.0, norm = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
          const double g = got.data_as<float>()[r * cols + c],
                       w = want.data_as<float>()[r * cols + c];
          err += (g - w) * (g - w);
          norm += w * w;
        }
        worst = std::max(worst, std::isfinite(err) ? std::sqrt(err / norm) : HUGE_VAL);
      }
      return worst;
    };
    const Tensor y = dy.Download({rows, cols}, dt()), sum = dsum.Download({rows, cols}, dt());
    EXPECT_LT(RelError(y, ref[0]), Tolerance(dt())) << cols;
    EXPECT_LT(RelError(sum, ref[1]), Tolerance(dt())) << cols;
    EXPECT_LT(worst_row(y, ref[0]), 2 * Tolerance(dt())) << rows << "x" << cols;
    EXPECT_LT(worst_row(sum, ref[1]), 2 * Tolerance(dt())) << rows << "x" << cols;
    // In place, as the backend may plan it (y aliases x, or the skip, each on fresh copies): each
    // row is read before it is written.
    DeviceTensor dx2(x, dt()), ds2(skip, dt());
    LayerNormArgs over_x = a, over_skip = a;
    over_x.y = dx.get();
    over_x.sum_out = over_skip.sum_out = nullptr;
    over_skip.x = dx2.get();
    over_skip.skip = over_skip.y = ds2.get();
    for (const auto& [args, out] : {std::pair{over_x, &dx}, std::pair{over_skip, &ds2}}) {
      CheckCuda(LayerNormRun(args, nullptr, nullptr), "LayerNormRun in place");
      const Tensor got = out->Download({rows, cols}, dt());
      EXPECT_LT(RelError(got, ref[0]), Tolerance(dt())) << cols;
      EXPECT_LT(worst_row(got, ref[0]), 2 * Tolerance(dt())) << rows << "x" << cols;
    }
  }
}

TEST_P(CudaOpTest, EmbedLayerNormPaddedAndPacked) {
  for (std::string mode : {"arange", "roberta"}) {
    const int64_t B = 3, S = 17, H = 96, V = 50, P = 40, T = 2;
    const int64_t pad = 1;
    std::vector<int64_t> ids(B * S), types(B * S);
    std::vector<int32_t> ids32(B * S), types32(B * S), pos32(B * S);
    std::uniform_int_distribution<int> id(2, V - 1), ty(0, T - 1);
    const int lens[3] = {17, 9, 1};
    for (int64_t b = 0; b < B; ++b) {
      int running = 0;
      for (int64_t s = 0; s < S; ++s) {
        const bool real = s < lens[b];
        ids[b * S + s] = real ? id(rng_) : pad;
        types[b * S + s] = ty(rng_);
        running += real;
        pos32[b * S + s] = mode == "arange" ? s : (real ? running + pad : pad);
        ids32[b * S + s] = static_cast<int32_t>(ids[b * S + s]);
        types32[b * S + s] = static_cast<int32_t>(types[b * S + s]);
      }
    }
    Tensor word = Random({V, H}, rng_, dt()), pos = Random({P, H}, rng_, dt()),
           type = Random({T, H}, rng_, dt());
    Tensor gamma = Random({H}, rng_, DataType::kF16), beta = Random({H}, rng_, DataType::kF16);
    DeviceTensor dw(word, dt()), dp(pos, dt()), dtp(type, dt()), dg(gamma, dt(), true),
        db(beta, dt(), true), dids = UploadInts(ids32), dty = UploadInts(types32),
                              dpos = UploadInts(pos32), dy(B * S * H * 2);
    std::vector<int32_t> packed_rows;
    std::vector<int64_t> rows64;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t s = 0; s < lens[b]; ++s) {
        packed_rows.push_back(static_cast<int32_t>(b * S + s));
        rows64.push_back(b * S + s);
      }
    }
    DeviceTensor drows = UploadInts(packed_rows);
    auto ref = Reference(Fused("EmbedLayerNorm",
                               {{"epsilon", 1e-12}, {"position_mode", mode}, {"padding_idx", pad}}),
                         std::vector<Tensor>{Ints({B, S}, ids), Ints({B, S}, types), Tensor(), word,
                                             pos, type, gamma, beta});
    EmbedLayerNormArgs a;
    a.dtype = dt();
    a.rows = B * S;
    a.hidden = H;
    a.input_ids = static_cast<const int32_t*>(dids.get());
    a.type_ids = static_cast<const int32_t*>(dty.get());
    a.positions = static_cast<const int32_t*>(dpos.get());
    a.word_emb = dw.get();
    a.pos_emb = dp.get();
    a.type_emb = dtp.get();
    a.gamma = static_cast<const float*>(dg.get());
    a.beta = static_cast<const float*>(db.get());
    a.epsilon = 1e-12f;
    a.y = dy.get();
    ASSERT_TRUE(EmbedLayerNormCanImplement(a));
    CheckCuda(EmbedLayerNormRun(a, nullptr, nullptr), "EmbedLayerNormRun");
    EXPECT_LT(RelError(dy.Download({B * S, H}, dt()), ref[0]), Tolerance(dt())) << mode;
    // Packed: only real tokens, in order.
    dy.Poison();
    a.rows = static_cast<int64_t>(packed_rows.size());
    a.row_index = static_cast<const int32_t*>(drows.get());
    CheckCuda(EmbedLayerNormRun(a, nullptr, nullptr), "EmbedLayerNormRun packed");
    std::vector<int64_t> got_rows(rows64.size());
    for (size_t i = 0; i < got_rows.size(); ++i) got_rows[i] = static_cast<int64_t>(i);
    EXPECT_LT(RelError(dy.Download({a.rows, H}, dt()), ref[0], H, got_rows, rows64),
              Tolerance(dt()))
        << mode << " packed";
  }
}

TEST_P(CudaOpTest, AttentionPaddedAndPackedMatchReference) {
  struct Shape3 {
    int d, seq;
    std::vector<int> lens;
    double scale_x_sqrt_d = 0.7;  // the scale times sqrt(d)
  };
  // Odd lengths, one-token sequences, sequences of 1..5 key tiles (64 keys each), so the
  // double-buffered tile ring wraps, and blocks with one to three warps past the sequence's end.
  // A negative scale reverses the order of the scores: the packed form may not keep its running
  // maximum on raw scores there, and must still match.
  const std::vector<Shape3> shapes = {{16, 77, {77, 40, 1}},
                                      {32, 77, {77, 40, 1}},
                                      {64, 77, {77, 40, 1, 17, 33, 48}},
                                      {128, 77, {77, 40, 1}},
                                      {64, 300, {300, 257, 129, 64, 1}},
                                      {128, 200, {65, 200, 128}},
                                      {16, 130, {130, 2, 127, 66}},
                                      {64, 90, {90, 37}, -0.7}};
  for (const Shape3& sh : shapes) {
    const int d = sh.d, S = sh.seq, B = static_cast<int>(sh.lens.size()), heads = 3, H = heads * d;
    Tensor qkv = Random({B, S, 3 * H}, rng_, dt(), -2.f, 2.f);
    std::vector<int64_t> mask(B * S);
    std::vector<int32_t> mask32(B * S);
    for (int b = 0; b < B; ++b) {
      for (int s = 0; s < S; ++s)
        mask32[b * S + s] = static_cast<int32_t>(mask[b * S + s] = s < sh.lens[b]);
    }
    const double scale = sh.scale_x_sqrt_d / std::sqrt(static_cast<double>(d));
    auto ref = Reference(Fused("Attention", {{"num_heads", int64_t{heads}}, {"scale", scale}}),
                         std::vector<Tensor>{qkv, Ints({B, S}, mask)});
    DeviceTensor dqkv(qkv, dt()), dmask = UploadInts(mask32), dout(int64_t{B} * S * H * 2);
    AttentionArgs a;
    a.dtype = dt();
    a.batch = B;
    a.seq = S;
    a.num_heads = heads;
    a.head_dim = d;
    a.scale = static_cast<float>(scale);
    a.key_mask = static_cast<const int32_t*>(dmask.get());
    a.qkv = dqkv.get();
    a.out = dout.get();
    ASSERT_TRUE(AttentionCanImplement(a));
    CheckCuda(AttentionRun(a, nullptr, nullptr), "AttentionRun padded");
    // Padded form: every row is written (padding queries attend to the real keys).
    const Tensor full = dout.Download({B * S, H}, dt());
    EXPECT_LT(RelError(full, ref[0]), Tolerance(dt()))
        << "d " << d << " seq " << S << " scale " << scale;
    // The first query only: one row per sequence, equal to that query's row of the full run.
    auto first_rows_match = [&](const Tensor& all, const std::vector<int64_t>& first_row,
                                const char* form) {
      DeviceTensor dfirst(int64_t{B} * H * 2);
      a.first_query_only = true;
      a.out = dfirst.get();
      CheckCuda(AttentionRun(a, nullptr, nullptr), "AttentionRun first query");
      a.first_query_only = false;
      const Tensor got = dfirst.Download({B, H}, dt());
      for (int b = 0; b < B; ++b) {
        EXPECT_EQ(std::memcmp(got.data_as<float>() + int64_t{b} * H,
                              all.data_as<float>() + first_row[b] * H, H * sizeof(float)),
                  0)
            << form << " first query of sequence " << b << ", d " << d << " seq " << S;
      }
    };
    std::vector<int64_t> padded_first;
    for (int b = 0; b < B; ++b) padded_first.push_back(int64_t{b} * S);
    first_rows_match(full, padded_first, "padded");
    a.out = dout.get();

    // Packed: gather the real tokens' QKV rows, run with cu_seqlens, compare real rows.
    std::vector<int64_t> real_rows;
    std::vector<int32_t> cu{0};
    for (int b = 0; b < B; ++b) {
      for (int s = 0; s < sh.lens[b]; ++s) real_rows.push_back(int64_t{b} * S + s);
      cu.push_back(static_cast<int32_t>(real_rows.size()));
    }
    const int64_t T = static_cast<int64_t>(real_rows.size());
    Tensor packed(DType::kFloat32, {T, 3 * H});
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(packed.data_as<float>() + t * 3 * H, qkv.data_as<float>() + real_rows[t] * 3 * H,
                  3 * H * sizeof(float));
    }
    DeviceTensor dpacked(packed, dt()), dcu = UploadInts(cu), dpo(T * H * 2);
    a.cu_seqlens = static_cast<const int32_t*>(dcu.get());
    a.key_mask = nullptr;
    a.qkv = dpacked.get();
    a.out = dpo.get();
    CheckCuda(AttentionRun(a, nullptr, nullptr), "AttentionRun packed");
    std::vector<int64_t> got_rows(T);
    for (int64_t t = 0; t < T; ++t) got_rows[t] = t;
    const Tensor packed_out = dpo.Download({T, H}, dt());
    EXPECT_LT(RelError(packed_out, ref[0], H, got_rows, real_rows), Tolerance(dt()))
        << "packed d " << d << " seq " << S << " scale " << scale;
    first_rows_match(packed_out, std::vector<int64_t>(cu.begin(), cu.end() - 1), "packed");
  }
}

TEST(CudaAttention, HeadDimsAndAlignment) {
  for (int d : {16, 32, 64, 128}) EXPECT_TRUE(AttentionHeadDimSupported(d)) << d;
  for (int d : {0, 8, 48, 80, 96, 256}) EXPECT_FALSE(AttentionHeadDimSupported(d)) << d;
  alignas(16) static char buf[64];
  AttentionArgs a;
  a.batch = 1;
  a.seq = 4;
  a.num_heads = 1;
  a.head_dim = 64;
  a.scale = 0.125f;
  a.qkv = buf;
  a.out = buf;
  EXPECT_TRUE(AttentionCanImplement(a));
  a.qkv = buf + 2;  // not 16-byte aligned: cp.async needs 16-byte rows
  EXPECT_FALSE(AttentionCanImplement(a));
  a.qkv = buf;
  a.head_dim = 96;
  EXPECT_FALSE(AttentionCanImplement(a));
}

TEST_P(CudaOpTest, AttentionAllPaddingRowAveragesKeys) {
  const int B = 2, S = 19, heads = 2, d = 64, H = heads * d;
  Tensor qkv = Random({B, S, 3 * H}, rng_, dt());
  std::vector<int64_t> mask(B * S, 1);
  std::vector<int32_t> mask32(B * S, 1);
  for (int s = 0; s < S; ++s) mask[S + s] = mask32[S + s] = 0;  // batch 1: no real key
  auto ref = Reference(Fused("Attention", {{"num_heads", int64_t{heads}}}),
                       std::vector<Tensor>{qkv, Ints({B, S}, mask)});
  DeviceTensor dqkv(qkv, dt()), dmask = UploadInts(mask32), dout(int64_t{B} * S * H * 2);
  AttentionArgs a{dt(),       B,          S,       heads,
                  d,          0.125f,     nullptr, static_cast<const int32_t*>(dmask.get()),
                  dqkv.get(), dout.get(), {}};
  CheckCuda(AttentionRun(a, nullptr, nullptr), "AttentionRun");
  EXPECT_LT(RelError(dout.Download({B * S, H}, dt()), ref[0]), Tolerance(dt()));
}

TEST_P(CudaOpTest, LinearEpiloguesMatchReference) {
  cublasLtHandle_t lt = nullptr;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  const int64_t M = 37, K = 96, N = 200;
  const size_t ws_bytes = 32 << 20;
  DeviceTensor ws(ws_bytes);
  struct Case {
    std::string act;
    bool bias, residual;
  };
  for (bool exact_gelu : {false, true})
    for (bool nk : {false, true})
      for (const Case& c :
           {Case{"none", false, false}, Case{"none", true, false}, Case{"none", true, true},
            Case{"gelu", true, false}, Case{"gelu_tanh", true, false}, Case{"tanh", true, false},
            Case{"relu", false, true}, Case{"gelu", true, true}}) {
        Tensor x = Random({M, K}, rng_, dt()), w = Random({K, N}, rng_, dt(), -0.2f, 0.2f);
        Tensor b = Random({N}, rng_, dt()), r = Random({M, N}, rng_, dt());
        DeviceTensor dx(x, dt()), dw(nk ? TransposeWeight(w) : w, dt()), db(b, dt()), dr(r, dt()),
            dy(M * N * 2);
        Program p;
        p.dtype = dt();
        p.exact_gelu = exact_gelu;
        LoweredOp op;
        op.kind = OpKind::kLinear;
        op.cols = N;
        op.k = K;
        op.inputs = {0, 1, c.bias ? 2 : -1, c.residual ? 3 : -1};
        op.weight_nk = nk;
        op.activation = c.act == "none"        ? Activation::kNone
                        : c.act == "gelu"      ? Activation::kGelu
                        : c.act == "gelu_tanh" ? Activation::kGeluTanh
                        : c.act == "tanh"      ? Activation::kTanh
                                               : Activation::kRelu;
        bool extra = false;
        const GemmDesc desc = LinearGemm(p, op, M, &extra);
        auto plan = GemmPlan::Create(lt, desc, GemmAlgo{}, ws_bytes);
        ASSERT_TRUE(plan.ok()) << plan.status().ToString();
        ASSERT_TRUE((*plan)
                        ->Run(lt, dx.get(), dw.get(), c.bias ? db.get() : nullptr,
                              desc.residual ? dr.get() : nullptr, dy.get(), ws.get(), ws_bytes,
                              nullptr)
                        .ok());
        if (extra) {
          BiasActArgs e{dt(),
                        M,
                        static_cast<int>(N),
                        op.activation,
                        dy.get(),
                        nullptr,
                        c.residual ? dr.get() : nullptr,
                        dy.get()};
          CheckCuda(BiasActRun(e, nullptr, nullptr), "BiasActRun");
        }
        auto ref =
            Reference(Fused("Linear", {{"activation", c.act}}),
                      std::vector<Tensor>{x, w, c.bias ? b : Tensor(), c.residual ? r : Tensor()});
        // The GEMM output is rounded to the device type before a separate epilogue: one more
        // rounding.
        EXPECT_LT(RelError(dy.Download({M, N}, dt()), ref[0]), Tolerance(dt()))
            << c.act << " bias " << c.bias << " residual " << c.residual << " W[N,K] " << nk
            << " exact gelu " << exact_gelu << " epilogue " << static_cast<int>(desc.epilogue);
        // Erf GELU with a bias and no residual: the fused tanh-form epilogue unless exact.
        if (c.act == "gelu" && c.bias && !c.residual) {
          EXPECT_EQ(extra, exact_gelu);
          EXPECT_EQ(desc.epilogue == GemmEpilogue::kBiasGeluTanh, !exact_gelu);
        }
      }
  cublasLtDestroy(lt);
}

TEST_P(CudaOpTest, TunedGemmIsUsable) {
  cublasLtHandle_t lt = nullptr;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  for (bool nk : {false, true}) {
    GemmDesc d{dt(), 128, 768, 3072, GemmEpilogue::kBias, false, nk};
    auto algo = TuneGemm(lt, d, 32 << 20, nullptr);
    ASSERT_TRUE(algo.ok()) << algo.status().ToString();
    EXPECT_GT(algo->time_us, 0.f);
    GemmAlgo round;
    ASSERT_TRUE(GemmAlgo::FromHex(algo->ToHex(), &round));
    auto plan = GemmPlan::Create(lt, d, round, 32 << 20);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(std::memcmp(&(*plan)->algo(), &algo->algo, sizeof(algo->algo)), 0);
  }
  cublasLtDestroy(lt);
}

// The full tactic search: it considers more than the heuristic's candidates, finds nothing slower
// than their best (both timed in the same rounds), and the configuration it picks runs and matches
// the reference, for few rows (K split variants) and many, with a residual and with GELU.
TEST_P(CudaOpTest, FullTacticSearchPicksAWorkingConfiguration) {
  cublasLtHandle_t lt = nullptr;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  const size_t ws_bytes = 32 << 20;
  DeviceTensor ws(ws_bytes);
  struct Case {
    int64_t m, k, n;
    bool gelu, residual;
  };
  for (const Case& c : {Case{96, 1024, 512, false, true}, Case{1000, 256, 384, true, false}}) {
    GemmDesc d{
        dt(),       c.m,  c.n, c.k, c.gelu ? GemmEpilogue::kBiasGeluTanh : GemmEpilogue::kBias,
        c.residual, false};
    TuneReport report;
    auto algo = TuneGemm(lt, d, ws_bytes, nullptr, TacticSearch::kFull, &report);
    ASSERT_TRUE(algo.ok()) << algo.status().ToString();
    EXPECT_GT(report.heuristic_candidates, 0u);
    EXPECT_GT(report.candidates, report.heuristic_candidates) << d.Key();
    EXPECT_GT(report.screened, report.heuristic_candidates) << d.Key();
    ASSERT_TRUE(report.heuristic_best.valid);
    EXPECT_GT(algo->time_us, 0.f);
    EXPECT_LE(algo->time_us, report.heuristic_best.time_us);
    auto plan = GemmPlan::Create(lt, d, *algo, ws_bytes);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(std::memcmp(&(*plan)->algo(), &algo->algo, sizeof(algo->algo)), 0);
    Tensor x = Random({c.m, c.k}, rng_, dt()), w = Random({c.k, c.n}, rng_, dt(), -0.1f, 0.1f);
    Tensor b = Random({c.n}, rng_, dt()), r = Random({c.m, c.n}, rng_, dt());
    DeviceTensor dx(x, dt()), dw(w, dt()), db(b, dt()), dr(r, dt()), dy(c.m * c.n * 2);
    ASSERT_TRUE((*plan)
                    ->Run(lt, dx.get(), dw.get(), db.get(), c.residual ? dr.get() : nullptr,
                          dy.get(), ws.get(), ws_bytes, nullptr)
                    .ok());
    auto ref =
        Reference(Fused("Linear", {{"activation", std::string(c.gelu ? "gelu_tanh" : "none")}}),
                  std::vector<Tensor>{x, w, b, c.residual ? r : Tensor()});
    EXPECT_LT(RelError(dy.Download({c.m, c.n}, dt()), ref[0]), Tolerance(dt())) << d.Key();
  }
  cublasLtDestroy(lt);
}

// The quick screen of a full search: candidates that hold the stream longer measure longer, across
// batches of candidates, and a failing one gets +infinity.
TEST(CudaTiming, ScreenRanksCandidatesByDeviceTime) {
  SURGE_SKIP_WITHOUT_GPU();
  std::vector<std::function<Status()>> runs;
  for (int i = 0; i < 70; ++i) {
    const int64_t ns = i % 2 == 0 ? 40000 : 10000;
    if (i == 5) {
      runs.push_back([] { return UnimplementedError("refused"); });
      continue;
    }
    runs.push_back([ns]() -> Status {
      if (DelayRun({ns}, nullptr, nullptr) != cudaSuccess) return InternalError("DelayRun failed");
      return Status::Ok();
    });
  }
  auto us = ScreenCandidates(runs, nullptr);
  ASSERT_TRUE(us.ok()) << us.status().ToString();
  ASSERT_EQ(us->size(), runs.size());
  EXPECT_TRUE(std::isinf((*us)[5]));
  for (size_t i = 0; i + 1 < runs.size(); i += 2) {
    if (i + 1 == 5) continue;
    EXPECT_GT((*us)[i], 2.f * (*us)[i + 1]) << i;
    EXPECT_GT((*us)[i + 1], 5.f) << i + 1;
  }
}

// Tactic timing in rounds: each candidate's median is its own (a kernel that holds the stream four
// times longer measures longer), a candidate whose call fails is set apart with its status, and the
// single-candidate form returns that status.
TEST(CudaTiming, InterleavedSamplesKeepEachCandidateApart) {
  SURGE_SKIP_WITHOUT_GPU();
  auto delay = [](int64_t ns) {
    return [ns]() -> Status {
      if (DelayRun({ns}, nullptr, nullptr) != cudaSuccess) return InternalError("DelayRun failed");
      return Status::Ok();
    };
  };
  int calls = 0;
  auto refused = [&calls]() -> Status {
    ++calls;
    return UnimplementedError("refused");
  };
  std::vector<Status> failures;
  auto us = TimeInterleaved({delay(80000), refused, delay(20000)}, nullptr, &failures);
  ASSERT_TRUE(us.ok()) << us.status().ToString();
  ASSERT_EQ(us->size(), 3u);
  ASSERT_EQ(failures.size(), 3u);
  EXPECT_TRUE(failures[0].ok());
  EXPECT_EQ(failures[1].code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(failures[2].ok());
  EXPECT_EQ(calls, 1);  // not called again once it failed
  EXPECT_TRUE(std::isinf((*us)[1]));
  EXPECT_TRUE(std::isfinite((*us)[0]) && std::isfinite((*us)[2]));
  EXPECT_GT((*us)[2], 0.f);
  EXPECT_GT((*us)[0], 2.f * (*us)[2]);
  auto one = TimeBackToBack(refused, nullptr);
  EXPECT_FALSE(one.ok());
  EXPECT_EQ(one.status().code(), StatusCode::kUnimplemented);
}

TEST_P(CudaOpTest, GeluStandalone) {
  const int64_t rows = 13;
  for (int64_t cols : {301, 1024})
    for (std::string approx : {"none", "tanh"}) {
      Tensor x = Random({rows, cols}, rng_, dt(), -4.f, 4.f);
      DeviceTensor dx(x, dt()), dy(rows * cols * 2);
      BiasActArgs a{dt(),
                    rows,
                    static_cast<int>(cols),
                    approx == "tanh" ? Activation::kGeluTanh : Activation::kGelu,
                    dx.get(),
                    nullptr,
                    nullptr,
                    dy.get()};
      CheckCuda(BiasActRun(a, nullptr, nullptr), "BiasActRun");
      auto ref = Reference(Fused("Gelu", {{"approximate", approx}}), std::vector<Tensor>{x});
      EXPECT_LT(RelError(dy.Download({rows, cols}, dt()), ref[0]), Tolerance(dt())) << approx;
    }
}

TEST_P(CudaOpTest, L2NormalizeBothEpsilonModes) {
  // Embedding widths (768, 1024), an odd one (37); row 0 is all zeros, where epsilon decides.
  for (int cols : {768, 1024, 37}) {
    for (bool eps_max : {false, true}) {
      const int64_t rows = 9;
      Tensor x = Random({rows, cols}, rng_, dt(), -6.f, 6.f);
      for (int c = 0; c < cols; ++c) x.data_as<float>()[c] = 0.f;
      const float eps = eps_max ? 1e-3f : 1e-12f;
      DeviceTensor dx(x, dt()), dy(rows * cols * 2);
      L2NormalizeArgs a{dt(), rows, cols, dx.get(), dy.get(), eps, eps_max};
      ASSERT_TRUE(L2NormalizeCanImplement(a));
      CheckCuda(L2NormalizeRun(a, nullptr, nullptr), "L2NormalizeRun");
      auto ref =
          Reference(Fused("L2Normalize", {{"epsilon", static_cast<double>(eps)},
                                          {"eps_mode", std::string(eps_max ? "max" : "add")}}),
                    std::vector<Tensor>{x});
      Tensor y = dy.Download({rows, cols}, dt());
      EXPECT_LT(RelError(y, ref[0]), Tolerance(dt())) << cols << " max " << eps_max;
      for (int c = 0; c < cols; ++c) ASSERT_EQ(y.data_as<float>()[c], 0.f) << "zero row, col " << c;
    }
  }
}

TEST_P(CudaOpTest, GatherAndScatterRows) {
  // 2-, 4- and 16-byte word paths: 3 columns (a 3-label token head), 70, 64.
  for (int64_t cols : {int64_t{3}, int64_t{70}, int64_t{64}}) {
    const int64_t rows = 11;
    Tensor x = Random({rows, cols}, rng_, dt());
    std::vector<int32_t> index = {10, 0, 3, 7};
    DeviceTensor dx(x, dt()), di = UploadInts(index), dg(4 * cols * 2), ds(rows * cols * 2);
    RowMoveArgs g{4, 0, cols * 2, static_cast<const int32_t*>(di.get()), dx.get(), dg.get()};
    ASSERT_TRUE(RowMoveCanImplement(g));
    CheckCuda(GatherRowsRun(g, nullptr, nullptr), "GatherRowsRun");
    std::vector<int64_t> src_rows = {10, 0, 3, 7}, dst_rows = {0, 1, 2, 3};
    EXPECT_EQ(RelError(dg.Download({4, cols}, dt()), x, cols, dst_rows, src_rows), 0.0) << cols;
    RowMoveArgs s{4, rows, cols * 2, static_cast<const int32_t*>(di.get()), dg.get(), ds.get()};
    CheckCuda(ScatterRowsRun(s, nullptr, nullptr), "ScatterRowsRun");
    Tensor back = ds.Download({rows, cols}, dt());
    EXPECT_EQ(RelError(back, x, cols, src_rows, src_rows), 0.0) << cols;
    for (int64_t c = 0; c < cols; ++c) {
      EXPECT_EQ(back.data_as<float>()[1 * cols + c], 0.f);  // row 1 was not scattered: zero
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaOpTest, ::testing::Values(DataType::kF16, DataType::kBF16),
                         [](const auto& info) {
                           return info.param == DataType::kF16 ? "fp16" : "bf16";
                         });

}  // namespace
}  // namespace surge::engine::cuda::testing
