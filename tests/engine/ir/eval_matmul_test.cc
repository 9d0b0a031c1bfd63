#include "eval_test_util.h"

namespace surge::engine::ir {
namespace {

using namespace testing;

TEST(EvalMatMul, TwoDimensional) {
  auto out = Eval(MakeNode("MatMul"),
                  {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({3, 2}, {7, 8, 9, 10, 11, 12})});
  ExpectNear(out[0], {2, 2}, {58, 64, 139, 154});
}

TEST(EvalMatMul, BatchedBroadcastAndVectors) {
  // [2,1,2] x [2,1]: batch broadcast of a 2-D right side.
  auto out = Eval(MakeNode("MatMul"), {F32({2, 1, 2}, {1, 2, 3, 4}), F32({2, 1}, {10, 1})});
  ExpectNear(out[0], {2, 1, 1}, {12, 34});
  // [2,2] x [2]: vector on the right drops the last axis.
  ExpectNear(Eval(MakeNode("MatMul"), {F32({2, 2}, {1, 2, 3, 4}), F32({2}, {1, 1})})[0], {2},
             {3, 7});
  // [1,2,2] x [3,2,1] broadcasts the batch to 3.
  auto b =
      Eval(MakeNode("MatMul"), {F32({1, 2, 2}, {1, 0, 0, 1}), F32({3, 2, 1}, {1, 2, 3, 4, 5, 6})});
  ExpectNear(b[0], {3, 2, 1}, {1, 2, 3, 4, 5, 6});
  Status s = EvalError(MakeNode("MatMul"), {F32({2, 3}, std::vector<float>(6, 1)),
                                            F32({2, 3}, std::vector<float>(6, 1))});
  EXPECT_NE(s.message().find("inner dims"), std::string::npos) << s.ToString();
}

TEST(EvalMatMul, GemmTransposesAlphaBeta) {
  auto out = Eval(MakeNode("Gemm", {{"transB", int64_t{1}}, {"alpha", 2.0}, {"beta", 0.5}}),
                  {F32({1, 2}, {1, 2}), F32({3, 2}, {1, 0, 0, 1, 1, 1}), F32({3}, {2, 4, 6})});
  ExpectNear(out[0], {1, 3}, {3, 6, 9});
  ExpectEvalFails(MakeNode("Gemm"), {F32({1, 2}, {1, 2}), F32({3, 2}, std::vector<float>(6, 1))});
}

}  // namespace
}  // namespace surge::engine::ir
