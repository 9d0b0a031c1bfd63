// Shape-computation ops: symbolic data flows through Shape/Gather/Unsqueeze/Concat into Reshape,
// Expand, Slice, ConstantOfShape, Range.
#include <gtest/gtest.h>

#include <limits>

#include "ops_test_util.h"

namespace surge::engine::ir {
namespace {

using namespace testing;  // NOLINT

TEST(OpsShapeTest, ShapeGatherConcatReshapeChain) {
  Graph g;
  int x = g.AddInput("x", DType::kFloat32, {Sym("batch"), Sym("seq"), 64});
  int shape = Op(g, "Shape", {x});
  int b = Op(g, "Gather", {shape, Ints(g, "i0", {0}, true)}, {{"axis", int64_t{0}}});
  int s = Op(g, "Gather", {shape, Ints(g, "i1", {1}, true)}, {{"axis", int64_t{0}}});
  int ub = Op(g, "Unsqueeze", {b, Ints(g, "ax0", {0})});
  int us = Op(g, "Unsqueeze", {s, Ints(g, "ax1", {0})});
  int target = Op(g, "Concat", {ub, us, Ints(g, "heads", {2, 32})}, {{"axis", int64_t{0}}});
  int r = Op(g, "Reshape", {x, target});
  int t = Op(g, "Transpose", {r}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  ASSERT_TRUE(InferAll(g).ok());
  EXPECT_EQ(ShapeOf(g, shape), "[3]");
  EXPECT_EQ(DataOf(g, shape), "[batch,seq,64]");
  EXPECT_EQ(ShapeOf(g, b), "[]");
  EXPECT_EQ(DataOf(g, s), "[seq]");
  EXPECT_EQ(DataOf(g, target), "[batch,seq,2,32]");
  EXPECT_EQ(ShapeOf(g, r), "[batch,seq,2,32]");
  EXPECT_EQ(ShapeOf(g, t), "[batch,2,seq,32]");
  EXPECT_EQ(g.values[t].dtype, DType::kFloat32);
}

TEST(OpsShapeTest, ReshapeZeroAndMinusOne) {
  Graph g;
  int x = g.AddInput("x", DType::kFloat32, {Sym("batch"), Sym("seq"), 64});
  int a = Op(g, "Reshape", {x, Ints(g, "t0", {0, -1})});
  int b = Op(g, "Reshape", {x, Ints(g, "t1", {-1, 64})});
  int c = Op(g, "Reshape", {x, Ints(g, "t2", {0, 0, 4, -1})});
  ASSERT_TRUE(InferAll(g).ok());
  EXPECT_EQ(ShapeOf(g, a), "[batch,64*seq]");
  EXPECT_EQ(ShapeOf(g, b), "[batch*seq,64]");
  EXPECT_EQ(ShapeOf(g, c), "[batch,seq,4,16]");
}

TEST(OpsShapeTest, ReshapeErrors) {
  Graph g;
  int x = g.AddInput("x", DType::kFloat32, {Sym("batch"), 6});
  Op(g, "Reshape", {x, Ints(g, "t", {-1, 4})});
  Status s = InferAll(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Reshape_0"), std::string::npos) << s.message();
  Graph g2;
  int y = g2.AddInput("y", DType::kFloat32, {2, 6});
  Op(g2, "Reshape", {y, Ints(g2, "t", {5, 2})});
  EXPECT_FALSE(InferAll(g2).ok());
  Graph g3;
  int z = g3.AddInput("z", DType::kFloat32, {2, 6});
  Op(g3, "Reshape", {z, Ints(g3, "t", {-1, -1})});
  EXPECT_FALSE(InferAll(g3).ok());
}

TEST(OpsShapeTest, SliceWithSymbolicAndHugeEnds) {
  Graph g;
  int x = g.AddInput("x", DType::kFloat32, {Sym("batch"), Sym("seq"), 64});
  int pos = Floats(g, "pos", {1, 512});
  int shape = Op(g, "Shape", {x});
  int seq = Op(g, "Slice", {shape, Ints(g, "s1", {1}), Ints(g, "e2", {2})});
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  int a = Op(g, "Slice", {pos, Ints(g, "z", {0}), seq, Ints(g, "ax", {1})});
  int b = Op(g, "Slice", {x, Ints(g, "one", {1}), Ints(g, "big", {kMax}), Ints(g, "ax1", {1})});
  int c = Op(g, "Slice", {x, Ints(g, "m1", {-1}), Ints(g, "big2", {kMax}), Ints(g, "ax2", {1})});
  int d =
      Op(g, "Slice",
         {x, Ints(g, "z2", {0}), Ints(g, "e16", {16}), Ints(g, "ax3", {2}), Ints(g, "st2", {2})});
  int first2 = Op(g, "Slice", {shape, Ints(g, "z3", {0}), Ints(g, "e2b", {2})});
  ASSERT_TRUE(InferAll(g).ok());
  EXPECT_EQ(DataOf(g, seq), "[seq]");
  EXPECT_EQ(ShapeOf(g, a), "[1,seq]");
  EXPECT_EQ(ShapeOf(g, b), "[batch,seq-1,64]");
  EXPECT_EQ(ShapeOf(g, c), "[batch,1,64]");
  EXPECT_EQ(ShapeOf(g, d), "[batch,seq,8]");
  EXPECT_EQ(DataOf(g, first2), "[batch,seq]");
}

TEST(OpsShapeTest, ExpandThroughTorchScriptWherePattern) {
  // ConstantOfShape(ones) * -1 == target ? ones : target  (how torch exports expand()).
  Graph g;
  int x = g.AddInput("x", DType::kInt64, {Sym("batch"), Sym("seq")});
  int row = g.AddInput("row", DType::kInt64, {1, Sym("seq")});
  int target = Op(g, "Shape", {x});
  Tensor one(DType::kInt64, {1});
  one.data_as<int64_t>()[0] = 1;
  int ones = Op(g, "ConstantOfShape", {Ints(g, "two", {2})}, {{"value", one}});
  int neg = Op(g, "Mul", {ones, Ints(g, "m1", {-1}, true)});
  int eq = Op(g, "Equal", {target, neg});
  int where = Op(g, "Where", {eq, ones, target});
  int e = Op(g, "Expand", {row, where});
  ASSERT_TRUE(InferAll(g).ok());
  EXPECT_EQ(DataOf(g, ones), "[1,1]");
  EXPECT_EQ(DataOf(g, eq), "[0,0]");
  EXPECT_EQ(g.values[eq].dtype, DType::kBool);
  EXPECT_EQ(DataOf(g, where), "[batch,seq]");
  EXPECT_EQ(ShapeOf(g, e), "[batch,seq]");

  // -seq might be -1: undecidable, so no data.
  int negseq = Op(g, "Neg", {target});
  int eq2 = Op(g, "Equal", {negseq, neg});
  ASSERT_TRUE(InferAll(g).ok());
  EXPECT_EQ(DataOf(g, negseq), "[-batch,-seq]");
  EXPECT_EQ(DataOf(g, eq2), "?");
}

TEST(OpsShapeTest, RangeCastArithmeticAndConstantOfShape) {
  Graph g;
  int x = g.AddInput("x", DType::kFloat32, {Sym("batch"), Sym("seq"), 64});
  int shape = Op(g, "Shape", {x}, {{"start", int64_t{1}}, {"end", int64_t{2}}});
  int seq = Op(g, "Squeeze", {shape});
  int r = Op(g, "Range", {Ints(g, "zero", {0}, true), seq, Ints(g, "one", {1}, true)});
  int r2 = Op(g, "Range",
              {Ints(g, "two", {2}, true), Ints(g, "ten", {10}, true), Ints(g, "three", {3}, true)});
  int cast = Op(g, "Cast", {shape}, {{"to", int64_t{1}}});
  int dbl = Op(g, "Mul", {shape, Ints(g, "k2", {2})});
  int half = Op(g, "Div", {dbl, Ints(g, "k2b", {2})});
  int plus = Op(g, "Add", {shape, Ints(g, "k1", {1})});
  int zeros = Op(g, "ConstantOfShape",
                 {Op(g, "Concat", {shape, Ints(g, "k4", {4})}, {{"axis", int64_t{0}}})});
  int size = Op(g, "Size", {x});
  ASSERT_TRUE(InferAll(g).ok());
  EXPECT_EQ(ShapeOf(g, seq), "[]");
  EXPECT_EQ(ShapeOf(g, r), "[seq]");
  EXPECT_EQ(g.values[r].dtype, DType::kInt64);
  EXPECT_EQ(ShapeOf(g, r2), "[3]");
  EXPECT_EQ(DataOf(g, r2), "[2,5,8]");
  EXPECT_EQ(g.values[cast].dtype, DType::kFloat32);
  EXPECT_EQ(DataOf(g, cast), "[seq]");
  EXPECT_EQ(DataOf(g, dbl), "[2*seq]");
  EXPECT_EQ(DataOf(g, half), "[seq]");
  EXPECT_EQ(DataOf(g, plus), "[seq+1]");
  EXPECT_EQ(ShapeOf(g, zeros), "[seq,4]");
  EXPECT_EQ(g.values[zeros].dtype, DType::kFloat32);
  EXPECT_EQ(DataOf(g, size), "[64*batch*seq]");
}

TEST(OpsShapeTest, GatherVariantsSplitFlattenConcat) {
  Graph g;
  int emb = Floats(g, "emb", {200, 64});
  int ids = g.AddInput("ids", DType::kInt64, {Sym("batch"), Sym("seq")});
  int x = Op(g, "Gather", {emb, ids});
  int cls = Op(g, "Gather", {x, Ints(g, "zero", {0}, true)}, {{"axis", int64_t{1}}});
  int idx = g.AddInput("idx", DType::kInt64, {Sym("batch"), 1, 1, Sym("seq"), 2});
  int mask = g.AddInput("mask", DType::kBool, {Sym("batch"), Sym("seq")});
  int nd = Op(g, "GatherND", {mask, idx});
  int el = Op(g, "GatherElements", {mask, ids}, {{"axis", int64_t{1}}});
  int qkv = g.AddInput("qkv", DType::kFloat32, {Sym("batch"), Sym("seq"), 192});
  int q = Op(g, "Split", {qkv}, {{"axis", int64_t{-1}}, {"num_outputs", int64_t{3}}}, 3);
  int p = Op(g, "Split", {qkv, Ints(g, "parts", {64, 128})}, {{"axis", int64_t{2}}}, 2);
  int flat = Op(g, "Flatten", {x}, {{"axis", int64_t{2}}});
  int cat = Op(g, "Concat", {x, x}, {{"axis", int64_t{1}}});
  ASSERT_TRUE(InferAll(g).ok());
  EXPECT_EQ(ShapeOf(g, x), "[batch,seq,64]");
  EXPECT_EQ(ShapeOf(g, cls), "[batch,64]");
  EXPECT_EQ(ShapeOf(g, nd), "[batch,1,1,seq]");
  EXPECT_EQ(g.values[nd].dtype, DType::kBool);
  EXPECT_EQ(ShapeOf(g, el), "[batch,seq]");
  EXPECT_EQ(ShapeOf(g, q), "[batch,seq,64]");
  EXPECT_EQ(ShapeOf(g, q + 2), "[batch,seq,64]");
  EXPECT_EQ(ShapeOf(g, p + 1), "[batch,seq,128]");
  EXPECT_EQ(ShapeOf(g, flat), "[batch*seq,64]");
  EXPECT_EQ(ShapeOf(g, cat), "[batch,2*seq,64]");
}

TEST(OpsShapeTest, BadShapeOpInputs) {
  auto fails = [](auto build) {
    Graph g;
    build(g);
    return !InferAll(g).ok();
  };
  EXPECT_TRUE(fails([](Graph& g) {
    int x = g.AddInput("x", DType::kFloat32, {2, 3});
    Op(g, "Transpose", {x}, {{"perm", std::vector<int64_t>{0, 0}}});
  }));
  EXPECT_TRUE(fails([](Graph& g) {
    int x = g.AddInput("x", DType::kFloat32, {2, 3});
    Op(g, "Concat", {x, g.AddInput("y", DType::kFloat32, {4, 3})}, {{"axis", int64_t{1}}});
  }));
  EXPECT_TRUE(fails([](Graph& g) {
    int x = g.AddInput("x", DType::kFloat32, {2, 3});
    Op(g, "Squeeze", {x, Ints(g, "a", {0})});
  }));
  EXPECT_TRUE(fails([](Graph& g) {
    int x = g.AddInput("x", DType::kFloat32, {2, 3});
    Op(g, "Gather", {x, Ints(g, "i", {5})});
    Op(g, "Gather", {Op(g, "Shape", {x}), Ints(g, "j", {7}, true)});
  }));
  EXPECT_TRUE(fails([](Graph& g) {
    int x = g.AddInput("x", DType::kFloat32, {2, 3});
    Op(g, "Unsqueeze", {x, Ints(g, "a", {5})});
  }));
  EXPECT_TRUE(fails([](Graph& g) { Op(g, "Reshape", {g.AddInput("x", DType::kFloat32, {2})}); }));
  EXPECT_TRUE(fails([](Graph& g) { Op(g, "NoSuchOp", {g.AddInput("x", DType::kFloat32, {2})}); }));
}

}  // namespace
}  // namespace surge::engine::ir
