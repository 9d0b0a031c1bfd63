#include "eval_test_util.h"

namespace surge::engine::ir {
namespace {

using namespace testing;

TEST(EvalShape, ShapeWithStartEnd) {
  Tensor x(DType::kFloat32, {2, 3, 4});
  ExpectNear(Eval(MakeNode("Shape"), {x})[0], {3}, {2, 3, 4});
  ExpectNear(Eval(MakeNode("Shape", {{"start", int64_t{1}}}), {x})[0], {2}, {3, 4});
  ExpectNear(Eval(MakeNode("Shape", {{"start", int64_t{-1}}}), {x})[0], {1}, {4});
  ExpectNear(Eval(MakeNode("Shape", {{"end", int64_t{1}}}), {x})[0], {1}, {2});
}

TEST(EvalShape, ReshapeZeroAndMinusOne) {
  Tensor x = F32({2, 3, 4}, std::vector<float>(24, 1.0f));
  auto out = Eval(MakeNode("Reshape"), {x, I64({4}, {0, 0, 2, -1})});
  EXPECT_EQ(out[0].shape(), Shape({2, 3, 2, 2}));
  Status s = EvalError(MakeNode("Reshape"), {x, I64({2}, {5, -1})});
  EXPECT_NE(s.message().find("cannot reshape"), std::string::npos) << s.ToString();
  ExpectEvalFails(MakeNode("Reshape"), {x, I64({2}, {-1, -1})});
}

TEST(EvalShape, UnsqueezeSqueezeAxesAsInputOrAttribute) {
  Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  // Opset 13+: axes input; opset < 13: axes attribute.
  EXPECT_EQ(Eval(MakeNode("Unsqueeze"), {x, I64({2}, {1, -1})})[0].shape(), Shape({2, 1, 3, 1}));
  EXPECT_EQ(Eval(MakeNode("Unsqueeze", {{"axes", std::vector<int64_t>{0}}}), {x})[0].shape(),
            Shape({1, 2, 3}));
  Tensor y = F32({1, 3, 1}, {1, 2, 3});
  EXPECT_EQ(Eval(MakeNode("Squeeze"), {y})[0].shape(), Shape({3}));
  EXPECT_EQ(Eval(MakeNode("Squeeze"), {y, I64({1}, {-1})})[0].shape(), Shape({1, 3}));
  EXPECT_EQ(Eval(MakeNode("Squeeze", {{"axes", std::vector<int64_t>{0}}}), {y})[0].shape(),
            Shape({3, 1}));
  Status s = EvalError(MakeNode("Squeeze"), {y, I64({1}, {1})});
  EXPECT_NE(s.message().find("size 3"), std::string::npos) << s.ToString();
  ExpectEvalFails(MakeNode("Unsqueeze"), {x, I64({1}, {5})});
}

TEST(EvalShape, ConcatAndTranspose) {
  auto c = Eval(MakeNode("Concat", {{"axis", int64_t{1}}}),
                {F32({2, 1}, {1, 2}), F32({2, 2}, {3, 4, 5, 6})});
  ExpectNear(c[0], {2, 3}, {1, 3, 4, 2, 5, 6});
  auto ints = Eval(MakeNode("Concat", {{"axis", int64_t{0}}}), {I64({1}, {2}), I64({2}, {-1, 64})});
  ExpectNear(ints[0], {3}, {2, -1, 64});
  ExpectEvalFails(MakeNode("Concat", {{"axis", int64_t{0}}}),
                  {F32({1, 2}, {1, 2}), F32({1, 3}, {1, 2, 3})});
  auto t = Eval(MakeNode("Transpose", {{"perm", std::vector<int64_t>{1, 0}}}),
                {F32({2, 3}, {1, 2, 3, 4, 5, 6})});
  ExpectNear(t[0], {3, 2}, {1, 4, 2, 5, 3, 6});
  // [B,S,heads,d] -> [B,heads,S,d]
  std::vector<float> v(2 * 3 * 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  auto t4 =
      Eval(MakeNode("Transpose", {{"perm", std::vector<int64_t>{0, 2, 1}}}), {F32({2, 3, 2}, v)});
  ExpectNear(t4[0], {2, 2, 3}, {0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11});
  ExpectEvalFails(MakeNode("Transpose", {{"perm", std::vector<int64_t>{0, 0}}}),
                  {F32({1, 1}, {1})});
}

TEST(EvalShape, SliceClampsAndSteps) {
  Tensor x = F32({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  ExpectNear(Eval(MakeNode("Slice"), {x, I64({1}, {1}), I64({1}, {INT64_MAX}), I64({1}, {1})})[0],
             {2, 3}, {1, 2, 3, 5, 6, 7});
  ExpectNear(Eval(MakeNode("Slice"),
                  {x, I64({1}, {-1}), I64({1}, {-5}), I64({1}, {1}), I64({1}, {-2})})[0],
             {2, 2}, {3, 1, 7, 5});
  ExpectNear(Eval(MakeNode("Slice"), {x, I64({2}, {1, 0}), I64({2}, {2, 2})})[0], {1, 2}, {4, 5});
  // Opset-1 attribute form.
  ExpectNear(Eval(MakeNode("Slice", {{"starts", std::vector<int64_t>{2}},
                                     {"ends", std::vector<int64_t>{3}},
                                     {"axes", std::vector<int64_t>{1}}}),
                  {x})[0],
             {2, 1}, {2, 6});
  ExpectEvalFails(MakeNode("Slice"),
                  {x, I64({1}, {0}), I64({1}, {1}), I64({1}, {0}), I64({1}, {0})});
}

TEST(EvalShape, GatherAxesAndNegativeIndices) {
  Tensor table = F32({3, 2}, {0, 1, 10, 11, 20, 21});
  ExpectNear(Eval(MakeNode("Gather"), {table, I64({2, 2}, {2, 0, -1, 1})})[0], {2, 2, 2},
             {20, 21, 0, 1, 20, 21, 10, 11});
  ExpectNear(Eval(MakeNode("Gather", {{"axis", int64_t{1}}}), {table, I64({}, {1})})[0], {3},
             {1, 11, 21});
  ExpectNear(Eval(MakeNode("Gather"), {I64({3}, {4, 5, 6}), I32({}, {0})})[0], {}, {4});
  Status s = EvalError(MakeNode("Gather"), {table, I64({1}, {3})});
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
}

TEST(EvalShape, GatherElementsAndGatherND) {
  Tensor x = F32({2, 3}, {0, 1, 2, 10, 11, 12});
  ExpectNear(
      Eval(MakeNode("GatherElements", {{"axis", int64_t{1}}}), {x, I64({2, 2}, {2, 0, -1, 1})})[0],
      {2, 2}, {2, 0, 12, 11});
  ExpectNear(Eval(MakeNode("GatherElements"), {x, I64({1, 3}, {1, 0, 1})})[0], {1, 3}, {10, 1, 12});
  EXPECT_EQ(EvalError(MakeNode("GatherElements"), {x, I64({1, 3}, {2, 0, 1})}).code(),
            StatusCode::kOutOfRange);
  // Tuples of length 2 pick elements; of length 1 pick rows.
  ExpectNear(Eval(MakeNode("GatherND"), {x, I64({2, 2}, {0, 2, 1, 0})})[0], {2}, {2, 10});
  ExpectNear(Eval(MakeNode("GatherND"), {x, I64({1, 1}, {1})})[0], {1, 3}, {10, 11, 12});
  // batch_dims = 1: per batch row, one index into its own row (the [CLS]/last-token pattern).
  ExpectNear(Eval(MakeNode("GatherND", {{"batch_dims", int64_t{1}}}), {x, I64({2, 1}, {2, 0})})[0],
             {2}, {2, 10});
  ExpectEvalFails(MakeNode("GatherND"), {x, I64({1, 3}, {0, 0, 0})});
}

TEST(EvalShape, ExpandConstantOfShapeRange) {
  ExpectNear(Eval(MakeNode("Expand"), {F32({2, 1}, {1, 2}), I64({3}, {2, 1, 3})})[0], {2, 2, 3},
             {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
  ExpectEvalFails(MakeNode("Expand"), {F32({2}, {1, 2}), I64({1}, {3})});
  ExpectNear(Eval(MakeNode("ConstantOfShape"), {I64({2}, {2, 2})})[0], {2, 2}, {0, 0, 0, 0});
  auto c = Eval(MakeNode("ConstantOfShape", {{"value", I64({1}, {7})}}), {I64({1}, {3})});
  EXPECT_EQ(c[0].dtype(), DType::kInt64);
  ExpectNear(c[0], {3}, {7, 7, 7});
  ExpectNear(Eval(MakeNode("Range"), {I64({}, {0}), I64({}, {5}), I64({}, {2})})[0], {3},
             {0, 2, 4});
  ExpectNear(Eval(MakeNode("Range"), {F32({}, {1}), F32({}, {0}), F32({}, {-0.5f})})[0], {2},
             {1, 0.5});
  ExpectEvalFails(MakeNode("Range"), {I64({}, {0}), I64({}, {5}), I64({}, {0})});
}

TEST(EvalShape, ConstantForms) {
  ExpectNear(Eval(MakeNode("Constant", {{"value", F32({2}, {1, 2})}}), {})[0], {2}, {1, 2});
  ExpectNear(Eval(MakeNode("Constant", {{"value_float", 0.5}}), {})[0], {}, {0.5});
  ExpectNear(Eval(MakeNode("Constant", {{"value_ints", std::vector<int64_t>{3, 4}}}), {})[0], {2},
             {3, 4});
  ExpectEvalFails(MakeNode("Constant"), {});
}

TEST(EvalShape, SplitBySizesAttrAndNumOutputs) {
  Tensor x = F32({6}, {0, 1, 2, 3, 4, 5});
  auto a = Eval(MakeNode("Split", {}, "", 2), {x, I64({2}, {2, 4})});
  ExpectNear(a[0], {2}, {0, 1});
  ExpectNear(a[1], {4}, {2, 3, 4, 5});
  auto b = Eval(MakeNode("Split", {{"split", std::vector<int64_t>{3, 3}}}, "", 2), {x});
  ExpectNear(b[1], {3}, {3, 4, 5});
  auto c = Eval(MakeNode("Split", {{"num_outputs", int64_t{3}}}, "", 3), {x});
  ExpectNear(c[2], {2}, {4, 5});
  auto d = Eval(MakeNode("Split", {}, "", 3), {x});  // equal parts from the output count
  ExpectNear(d[1], {2}, {2, 3});
  ExpectEvalFails(MakeNode("Split", {}, "", 2), {x, I64({2}, {2, 3})});
}

TEST(EvalShape, FlattenTriluDropoutIdentity) {
  EXPECT_EQ(Eval(MakeNode("Flatten"), {Tensor(DType::kFloat32, {2, 3, 4})})[0].shape(),
            Shape({2, 12}));
  ExpectNear(Eval(MakeNode("Trilu"), {F32({2, 2}, {1, 2, 3, 4})})[0], {2, 2}, {1, 2, 0, 4});
  ExpectNear(Eval(MakeNode("Trilu", {{"upper", int64_t{0}}}), {F32({2, 2}, {1, 2, 3, 4})})[0],
             {2, 2}, {1, 0, 3, 4});
  auto d = Eval(MakeNode("Dropout", {}, "", 2), {F32({2}, {1, 2})});
  ExpectNear(d[0], {2}, {1, 2});
  ExpectNear(d[1], {2}, {1, 1});
  Tensor x = F32({1}, {5});
  auto id = Eval(MakeNode("Identity"), {x});
  EXPECT_NE(id[0].data(), x.data());  // outputs own their memory
}

}  // namespace
}  // namespace surge::engine::ir
