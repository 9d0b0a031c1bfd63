#include <cmath>

#include "eval_test_util.h"

namespace surge::engine::ir {
namespace {

using namespace testing;

TEST(EvalElementwise, AddBroadcastsNumpyStyle) {
  // [2,3] + [3] and [2,1] + [1,3].
  auto out = Eval(MakeNode("Add"), {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({3}, {10, 20, 30})});
  ExpectNear(out[0], {2, 3}, {11, 22, 33, 14, 25, 36});
  out = Eval(MakeNode("Add"), {F32({2, 1}, {1, 2}), F32({1, 3}, {10, 20, 30})});
  ExpectNear(out[0], {2, 3}, {11, 21, 31, 12, 22, 32});
}

TEST(EvalElementwise, BroadcastScalarAndRank4Mask) {
  // The BERT mask pattern: [B,1,1,S] * scalar, then added to [B,H,S,S].
  auto m = Eval(MakeNode("Mul"), {F32({2, 1, 1, 2}, {0, 1, 1, 0}), F32({}, {-100})});
  ExpectNear(m[0], {2, 1, 1, 2}, {0, -100, -100, 0});
  auto s = Eval(MakeNode("Add"), {F32({2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), m[0]});
  ExpectNear(s[0], {2, 1, 2, 2}, {1, -98, 3, -96, -95, 6, -93, 8});
}

TEST(EvalElementwise, SubDivPowIntsAndFloats) {
  ExpectNear(Eval(MakeNode("Sub"), {I64({3}, {5, 6, 7}), I64({}, {2})})[0], {3}, {3, 4, 5});
  ExpectNear(Eval(MakeNode("Div"), {I64({2}, {7, -7}), I64({}, {2})})[0], {2}, {3, -3});
  ExpectNear(Eval(MakeNode("Div"), {F32({2}, {1, 3}), F32({1}, {2})})[0], {2}, {0.5, 1.5});
  auto p = Eval(MakeNode("Pow"), {F32({3}, {2, -3, 4}), F32({}, {2})});
  ExpectNear(p[0], {3}, {4, 9, 16});
  EXPECT_EQ(p[0].dtype(), DType::kFloat32);
  ExpectNear(Eval(MakeNode("Pow"), {F32({1}, {4}), F32({}, {0.5})})[0], {1}, {2});
}

TEST(EvalElementwise, IntegerDivisionByZeroIsAnError) {
  Status s = EvalError(MakeNode("Div"), {I64({2}, {1, 2}), I64({2}, {1, 0})});
  EXPECT_NE(s.message().find("division by zero"), std::string::npos) << s.ToString();
}

TEST(EvalElementwise, IncompatibleShapesNameTheNode) {
  Status s = EvalError(MakeNode("Add"), {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({2}, {1, 2})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'n0'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("[2,3]"), std::string::npos) << s.ToString();
}

TEST(EvalElementwise, MixedDTypesAreRejected) {
  Status s = EvalError(MakeNode("Add"), {F32({1}, {1}), I64({1}, {1})});
  EXPECT_NE(s.message().find("float32"), std::string::npos) << s.ToString();
}

TEST(EvalElementwise, MinMaxVariadic) {
  auto out = Eval(MakeNode("Max"), {F32({3}, {1, 5, 3}), F32({1}, {2}), F32({3}, {0, 0, 4})});
  ExpectNear(out[0], {3}, {2, 5, 4});
  out = Eval(MakeNode("Min"), {I64({2}, {3, -1}), I64({2}, {2, 7})});
  ExpectNear(out[0], {2}, {2, -1});
}

TEST(EvalElementwise, UnaryFloatOps) {
  Tensor x = F32({4}, {-1.5f, -0.25f, 0.5f, 2.0f});
  auto erf = Eval(MakeNode("Erf"), {x});
  ExpectNear(erf[0], {4}, {std::erf(-1.5), std::erf(-0.25), std::erf(0.5), std::erf(2.0)});
  ExpectNear(Eval(MakeNode("Tanh"), {x})[0], {4},
             {std::tanh(-1.5), std::tanh(-0.25), std::tanh(0.5), std::tanh(2.0)});
  ExpectNear(Eval(MakeNode("Relu"), {x})[0], {4}, {0, 0, 0.5, 2});
  ExpectNear(Eval(MakeNode("Neg"), {x})[0], {4}, {1.5, 0.25, -0.5, -2});
  ExpectNear(Eval(MakeNode("Sqrt"), {F32({2}, {4, 2})})[0], {2}, {2, std::sqrt(2.0)});
  ExpectNear(Eval(MakeNode("Reciprocal"), {F32({2}, {4, -2})})[0], {2}, {0.25, -0.5});
  ExpectNear(Eval(MakeNode("Exp"), {F32({1}, {1})})[0], {1}, {std::exp(1.0)});
  ExpectNear(Eval(MakeNode("Log"), {F32({1}, {2})})[0], {1}, {std::log(2.0)});
  ExpectNear(Eval(MakeNode("Sigmoid"), {F32({1}, {0.3f})})[0], {1}, {1 / (1 + std::exp(-0.3))});
  ExpectNear(Eval(MakeNode("Gelu"), {F32({1}, {1.0f})})[0], {1}, {0.8413447460685429});
}

TEST(EvalElementwise, UnaryFloatOpRejectsIntegers) {
  Status s = EvalError(MakeNode("Erf"), {I64({1}, {1})});
  EXPECT_NE(s.message().find("int64"), std::string::npos) << s.ToString();
}

TEST(EvalElementwise, ComparisonsAndLogic) {
  auto eq = Eval(MakeNode("Equal"), {I64({2, 2}, {1, 0, 0, 1}), I64({}, {0})});
  EXPECT_EQ(eq[0].dtype(), DType::kBool);
  ExpectNear(eq[0], {2, 2}, {0, 1, 1, 0});
  ExpectNear(Eval(MakeNode("Less"), {F32({3}, {1, 2, 3}), F32({1}, {2})})[0], {3}, {1, 0, 0});
  ExpectNear(Eval(MakeNode("Greater"), {F32({3}, {1, 2, 3}), F32({1}, {2})})[0], {3}, {0, 0, 1});
  ExpectNear(Eval(MakeNode("Not"), {Bool({2}, {1, 0})})[0], {2}, {0, 1});
  ExpectNear(Eval(MakeNode("And"), {Bool({2, 1}, {1, 0}), Bool({2}, {1, 0})})[0], {2, 2},
             {1, 0, 0, 0});
  ExpectNear(Eval(MakeNode("Or"), {Bool({2}, {1, 0}), Bool({2}, {0, 0})})[0], {2}, {1, 0});
  Status s = EvalError(MakeNode("And"), {I64({1}, {1}), I64({1}, {1})});
  EXPECT_NE(s.message().find("bool"), std::string::npos);
}

TEST(EvalElementwise, WhereBroadcastsThreeWays) {
  auto out = Eval(MakeNode("Where"), {Bool({1, 3}, {1, 0, 1}), F32({2, 1}, {1, 2}), F32({}, {-9})});
  ExpectNear(out[0], {2, 3}, {1, -9, 1, 2, -9, 2});
  Status s = EvalError(MakeNode("Where"), {F32({1}, {1}), F32({1}, {1}), F32({1}, {1})});
  EXPECT_NE(s.message().find("condition"), std::string::npos);
}

TEST(EvalElementwise, CastAndCastLike) {
  auto c = Eval(MakeNode("Cast", {{"to", int64_t{1}}}), {I64({3}, {1, 0, -2})});
  EXPECT_EQ(c[0].dtype(), DType::kFloat32);
  ExpectNear(c[0], {3}, {1, 0, -2});
  auto b = Eval(MakeNode("Cast", {{"to", int64_t{9}}}), {F32({3}, {1.5f, 0, -2})});
  EXPECT_EQ(b[0].dtype(), DType::kBool);
  ExpectNear(b[0], {3}, {1, 0, 1});
  auto t = Eval(MakeNode("Cast", {{"to", int64_t{7}}}), {F32({2}, {2.7f, -2.7f})});
  ExpectNear(t[0], {2}, {2, -2});
  auto h = Eval(MakeNode("Cast", {{"to", int64_t{10}}}), {F32({1}, {0.5f})});
  EXPECT_EQ(h[0].dtype(), DType::kFloat16);
  ExpectNear(h[0], {1}, {0.5});
  auto l = Eval(MakeNode("CastLike"), {I64({1}, {3}), F32({}, {0})});
  EXPECT_EQ(l[0].dtype(), DType::kFloat32);
  ExpectEvalFails(MakeNode("Cast"), {F32({1}, {1})});
  ExpectEvalFails(MakeNode("Cast", {{"to", int64_t{999}}}), {F32({1}, {1})});
}

TEST(EvalElementwise, HalfInputsComputeInFloat32) {
  Tensor a = F32({2}, {1.5f, 2.0f}).CastFromFloat32(DType::kFloat16);
  Tensor b = F32({2}, {0.25f, -1.0f}).CastFromFloat32(DType::kFloat16);
  auto out = Eval(MakeNode("Add"), {a, b});
  EXPECT_EQ(out[0].dtype(), DType::kFloat16);
  ExpectNear(out[0], {2}, {1.75, 1.0});
  Tensor bf = F32({1}, {3.0f}).CastFromFloat32(DType::kBFloat16);
  auto s = Eval(MakeNode("Sqrt"), {bf});
  EXPECT_EQ(s[0].dtype(), DType::kBFloat16);
  ExpectNear(s[0], {1}, {std::sqrt(3.0)}, 1e-2);
}

TEST(EvalElementwise, ClipInputsAndAttributes) {
  ExpectNear(Eval(MakeNode("Clip"), {F32({3}, {-2, 0.5f, 3}), F32({}, {-1}), F32({}, {1})})[0], {3},
             {-1, 0.5, 1});
  ExpectNear(Eval(MakeNode("Clip"), {F32({3}, {-2, 0.5f, 3}), Tensor(), F32({}, {1})})[0], {3},
             {-2, 0.5, 1});
  ExpectNear(Eval(MakeNode("Clip", {{"min", 0.0}, {"max", 2.0}}), {F32({2}, {-2, 3})})[0], {2},
             {0, 2});
}

TEST(EvalElementwise, IsNaNAndMod) {
  ExpectNear(Eval(MakeNode("IsNaN"), {F32({2}, {NAN, 1})})[0], {2}, {1, 0});
  ExpectNear(Eval(MakeNode("Mod"), {I64({2}, {-7, 7}), I64({}, {3})})[0], {2}, {2, 1});
  ExpectNear(Eval(MakeNode("Mod", {{"fmod", int64_t{1}}}), {F32({1}, {-7}), F32({}, {3})})[0], {1},
             {-1});
}

TEST(EvalElementwise, UnknownOpIsUnimplemented) {
  Node n = MakeNode("NoSuchOp");
  EXPECT_FALSE(CanEval(n));
  Status s = EvalError(n, {F32({1}, {1})});
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(CanEval(MakeNode("Add")));
  EXPECT_TRUE(CanEval(MakeNode("Attention", {}, "surge")));
  EXPECT_FALSE(CanEval(MakeNode("Attention")));
}

TEST(EvalElementwise, MissingInputIsAnError) {
  Status s = EvalError(MakeNode("Add"), {F32({1}, {1})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace surge::engine::ir
