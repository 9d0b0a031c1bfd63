// Every fused CPU kernel against the reference evaluator, on random shapes and values, odd sizes,
// padding masks, and every ISA path this CPU has.
#include <cmath>

#include "op_harness.h"

namespace surge::engine::cpu {
namespace {

using namespace testing;

std::string Tag(Isa isa, const std::string& s) { return std::string(IsaName(isa)) + " " + s; }

TEST(CpuKernels, IsaDetectionIsConsistent) {
  const Isa best = DetectIsa();
  EXPECT_TRUE(CpuSupports(best));
  EXPECT_LE(static_cast<int>(DefaultIsa()), static_cast<int>(best));
  EXPECT_EQ(*ParseIsa("avx2"), Isa::kAvx2);
  EXPECT_FALSE(ParseIsa("sse9").ok());
  if (AvailableIsas().empty()) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
}

TEST(CpuKernels, LayerNormMatchesReference) {
  Rng rng(1);
  for (Isa isa : AvailableIsas()) {
    for (int64_t h : {40, 64, 768, 7, 1}) {
      for (Shape lead : {Shape{1}, Shape{3, 7}, Shape{2, 33}}) {
        Shape xs = lead;
        xs.push_back(h);
        ir::Node n = SurgeNode("LayerNorm", {{"epsilon", 1e-5}}, 3);
        // A large common offset checks the variance is not computed as E[x^2]-mean^2.
        Tensor x = rng.Floats(xs, 2.0f);
        for (float& v : x.span<float>()) v += 30.0f;
        CheckOp(
            n, {x, rng.Floats({h}), rng.Floats({h})},
            [&](auto in, auto* out) { return RunLayerNormNode(isa, n, in, OwnedOutputs(), out); },
            2e-5, Tag(isa, "LayerNorm " + ShapeToString(xs)));
      }
    }
  }
}

TEST(CpuKernels, SkipLayerNormMatchesReference) {
  Rng rng(2);
  for (Isa isa : AvailableIsas()) {
    for (int64_t h : {40, 768, 17}) {
      for (bool bias : {false, true}) {
        for (int outs : {1, 2}) {
          Shape xs{2, 7, h};
          ir::Node n = SurgeNode("SkipLayerNorm", {{"epsilon", 1e-12}}, bias ? 5 : 4, outs);
          std::vector<Tensor> in{rng.Floats(xs), rng.Floats(xs), rng.Floats({h}), rng.Floats({h})};
          if (bias) in.push_back(rng.Floats({h}));
          CheckOp(
              n, in,
              [&](auto i, auto* out) {
                return RunSkipLayerNormNode(isa, n, i, OwnedOutputs(), out);
              },
              2e-5, Tag(isa, fmt::format("SkipLayerNorm h={} bias={} outs={}", h, bias, outs)));
        }
      }
    }
  }
}

TEST(CpuKernels, SkipLayerNormInPlace) {
  Rng rng(3);
  for (Isa isa : AvailableIsas()) {
    const int64_t h = 40;
    Tensor x = rng.Floats({5, h}), skip = rng.Floats({5, h});
    Tensor g = rng.Floats({h}), b = rng.Floats({h});
    ir::Node n = SurgeNode("SkipLayerNorm", {{"epsilon", 1e-5}}, 4);
    std::vector<Tensor> ref;
    std::vector<Tensor> ins{x, skip, g, b};
    ASSERT_TRUE(ir::EvalNode(n, ins, &ref).ok());
    Tensor y = x.Clone();  // y aliases X
    SkipLayerNormKernel(isa, y.data_as<float>(), skip.data_as<float>(), nullptr, g.data_as<float>(),
                        b.data_as<float>(), y.data_as<float>(), nullptr, 5, h, 1e-5f);
    ExpectClose(y, ref[0], 2e-5, Tag(isa, "in place"));
  }
}

TEST(CpuKernels, GeluMatchesReference) {
  Rng rng(4);
  for (Isa isa : AvailableIsas()) {
    for (std::string mode : {"none", "tanh"}) {
      for (int64_t n_el : {1, 15, 16, 17, 1000}) {
        ir::Node n = SurgeNode("Gelu", {{"approximate", mode}}, 1);
        CheckOp(
            n, {rng.Floats({n_el}, 6.0f)},
            [&](auto in, auto* out) { return RunGeluNode(isa, n, in, OwnedOutputs(), out); }, 1e-6,
            Tag(isa, "Gelu " + mode));
      }
    }
  }
}

TEST(CpuKernels, GeluErfIsRelativelyAccurateForNegativeInputs) {
  // GELU(x) for x in [-9, 0) is tiny; the erfc form keeps relative accuracy there.
  for (Isa isa : AvailableIsas()) {
    Tensor x(DType::kFloat32, {901});
    for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = -9.0f + 0.01f * i - 1e-3f;
    Tensor y(DType::kFloat32, {901});
    GeluKernel(isa, x.data_as<float>(), y.data_as<float>(), x.numel(), false);
    double worst = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double xv = x.data_as<float>()[i];
      const double ref = 0.5 * xv * std::erfc(-xv / std::sqrt(2.0));
      worst = std::max(worst, std::abs(y.data_as<float>()[i] - ref) / std::abs(ref));
    }
    EXPECT_LT(worst, 2e-6) << IsaName(isa);
  }
}

TEST(CpuKernels, BiasActivationMatchesLinearEpilogue) {
  Rng rng(5);
  for (Isa isa : AvailableIsas()) {
    for (Activation act : {Activation::kNone, Activation::kGelu, Activation::kGeluTanh,
                           Activation::kTanh, Activation::kRelu}) {
      const int64_t rows = 3, n = 37;
      Tensor y = rng.Floats({rows, n}, 3.0f), bias = rng.Floats({n}), res = rng.Floats({rows, n});
      Tensor expect = y.Clone();
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          double v = expect.data_as<float>()[r * n + j] + bias.data_as<float>()[j];
          switch (act) {
            case Activation::kGelu:
              v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
              break;
            case Activation::kGeluTanh:
              v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
              break;
            case Activation::kTanh:
              v = std::tanh(v);
              break;
            case Activation::kRelu:
              v = v > 0 ? v : 0;
              break;
            case Activation::kNone:
              break;
          }
          expect.data_as<float>()[r * n + j] =
              static_cast<float>(v + res.data_as<float>()[r * n + j]);
        }
      }
      BiasActivationKernel(isa, y.data_as<float>(), bias.data_as<float>(), res.data_as<float>(),
                           rows, n, act);
      ExpectClose(y, expect, 1e-6, Tag(isa, fmt::format("bias+act {}", static_cast<int>(act))));
    }
  }
}

TEST(CpuKernels, EmbedLayerNormMatchesReference) {
  Rng rng(6);
  for (Isa isa : AvailableIsas()) {
    for (int64_t h : {40, 64}) {
      for (std::string mode : {"arange", "roberta"}) {
        for (bool types : {false, true}) {
          const int64_t b = 3, s = 7, vocab = 50;
          Tensor ids = rng.Ints({b, s}, 0, vocab - 1);
          // Padding (id 1 for roberta) at the end of the second sequence.
          for (int64_t j = 4; j < s; ++j) ids.data_as<int64_t>()[s + j] = 1;
          ir::Node n = SurgeNode(
              "EmbedLayerNorm",
              {{"epsilon", 1e-12}, {"position_mode", mode}, {"padding_idx", int64_t{1}}}, 8);
          std::vector<Tensor> in{ids,
                                 types ? rng.Ints({b, s}, 0, 1) : Tensor(),
                                 Tensor(),
                                 rng.Floats({vocab, h}),
                                 rng.Floats({s + 2, h}),
                                 types ? rng.Floats({2, h}) : Tensor(),
                                 rng.Floats({h}),
                                 rng.Floats({h})};
          CheckOp(
              n, in,
              [&](auto i, auto* out) {
                return RunEmbedLayerNormNode(isa, n, i, OwnedOutputs(), out);
              },
              2e-5, Tag(isa, fmt::format("EmbedLayerNorm h={} {} types={}", h, mode, types)));
        }
      }
    }
  }
}

TEST(CpuKernels, EmbedLayerNormRejectsOutOfRangeIds) {
  Rng rng(7);
  ir::Node n = SurgeNode("EmbedLayerNorm", {}, 8);
  Tensor ids = rng.Ints({1, 3}, 0, 9);
  ids.data_as<int64_t>()[2] = 10;
  Tensor word = rng.Floats({10, 8}), pos = rng.Floats({4, 8}), g = rng.Floats({8}),
         b = rng.Floats({8});
  std::vector<const Tensor*> in{&ids, nullptr, nullptr, &word, &pos, nullptr, &g, &b};
  std::vector<Tensor> out;
  Status s = RunEmbedLayerNormNode(DetectIsa(), n, in, OwnedOutputs(), &out);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
  EXPECT_NE(s.message().find("input id 10"), std::string::npos) << s.ToString();
  ids.data_as<int64_t>()[2] = 3;
  Tensor long_ids = rng.Ints({1, 5}, 0, 9);  // 5 positions, table has 4
  in[0] = &long_ids;
  s = RunEmbedLayerNormNode(DetectIsa(), n, in, OwnedOutputs(), &out);
  EXPECT_NE(s.message().find("position id"), std::string::npos) << s.ToString();
}

// Mask with `lengths[b]` real tokens at the front of each sequence.
Tensor PaddingMask(const std::vector<int64_t>& lengths, int64_t seq) {
  Tensor m(DType::kInt64, {static_cast<int64_t>(lengths.size()), seq});
  for (size_t b = 0; b < lengths.size(); ++b) {
    for (int64_t s = 0; s < lengths[b]; ++s) m.data_as<int64_t>()[b * seq + s] = 1;
  }
  return m;
}

TEST(CpuKernels, AttentionMatchesReference) {
  Rng rng(8);
  struct Case {
    int64_t seq, hidden, heads;
    std::vector<int64_t> lengths;  // empty: no mask
  };
  const std::vector<Case> cases = {
      {1, 40, 2, {}},     {7, 40, 4, {7, 3}},   {33, 64, 2, {33, 1, 20}},
      {16, 64, 4, {}},    {33, 40, 1, {5, 33}}, {128, 96, 2, {128, 77}},
      {7, 24, 3, {0, 7}}, {20, 36, 3, {12}},    {65, 128, 2, {65, 64, 2}},
  };
  for (Isa isa : AvailableIsas()) {
    for (const Case& c : cases) {
      const int64_t b = c.lengths.empty() ? 2 : static_cast<int64_t>(c.lengths.size());
      ir::Node n = SurgeNode("Attention", {{"num_heads", c.heads}}, c.lengths.empty() ? 1 : 2);
      std::vector<Tensor> in{rng.Floats({b, c.seq, 3 * c.hidden}, 2.0f)};
      if (!c.lengths.empty()) in.push_back(PaddingMask(c.lengths, c.seq));
      CheckOp(
          n, in,
          [&](auto i, auto* out) { return RunAttentionNode(isa, n, i, OwnedOutputs(), out); }, 2e-5,
          Tag(isa, fmt::format("Attention S={} H={} heads={} masked={}", c.seq, c.hidden, c.heads,
                               !c.lengths.empty())));
    }
  }
}

TEST(CpuKernels, AttentionMaskDTypesAndScale) {
  Rng rng(9);
  for (Isa isa : AvailableIsas()) {
    Tensor qkv = rng.Floats({2, 9, 3 * 40});
    Tensor mask_f(DType::kFloat32, {2, 9});
    Tensor mask_i(DType::kInt32, {2, 9});
    for (int64_t i = 0; i < 18; ++i) {
      const bool real = (i % 9) < (i < 9 ? 9 : 4);
      mask_f.data_as<float>()[i] = real ? 1.0f : 0.0f;
      mask_i.data_as<int32_t>()[i] = real ? 1 : 0;
    }
    ir::Node n = SurgeNode("Attention", {{"num_heads", int64_t{5}}, {"scale", 0.3}}, 2);
    for (const Tensor& m : {mask_f, mask_i}) {
      CheckOp(
          n, {qkv, m},
          [&](auto i, auto* out) { return RunAttentionNode(isa, n, i, OwnedOutputs(), out); }, 2e-5,
          Tag(isa, std::string("Attention mask ") + std::string(DTypeName(m.dtype()))));
    }
  }
}

TEST(CpuKernels, FusedNodesRejectBadInputs) {
  Rng rng(10);
  const Isa isa = DetectIsa();
  std::vector<Tensor> out;
  ir::Node att = SurgeNode("Attention", {{"num_heads", int64_t{3}}}, 1);
  Tensor qkv = rng.Floats({1, 2, 3 * 40});
  std::vector<const Tensor*> in{&qkv};
  EXPECT_FALSE(RunAttentionNode(isa, att, in, OwnedOutputs(), &out).ok());
  Tensor ints(DType::kInt64, {1, 2, 120});
  in = {&ints};
  att.attrs["num_heads"] = int64_t{2};
  Status s = RunAttentionNode(isa, att, in, OwnedOutputs(), &out);
  EXPECT_NE(s.message().find("float32"), std::string::npos) << s.ToString();
  ir::Node ln = SurgeNode("LayerNorm", {}, 3);
  Tensor x = rng.Floats({2, 8}), g = rng.Floats({7}), b = rng.Floats({8});
  in = {&x, &g, &b};
  s = RunLayerNormNode(isa, ln, in, OwnedOutputs(), &out);
  EXPECT_NE(s.message().find("gamma"), std::string::npos) << s.ToString();
  in = {&x, &b};
  EXPECT_FALSE(RunLayerNormNode(isa, ln, in, OwnedOutputs(), &out).ok());
  ir::Node gelu = SurgeNode("Gelu", {{"approximate", std::string("quick")}}, 1);
  in = {&x};
  EXPECT_FALSE(RunGeluNode(isa, gelu, in, OwnedOutputs(), &out).ok());
}

TEST(CpuKernels, LinearMatchesReference) {
  Rng rng(11);
  struct Case {
    int64_t m, k, n;
    Activation act;
    bool bias, residual;
  };
  const std::vector<Case> cases = {
      {1, 40, 120, Activation::kNone, true, false},
      {7, 40, 40, Activation::kGelu, true, true},
      {33, 64, 17, Activation::kGeluTanh, true, false},
      {16, 768, 96, Activation::kRelu, false, false},
      {5, 33, 64, Activation::kTanh, true, true},
      {64, 128, 512, Activation::kGelu, true, false},
  };
  static constexpr const char* kActs[] = {"none", "gelu", "gelu_tanh", "tanh", "relu"};
  for (const Case& c : cases) {
    for (int64_t opt_m : {int64_t{1}, int64_t{1024}}) {
      LinearSpec spec{c.k, c.n, c.bias, c.residual, c.act};
      Tensor w = rng.Floats({c.k, c.n}, 0.2f);
      Result<PackedWeights> pw = PackLinearWeights(spec, w.data_as<float>(), opt_m);
      ASSERT_TRUE(pw.ok()) << pw.status().ToString();
      AlignedBuffer buf(pw->data.size());
      std::memcpy(buf.data(), pw->data.data(), pw->data.size());
      auto kernel = LinearKernel::Create(spec, pw->desc, buf.data(), pw->data.size());
      ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
      ir::Node n =
          SurgeNode("Linear", {{"activation", std::string(kActs[static_cast<int>(c.act)])}}, 4);
      std::vector<Tensor> in{rng.Floats({c.m, c.k}), w, c.bias ? rng.Floats({c.n}) : Tensor(),
                             c.residual ? rng.Floats({c.m, c.n}) : Tensor()};
      CheckOp(
          n, in,
          [&](auto i, auto* out) { return RunLinearNode(n, **kernel, i, OwnedOutputs(), out); },
          1e-5,
          fmt::format("Linear {}x{}x{} act={} packed_at={} ({})", c.m, c.k, c.n,
                      kActs[static_cast<int>(c.act)], opt_m,
                      pw->desc.empty() ? "plain" : "packed"));
      // A different M than the packing M reuses the packed weights.
      std::vector<Tensor> in2{rng.Floats({3, 2, c.k}), w, in[2],
                              c.residual ? rng.Floats({3, 2, c.n}) : Tensor()};
      CheckOp(
          n, in2,
          [&](auto i, auto* out) { return RunLinearNode(n, **kernel, i, OwnedOutputs(), out); },
          1e-5, "Linear rank-3 input");
    }
  }
}

TEST(CpuKernels, LinearRejectsCorruptPackedDescriptors) {
  LinearSpec spec{8, 8, false, false, Activation::kNone};
  std::vector<float> w(64, 0.5f);
  auto bad = LinearKernel::Create(spec, std::string(7, 'x'), w.data(), w.size() * 4);
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  auto short_data = LinearKernel::Create(spec, "", w.data(), 10);
  EXPECT_EQ(short_data.status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace surge::engine::cpu
