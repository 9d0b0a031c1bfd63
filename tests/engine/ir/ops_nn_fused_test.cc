// Elementwise broadcasting, MatMul/Gemm/LayerNormalization/reductions, and the fused Surge ops.
#include <gtest/gtest.h>

#include "ops_test_util.h"

namespace surge::engine::ir {
namespace {

using namespace testing;  // NOLINT

TEST(OpsElementwiseTest, BroadcastingAndDtypes) {
  Graph g;
  int x = g.AddInput("x", DType::kFloat32, {Sym("batch"), Sym("seq"), 64});
  int mask = g.AddInput("mask", DType::kFloat32, {Sym("batch"), 1, 1, Sym("seq")});
  int scores = g.AddInput("scores", DType::kFloat32, {Sym("batch"), 2, Sym("seq"), Sym("seq")});
  int a = Op(g, "Add", {x, Floats(g, "bias", {64})});
  int m = Op(g, "Add", {scores, mask});
  int e = Op(g, "Erf", {a});
  int lt = Op(g, "Less", {x, Floats(g, "zero", {1})});
  int w = Op(g, "Where", {lt, x, Floats(g, "neg", {1})});
  int n = Op(g, "Not", {lt});
  int mx = Op(g, "Max", {x, Floats(g, "c", {1, 1, 64}), Floats(g, "d", {64})});
  int isnan = Op(g, "IsNaN", {x});
  ASSERT_TRUE(InferAll(g).ok());
  EXPECT_EQ(ShapeOf(g, a), "[batch,seq,64]");
  EXPECT_EQ(ShapeOf(g, m), "[batch,2,seq,seq]");
  EXPECT_EQ(ShapeOf(g, e), "[batch,seq,64]");
  EXPECT_EQ(g.values[lt].dtype, DType::kBool);
  EXPECT_EQ(g.values[w].dtype, DType::kFloat32);
  EXPECT_EQ(ShapeOf(g, w), "[batch,seq,64]");
  EXPECT_EQ(g.values[n].dtype, DType::kBool);
  EXPECT_EQ(ShapeOf(g, mx), "[batch,seq,64]");
  EXPECT_EQ(g.values[isnan].dtype, DType::kBool);
}

TEST(OpsElementwiseTest, Errors) {
  Graph g;
  int x = g.AddInput("x", DType::kFloat32, {2, 3});
  Op(g, "Add", {x, Floats(g, "y", {4})});
  Status s = InferAll(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Add_0"), std::string::npos) << s.message();
  Graph g2;
  Op(g2, "Mul", {g2.AddInput("x", DType::kFloat32, {2}), g2.AddInput("y", DType::kInt64, {2})});
  EXPECT_FALSE(InferAll(g2).ok());
  Graph g3;
  Op(g3, "Cast", {g3.AddInput("x", DType::kFloat32, {2})}, {{"to", int64_t{8}}});  // string
  EXPECT_FALSE(InferAll(g3).ok());
  Graph g4;
  Op(g4, "Add", {g4.AddInput("x", DType::kFloat32, {2})});
  Status arity = InferAll(g4);
  ASSERT_FALSE(arity.ok());
  EXPECT_NE(arity.message().find("inputs"), std::string::npos);
}

TEST(OpsNnTest, MatMulGemmSoftmaxLayerNormReduce) {
  Graph g;
  int q = g.AddInput("q", DType::kFloat32, {Sym("batch"), 2, Sym("seq"), 32});
  int kt = g.AddInput("kt", DType::kFloat32, {Sym("batch"), 2, 32, Sym("seq")});
  int x = g.AddInput("x", DType::kFloat32, {Sym("batch"), Sym("seq"), 64});
  int cls = g.AddInput("cls", DType::kFloat32, {Sym("batch"), 64});
  int s = Op(g, "MatMul", {q, kt});
  int p = Op(g, "MatMul", {x, Floats(g, "w", {64, 128})});
  int v = Op(g, "MatMul", {x, Floats(g, "vec", {64})});
  int gemm =
      Op(g, "Gemm", {cls, Floats(g, "wt", {3, 64}), Floats(g, "b", {3})}, {{"transB", int64_t{1}}});
  int sm = Op(g, "Softmax", {s}, {{"axis", int64_t{-1}}});
  int ln = Op(g, "LayerNormalization", {x, Floats(g, "gamma", {64}), Floats(g, "beta", {64})},
              {{"axis", int64_t{-1}}}, 3);
  int rm = Op(g, "ReduceMean", {x}, {{"axes", std::vector<int64_t>{-1}}});
  int rs = Op(g, "ReduceSum", {x, Ints(g, "ax", {1})}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(InferAll(g).ok());
  EXPECT_EQ(ShapeOf(g, s), "[batch,2,seq,seq]");
  EXPECT_EQ(ShapeOf(g, p), "[batch,seq,128]");
  EXPECT_EQ(ShapeOf(g, v), "[batch,seq]");
  EXPECT_EQ(ShapeOf(g, gemm), "[batch,3]");
  EXPECT_EQ(ShapeOf(g, sm), "[batch,2,seq,seq]");
  EXPECT_EQ(ShapeOf(g, ln), "[batch,seq,64]");
  EXPECT_EQ(ShapeOf(g, ln + 1), "[batch,seq,1]");
  EXPECT_EQ(ShapeOf(g, rm), "[batch,seq,1]");
  EXPECT_EQ(ShapeOf(g, rs), "[batch,64]");
}

TEST(OpsNnTest, Errors) {
  auto fails = [](auto build) {
    Graph g;
    build(g);
    return !InferAll(g).ok();
  };
  EXPECT_TRUE(fails([](Graph& g) {
    Op(g, "MatMul", {g.AddInput("a", DType::kFloat32, {2, 3}), Floats(g, "b", {4, 5})});
  }));
  EXPECT_TRUE(fails([](Graph& g) {
    Op(g, "Gemm", {g.AddInput("a", DType::kFloat32, {2, 3}), Floats(g, "b", {2, 5})});
  }));
  EXPECT_TRUE(fails([](Graph& g) {
    Op(g, "Softmax", {g.AddInput("a", DType::kFloat32, {2, 3})}, {{"axis", int64_t{2}}});
  }));
  EXPECT_TRUE(fails([](Graph& g) {
    Op(g, "ReduceMean", {g.AddInput("a", DType::kFloat32, {2, 3})},
       {{"axes", std::vector<int64_t>{4}}});
  }));
}

TEST(OpsFusedTest, EncoderLayerInFusedOps) {
  Graph g;
  int ids = g.AddInput("input_ids", DType::kInt64, {Sym("batch"), Sym("seq")});
  int types = g.AddInput("token_type_ids", DType::kInt64, {Sym("batch"), Sym("seq")});
  int mask = g.AddInput("attention_mask", DType::kInt64, {Sym("batch"), Sym("seq")});
  int emb = Op(g, "EmbedLayerNorm",
               {ids, types, -1, Floats(g, "word", {200, 64}), Floats(g, "pos", {64, 64}),
                Floats(g, "type", {2, 64}), Floats(g, "gamma", {64}), Floats(g, "beta", {64})},
               {{"epsilon", 1e-12}}, 1, "surge");
  int qkv = Op(g, "Linear", {emb, Floats(g, "wqkv", {64, 192}), Floats(g, "bqkv", {192})}, {}, 1,
               "surge");
  int att = Op(g, "Attention", {qkv, mask}, {{"num_heads", int64_t{2}}}, 1, "surge");
  int o = Op(g, "Linear", {att, Floats(g, "wo", {64, 64}), Floats(g, "bo", {64}), emb},
             {{"activation", std::string("gelu")}}, 1, "surge");
  int sln = Op(g, "SkipLayerNorm",
               {o, emb, Floats(g, "g1", {64}), Floats(g, "b1", {64}), Floats(g, "bias", {64})},
               {{"epsilon", 1e-12}}, 2, "surge");
  int ln = Op(g, "LayerNorm", {sln, Floats(g, "g2", {64}), Floats(g, "b2", {64})}, {}, 1, "surge");
  int ge = Op(g, "Gelu", {ln}, {{"approximate", std::string("tanh")}}, 1, "surge");
  int pooled = Op(g, "Linear",
                  {Op(g, "Gather", {ge, Ints(g, "z", {0}, true)}, {{"axis", int64_t{1}}}),
                   Floats(g, "wp", {64, 64}), Floats(g, "bp", {64})},
                  {{"activation", std::string("tanh")}}, 1, "surge");
  ASSERT_TRUE(InferAll(g).ok());
  EXPECT_EQ(ShapeOf(g, emb), "[batch,seq,64]");
  EXPECT_EQ(ShapeOf(g, qkv), "[batch,seq,192]");
  EXPECT_EQ(ShapeOf(g, att), "[batch,seq,64]");
  EXPECT_EQ(ShapeOf(g, o), "[batch,seq,64]");
  EXPECT_EQ(ShapeOf(g, sln), "[batch,seq,64]");
  EXPECT_EQ(ShapeOf(g, sln + 1), "[batch,seq,64]");
  EXPECT_EQ(ShapeOf(g, ge), "[batch,seq,64]");
  EXPECT_EQ(ShapeOf(g, pooled), "[batch,64]");
  EXPECT_EQ(g.values[att].dtype, DType::kFloat32);
}

TEST(OpsFusedTest, Errors) {
  auto fails = [](auto build) {
    Graph g;
    build(g);
    Status s = InferAll(g);
    return !s.ok() && s.message().find("node '") != std::string::npos;
  };
  EXPECT_TRUE(fails([](Graph& g) {  // K mismatch
    Op(g, "Linear", {g.AddInput("x", DType::kFloat32, {Sym("b"), 32}), Floats(g, "w", {64, 8})}, {},
       1, "surge");
  }));
  EXPECT_TRUE(fails([](Graph& g) {  // unknown activation
    Op(g, "Linear", {g.AddInput("x", DType::kFloat32, {Sym("b"), 64}), Floats(g, "w", {64, 8})},
       {{"activation", std::string("swish")}}, 1, "surge");
  }));
  EXPECT_TRUE(fails([](Graph& g) {  // bias length
    Op(g, "Linear",
       {g.AddInput("x", DType::kFloat32, {Sym("b"), 64}), Floats(g, "w", {64, 8}),
        Floats(g, "bias", {9})},
       {}, 1, "surge");
  }));
  EXPECT_TRUE(fails([](Graph& g) {  // not 3H
    Op(g, "Attention", {g.AddInput("x", DType::kFloat32, {Sym("b"), Sym("s"), 100})},
       {{"num_heads", int64_t{2}}}, 1, "surge");
  }));
  EXPECT_TRUE(fails([](Graph& g) {  // heads do not divide H
    Op(g, "Attention", {g.AddInput("x", DType::kFloat32, {Sym("b"), Sym("s"), 192})},
       {{"num_heads", int64_t{5}}}, 1, "surge");
  }));
  EXPECT_TRUE(fails([](Graph& g) {  // no num_heads
    Op(g, "Attention", {g.AddInput("x", DType::kFloat32, {Sym("b"), Sym("s"), 192})}, {}, 1,
       "surge");
  }));
  EXPECT_TRUE(fails([](Graph& g) {  // gamma width
    Op(g, "LayerNorm",
       {g.AddInput("x", DType::kFloat32, {Sym("b"), 64}), Floats(g, "g", {32}),
        Floats(g, "b", {64})},
       {}, 1, "surge");
  }));
  EXPECT_TRUE(fails([](Graph& g) {  // pos/word width differ
    int ids = g.AddInput("ids", DType::kInt64, {Sym("b"), Sym("s")});
    Op(g, "EmbedLayerNorm",
       {ids, -1, -1, Floats(g, "w", {10, 64}), Floats(g, "p", {8, 32}), -1, Floats(g, "g", {64}),
        Floats(g, "be", {64})},
       {}, 1, "surge");
  }));
  EXPECT_TRUE(fails([](Graph& g) {  // unknown L2Normalize epsilon mode
    Op(g, "L2Normalize", {g.AddInput("x", DType::kFloat32, {Sym("b"), 64})},
       {{"eps_mode", std::string("clip")}}, 1, "surge");
  }));
  EXPECT_TRUE(fails([](Graph& g) {  // negative L2Normalize epsilon
    Op(g, "L2Normalize", {g.AddInput("x", DType::kFloat32, {Sym("b"), 64})}, {{"epsilon", -1.0}}, 1,
       "surge");
  }));
  EXPECT_TRUE(fails([](Graph& g) {  // bad position mode
    int ids = g.AddInput("ids", DType::kInt64, {Sym("b"), Sym("s")});
    Op(g, "EmbedLayerNorm",
       {ids, -1, -1, Floats(g, "w", {10, 64}), Floats(g, "p", {8, 64}), -1, Floats(g, "g", {64}),
        Floats(g, "be", {64})},
       {{"position_mode", std::string("sinusoid")}}, 1, "surge");
  }));
}

TEST(OpsSchemaTest, EveryExporterOpIsRegistered) {
  for (const char* op : {"Add",        "Sub",
                         "Mul",        "Div",
                         "Pow",        "Sqrt",
                         "Erf",        "Tanh",
                         "Relu",       "Neg",
                         "Reciprocal", "Exp",
                         "Softmax",    "MatMul",
                         "Gemm",       "Gather",
                         "GatherND",   "GatherElements",
                         "Shape",      "Unsqueeze",
                         "Squeeze",    "Concat",
                         "Reshape",    "Transpose",
                         "Slice",      "Cast",
                         "CastLike",   "ConstantOfShape",
                         "Expand",     "Equal",
                         "Where",      "Not",
                         "And",        "Or",
                         "CumSum",     "LayerNormalization",
                         "ReduceMean", "ReduceSum",
                         "Range",      "Identity",
                         "Constant",   "Less",
                         "Greater",    "GreaterOrEqual",
                         "Min",        "Max",
                         "Clip",       "Split",
                         "Dropout",    "Trilu",
                         "Flatten",    "IsNaN",
                         "Gelu"}) {
    EXPECT_NE(FindOpSchema("", op), nullptr) << op;
  }
  for (const char* op : {"Linear", "Gelu", "LayerNorm", "L2Normalize", "SkipLayerNorm",
                         "EmbedLayerNorm", "Attention"}) {
    const OpSchema* s = FindOpSchema("surge", op);
    ASSERT_NE(s, nullptr) << op;
    EXPECT_TRUE(static_cast<bool>(s->infer)) << op;
  }
  EXPECT_EQ(FindOpSchema("", "Frobnicate"), nullptr);
}

}  // namespace
}  // namespace surge::engine::ir
