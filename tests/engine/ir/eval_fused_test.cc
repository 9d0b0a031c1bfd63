#include <cmath>

#include "eval_test_util.h"

namespace surge::engine::ir {
namespace {

using namespace testing;

Node Fused(std::string op, std::map<std::string, Attribute> attrs = {}, int outs = 1) {
  return MakeNode(std::move(op), std::move(attrs), std::string(kSurgeDomain), outs);
}

double Gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

TEST(EvalFused, LinearBiasActivationResidual) {
  Tensor x = F32({1, 2, 2}, {1, 2, -1, 0.5f});
  Tensor w = F32({2, 3}, {1, 0, 1, 0, 1, -1});
  Tensor b = F32({3}, {0.5f, -0.5f, 0});
  Tensor r = F32({1, 2, 3}, {1, 1, 1, 2, 2, 2});
  // xW = [[1,2,-1],[-1,0.5,-1.5]]; + b = [[1.5,1.5,-1],[-0.5,0,-1.5]].
  ExpectNear(Eval(Fused("Linear"), {x, w})[0], {1, 2, 3}, {1, 2, -1, -1, 0.5, -1.5});
  ExpectNear(Eval(Fused("Linear"), {x, w, b, r})[0], {1, 2, 3}, {2.5, 2.5, 0, 1.5, 2, 0.5});
  ExpectNear(Eval(Fused("Linear", {{"activation", std::string("relu")}}), {x, w, b})[0], {1, 2, 3},
             {1.5, 1.5, 0, 0, 0, 0});
  ExpectNear(Eval(Fused("Linear", {{"activation", std::string("gelu")}}), {x, w, b, r})[0],
             {1, 2, 3},
             {Gelu(1.5) + 1, Gelu(1.5) + 1, Gelu(-1) + 1, Gelu(-0.5) + 2, 2, Gelu(-1.5) + 2});
  ExpectNear(
      Eval(Fused("Linear", {{"activation", std::string("tanh")}}), {x, w})[0], {1, 2, 3},
      {std::tanh(1), std::tanh(2), std::tanh(-1), std::tanh(-1), std::tanh(0.5), std::tanh(-1.5)});
  auto gt = Eval(Fused("Linear", {{"activation", std::string("gelu_tanh")}}), {x, w, b});
  EXPECT_NEAR(gt[0].GetDouble(0),
              0.5 * 1.5 * (1 + std::tanh(0.7978845608 * (1.5 + 0.044715 * 3.375))), 1e-6);
}

TEST(EvalFused, LinearBadInputs) {
  Tensor x = F32({2, 2}, {1, 2, 3, 4});
  Status s = EvalError(Fused("Linear"), {x, F32({3, 1}, {1, 2, 3})});
  EXPECT_NE(s.message().find("X[...,K]"), std::string::npos) << s.ToString();
  ExpectEvalFails(Fused("Linear"), {x, F32({2, 1}, {1, 2}), F32({2}, {1, 2})});
  ExpectEvalFails(Fused("Linear"), {x, F32({2, 1}, {1, 2}), Tensor(), F32({2, 2}, {1, 2, 3, 4})});
  s = EvalError(Fused("Linear", {{"activation", std::string("swish")}}), {x, F32({2, 1}, {1, 2})});
  EXPECT_NE(s.message().find("swish"), std::string::npos);
}

TEST(EvalFused, GeluModes) {
  ExpectNear(Eval(Fused("Gelu"), {F32({2}, {1, -2})})[0], {2}, {Gelu(1), Gelu(-2)});
  auto t = Eval(Fused("Gelu", {{"approximate", std::string("tanh")}}), {F32({1}, {1})});
  EXPECT_NEAR(t[0].GetDouble(0), 0.8411919906, 1e-6);
  ExpectEvalFails(Fused("Gelu", {{"approximate", std::string("fast")}}), {F32({1}, {1})});
}

TEST(EvalFused, LayerNormAndSkipLayerNorm) {
  Tensor x = F32({2, 2}, {1, 3, 2, 2});
  Tensor g = F32({2}, {2, 1});
  Tensor be = F32({2}, {0.5f, 0});
  ExpectNear(Eval(Fused("LayerNorm", {{"epsilon", 1e-6}}), {x, g, be})[0], {2, 2},
             {-1.5, 1, 0.5, 0}, 1e-4);
  // skip + bias make rows [1+0+1, 3+2-1] = [2,4] and [2+1+1, 2+1-1] = [4,2].
  auto s = Eval(Fused("SkipLayerNorm", {{"epsilon", 0.0}}, 2),
                {x, F32({2, 2}, {0, 2, 1, 1}), g, be, F32({2}, {1, -1})});
  ExpectNear(s[0], {2, 2}, {-1.5, 1, 2.5, -1}, 1e-4);
  ExpectNear(s[1], {2, 2}, {2, 4, 4, 2});
  Status e = EvalError(Fused("SkipLayerNorm"), {x, F32({1, 2}, {0, 0}), g, be});
  EXPECT_NE(e.message().find("skip"), std::string::npos);
  ExpectEvalFails(Fused("LayerNorm"), {x, F32({3}, {1, 1, 1}), be});
}

TEST(EvalFused, L2NormalizeAddAndMaxEpsilon) {
  // Rows [3,4] (norm 5) and [0,0] (norm 0: the epsilon decides).
  Tensor x = F32({2, 2}, {3, 4, 0, 0});
  ExpectNear(Eval(Fused("L2Normalize", {{"epsilon", 11.0}}), {x})[0], {2, 2},
             {3 / 6.0, 4 / 6.0, 0, 0});
  ExpectNear(
      Eval(Fused("L2Normalize", {{"epsilon", 6.0}, {"eps_mode", std::string("max")}}), {x})[0],
      {2, 2}, {0.5, 4 / 6.0, 0, 0});
  ExpectNear(Eval(Fused("L2Normalize", {{"eps_mode", std::string("max")}}), {x})[0], {2, 2},
             {0.6, 0.8, 0, 0});
  Status s = EvalError(Fused("L2Normalize", {{"eps_mode", std::string("clip")}}), {x});
  EXPECT_NE(s.message().find("eps_mode"), std::string::npos) << s.ToString();
}

TEST(EvalFused, EmbedLayerNormArangeAndRobertaPositions) {
  // H = 2; word rows make distinct sums; LayerNorm of [a, b] is [-1, 1] when a < b.
  Tensor word = F32({4, 2}, {0, 1, 0, 2, 5, 0, 1, 1});
  Tensor pos = F32({4, 2}, {0, 0, 0, 10, 0, 20, 30, 0});
  Tensor type = F32({2, 2}, {0, 0, 100, 0});
  Tensor g = F32({2}, {1, 1});
  Tensor be = F32({2}, {0, 0});
  Tensor ids = I64({1, 3}, {0, 1, 2});
  // arange: rows [0,1]+[0,0], [0,2]+[0,10], [5,0]+[0,20] -> all "a < b".
  auto a = Eval(Fused("EmbedLayerNorm", {{"epsilon", 0.0}}),
                {ids, Tensor(), Tensor(), word, pos, Tensor(), g, be});
  ExpectNear(a[0], {1, 3, 2}, {-1, 1, -1, 1, -1, 1}, 1e-4);
  // token type 1 adds 100 to the first column of the last token.
  auto t = Eval(Fused("EmbedLayerNorm", {{"epsilon", 0.0}}),
                {ids, I64({1, 3}, {0, 0, 1}), Tensor(), word, pos, type, g, be});
  ExpectNear(t[0], {1, 3, 2}, {-1, 1, -1, 1, 1, -1}, 1e-4);
  // roberta with padding_idx 1: ids [0, 3, 1] -> positions [2, 3, 1]:
  // rows [0,1]+[0,20], [1,1]+[30,0], [0,2]+[0,10].
  auto r = Eval(Fused("EmbedLayerNorm", {{"epsilon", 0.0},
                                         {"position_mode", std::string("roberta")},
                                         {"padding_idx", int64_t{1}}}),
                {I64({1, 3}, {0, 3, 1}), Tensor(), Tensor(), word, pos, Tensor(), g, be});
  ExpectNear(r[0], {1, 3, 2}, {-1, 1, 1, -1, -1, 1}, 1e-4);
  // explicit position_ids win.
  auto p = Eval(Fused("EmbedLayerNorm", {{"epsilon", 0.0}}),
                {I64({1, 1}, {2}), Tensor(), I64({1, 1}, {3}), word, pos, Tensor(), g, be});
  ExpectNear(p[0], {1, 1, 2}, {1, -1}, 1e-4);
}

TEST(EvalFused, EmbedLayerNormBadIds) {
  Tensor word = F32({4, 2}, std::vector<float>(8, 1));
  Tensor pos = F32({2, 2}, std::vector<float>(4, 1));
  Tensor g = F32({2}, {1, 1}), be = F32({2}, {0, 0});
  Status s = EvalError(Fused("EmbedLayerNorm"),
                       {I64({1, 2}, {0, 4}), Tensor(), Tensor(), word, pos, Tensor(), g, be});
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("input id 4"), std::string::npos) << s.ToString();
  s = EvalError(Fused("EmbedLayerNorm"),
                {I64({1, 3}, {0, 1, 2}), Tensor(), Tensor(), word, pos, Tensor(), g, be});
  EXPECT_NE(s.message().find("position id 2"), std::string::npos) << s.ToString();
  ExpectEvalFails(Fused("EmbedLayerNorm"),
                  {F32({1, 1}, {0}), Tensor(), Tensor(), word, pos, Tensor(), g, be});
}

TEST(EvalFused, AttentionMasksPaddedKeys) {
  // B=1, S=3, H=2, one head: the last key is padding, so queries see keys 0 and 1 only.
  // K rows: k0=[1,0], k1=[0,1]; q0=[1,0] -> scores [1,0]*scale.
  const double scale = 1 / std::sqrt(2.0);
  Tensor qkv = F32({1, 3, 6}, {1, 0, 1, 0, 10, 20,  //
                               0, 0, 0, 1, 30, 40,  //
                               0, 0, 9, 9, 99, 99});
  auto out = Eval(Fused("Attention", {{"num_heads", int64_t{1}}}), {qkv, I64({1, 3}, {1, 1, 0})});
  const double p0 = std::exp(scale) / (std::exp(scale) + 1);
  ExpectNear(out[0], {1, 3, 2}, {p0 * 10 + (1 - p0) * 30, p0 * 20 + (1 - p0) * 40, 20, 30, 20, 30});
  // Without a mask all three keys count.
  auto all = Eval(Fused("Attention", {{"num_heads", int64_t{1}}, {"scale", 0.0}}), {qkv});
  ExpectNear(all[0], {1, 3, 2},
             {(10 + 30 + 99) / 3.0, (20 + 40 + 99) / 3.0, (10 + 30 + 99) / 3.0,
              (20 + 40 + 99) / 3.0, (10 + 30 + 99) / 3.0, (20 + 40 + 99) / 3.0});
}

TEST(EvalFused, AttentionHeadsAreIndependent) {
  // Two heads of width 1: head 0 uses column 0 of Q/K/V, head 1 column 1.
  Tensor qkv = F32({1, 2, 6}, {1, 0, 1, 0, 1, 2,  //
                               0, 0, 0, 0, 3, 4});
  auto out = Eval(Fused("Attention", {{"num_heads", int64_t{2}}, {"scale", 1.0}}), {qkv});
  const double w = std::exp(1.0) / (std::exp(1.0) + 1);
  // head 0, query 0: scores [1, 0]; head 1: scores [0, 0]. Query 1: all zero scores.
  ExpectNear(out[0], {1, 2, 2}, {w * 1 + (1 - w) * 3, 3, 2, 3});
}

TEST(EvalFused, AttentionBadInputs) {
  Tensor qkv = F32({1, 2, 6}, std::vector<float>(12, 1));
  ExpectEvalFails(Fused("Attention", {{"num_heads", int64_t{4}}}), {qkv});
  ExpectEvalFails(Fused("Attention"), {qkv});
  ExpectEvalFails(Fused("Attention", {{"num_heads", int64_t{1}}}),
                  {qkv, I64({2, 2}, {1, 1, 1, 1})});
  ExpectEvalFails(Fused("Attention", {{"num_heads", int64_t{1}}}),
                  {F32({2, 5}, std::vector<float>(10, 1))});
}

}  // namespace
}  // namespace surge::engine::ir
