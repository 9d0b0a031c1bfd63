#include <cmath>

#include "eval_test_util.h"

namespace surge::engine::ir {
namespace {

using namespace testing;

TEST(EvalReduce, ReduceMeanAxesInputOrAttribute) {
  Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectNear(Eval(MakeNode("ReduceMean", {{"axes", std::vector<int64_t>{-1}}}), {x})[0], {2, 1},
             {2, 5});
  ExpectNear(Eval(MakeNode("ReduceMean", {{"keepdims", int64_t{0}}}), {x, I64({1}, {0})})[0], {3},
             {2.5, 3.5, 4.5});
  ExpectNear(Eval(MakeNode("ReduceSum", {{"keepdims", int64_t{0}}}), {x})[0], {}, {21});
  ExpectNear(Eval(MakeNode("ReduceMax"), {x, I64({1}, {1})})[0], {2, 1}, {3, 6});
  ExpectNear(Eval(MakeNode("ReduceSum", {{"noop_with_empty_axes", int64_t{1}}}), {x})[0], {2, 3},
             {1, 2, 3, 4, 5, 6});
  ExpectEvalFails(MakeNode("ReduceMean", {{"axes", std::vector<int64_t>{2}}}), {x});
}

TEST(EvalReduce, SoftmaxIsStableAndSumsToOne) {
  auto out = Eval(MakeNode("Softmax", {{"axis", int64_t{-1}}}),
                  {F32({2, 3}, {1000, 1001, 1002, -1, 0, 1})});
  const double e0 = 1 / (1 + std::exp(1.0) + std::exp(2.0));
  ExpectNear(
      out[0], {2, 3},
      {e0, e0 * std::exp(1.0), e0 * std::exp(2.0), e0, e0 * std::exp(1.0), e0 * std::exp(2.0)});
  // Default axis is the last one (opset 13+).
  auto d = Eval(MakeNode("Softmax"), {F32({1, 2}, {0, 0})});
  ExpectNear(d[0], {1, 2}, {0.5, 0.5});
  auto col = Eval(MakeNode("Softmax", {{"axis", int64_t{0}}}), {F32({2, 1}, {0, 0})});
  ExpectNear(col[0], {2, 1}, {0.5, 0.5});
  ExpectEvalFails(MakeNode("Softmax"), {I64({2}, {1, 2})});
}

TEST(EvalReduce, CumSumRobertaPositions) {
  // mask = ids != pad; cumsum(mask, 1) * mask + pad.
  auto c = Eval(MakeNode("CumSum"), {I32({2, 3}, {1, 1, 0, 1, 0, 1}), I64({}, {1})});
  ExpectNear(c[0], {2, 3}, {1, 2, 2, 1, 1, 2});
  auto e = Eval(MakeNode("CumSum", {{"exclusive", int64_t{1}}, {"reverse", int64_t{1}}}),
                {F32({3}, {1, 2, 3}), I64({}, {0})});
  ExpectNear(e[0], {3}, {5, 3, 0});
  ExpectEvalFails(MakeNode("CumSum"), {F32({3}, {1, 2, 3}), I64({}, {1})});
}

TEST(EvalReduce, LayerNormalization) {
  Tensor x = F32({2, 2}, {1, 3, 2, 2});
  auto out = Eval(MakeNode("LayerNormalization", {{"epsilon", 1e-6}}, "", 3),
                  {x, F32({2}, {2, 1}), F32({2}, {0.5f, 0})});
  ExpectNear(out[0], {2, 2}, {-1.5, 1, 0.5, 0}, 1e-4);
  ASSERT_EQ(out.size(), 3u);
  ExpectNear(out[1], {2, 1}, {2, 2});
  Status s = EvalError(MakeNode("LayerNormalization"), {x, F32({3}, {1, 1, 1})});
  EXPECT_NE(s.message().find("scale"), std::string::npos) << s.ToString();
}

TEST(EvalReduce, ArgMax) {
  ExpectNear(Eval(MakeNode("ArgMax", {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}}),
                  {F32({2, 3}, {1, 9, 3, 7, 5, 6})})[0],
             {2}, {1, 0});
}

}  // namespace
}  // namespace surge::engine::ir
