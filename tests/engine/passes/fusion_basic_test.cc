// LayerNorm, Gelu, Linear, SkipLayerNorm fusions and constant folding on hand-built graphs, each
// with the near misses that must stay unfused. Numerics are compared through ir::EvalNode.
#include <gtest/gtest.h>

#include <algorithm>
#include <numbers>

#include "engine/passes/fusions.h"
#include "engine/passes/passes.h"
#include "graph_util.h"

namespace surge::engine::passes {
namespace {

using ir::Dim;
using testing::Count;
using testing::GraphBuilder;
using testing::MaxRelDiff;
using testing::RandomFloat;
using testing::RunGraph;

const Dim kB = Dim::Symbol("batch");
const Dim kS = Dim::Symbol("seq");

// Runs `pass` on a copy of b.g after shape inference; checks outputs agree on `feeds`.
ir::Graph FuseAndCompare(const ir::Graph& original, Result<int> (*pass)(ir::Graph&),
                         const std::map<std::string, Tensor>& feeds, int expected_changes,
                         double tol = 1e-5) {
  ir::Graph before = original;
  EXPECT_TRUE(InferShapes(before).ok());
  ir::Graph after = before;
  auto n = pass(after);
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  if (n.ok()) {
    EXPECT_EQ(*n, expected_changes);
  }
  EXPECT_TRUE(after.Validate().ok());
  auto ra = RunGraph(before, feeds);
  auto rb = RunGraph(after, feeds);
  EXPECT_EQ(ra.size(), rb.size());
  for (size_t i = 0; i < ra.size() && i < rb.size(); ++i) {
    EXPECT_LE(MaxRelDiff(rb[i], ra[i]), tol) << "output " << i;
  }
  // Model outputs keep their names.
  for (size_t i = 0; i < original.outputs.size(); ++i) {
    EXPECT_EQ(after.values[after.outputs[i]].name, original.values[original.outputs[i]].name);
  }
  return after;
}

// Decomposed LayerNorm over `axis` of x[2,3,8] (TorchScript opset < 17 layout).
ir::Graph DecomposedLayerNorm(int64_t axis, bool affine, bool reuse_sub = true) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {2, 3, 8});
  const int64_t width = axis == 1 ? 3 : 8;
  Shape ch = axis == 1 ? Shape{3, 1} : Shape{8};
  int mean = b.Op("ReduceMean", {x}, {{"axes", std::vector<int64_t>{axis}}});
  int d = b.Op("Sub", {x, mean});
  int d2 = reuse_sub ? d : b.Op("Sub", {x, mean});
  int sq = b.Op("Pow", {d2, b.F(2.0f)});
  int var = b.Op("ReduceMean", {sq}, {{"axes", std::vector<int64_t>{axis}}});
  int std_ = b.Op("Sqrt", {b.Op("Add", {var, b.F(1e-12f)})});
  int y = b.Op("Div", {d, std_});
  if (affine) {
    y = b.Op("Mul", {y, b.Const("gamma", RandomFloat(ch, 1))});
    y = b.Op("Add", {y, b.Const("beta", RandomFloat(ch, 2))});
  }
  (void)width;
  b.Output(y);
  return b.g;
}

TEST(FuseLayerNorm, DecomposedLastAxis) {
  std::map<std::string, Tensor> feeds{{"x", RandomFloat({2, 3, 8}, 7)}};
  for (bool affine : {true, false}) {
    for (bool reuse : {true, false}) {
      ir::Graph g = FuseAndCompare(DecomposedLayerNorm(-1, affine, reuse), FuseLayerNorm, feeds, 1);
      EXPECT_EQ(g.nodes.size(), 1u);
      EXPECT_EQ(Count(g, "surge::LayerNorm"), 1);
      EXPECT_NEAR(g.nodes[0].GetFloat("epsilon", 0), 1e-12, 1e-18);
    }
  }
  // axes given as the positive last axis.
  ir::Graph g = FuseAndCompare(DecomposedLayerNorm(2, true), FuseLayerNorm, feeds, 1);
  EXPECT_EQ(Count(g, "surge::LayerNorm"), 1);
}

TEST(FuseLayerNorm, NonLastAxisIsNotFused) {
  std::map<std::string, Tensor> feeds{{"x", RandomFloat({2, 3, 8}, 7)}};
  ir::Graph g = FuseAndCompare(DecomposedLayerNorm(1, true), FuseLayerNorm, feeds, 0);
  EXPECT_EQ(Count(g, "surge::LayerNorm"), 0);
  EXPECT_EQ(Count(g, "ReduceMean"), 2);
}

TEST(FuseLayerNorm, IntermediateUsedElsewhereIsNotFused) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {2, 8});
  int mean = b.Op("ReduceMean", {x}, {{"axes", std::vector<int64_t>{-1}}});
  int d = b.Op("Sub", {x, mean});
  int var = b.Op("ReduceMean", {b.Op("Mul", {d, d})}, {{"axes", std::vector<int64_t>{-1}}});
  int y = b.Op("Div", {d, b.Op("Sqrt", {b.Op("Add", {var, b.F(1e-5f)})})});
  b.Output(y);
  b.Output(mean);  // the mean escapes
  std::map<std::string, Tensor> feeds{{"x", RandomFloat({2, 8}, 3)}};
  FuseAndCompare(b.g, FuseLayerNorm, feeds, 0);
}

TEST(FuseLayerNorm, LayerNormalizationOp) {
  for (int64_t axis : {int64_t{-1}, int64_t{2}, int64_t{1}}) {
    GraphBuilder b;
    int x = b.Input("x", DType::kFloat32, {kB, 3, 8});
    Shape ch = axis == 1 ? Shape{3, 8} : Shape{8};
    int y = b.Op("LayerNormalization",
                 {x, b.Const("g", RandomFloat(ch, 1)), b.Const("b", RandomFloat(ch, 2))},
                 {{"axis", axis}, {"epsilon", 1e-6}});
    b.Output(y);
    std::map<std::string, Tensor> feeds{{"x", RandomFloat({2, 3, 8}, 7)}};
    ir::Graph g = FuseAndCompare(b.g, FuseLayerNorm, feeds, axis == 1 ? 0 : 1);
    EXPECT_EQ(Count(g, "surge::LayerNorm"), axis == 1 ? 0 : 1) << axis;
  }
}

// Linear-shaped input for activations: x[2,4,6].
enum class GeluForm { kTorchScript, kDynamo, kHfMulFirst, kMulBySqrtHalf, kTanh, kTanhMuls };

ir::Graph GeluGraph(GeluForm form, float half = 0.5f, float sqrt2 = std::numbers::sqrt2_v<float>) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {2, 4, 6});
  int y = -1;
  switch (form) {
    case GeluForm::kTorchScript: {  // Mul(Mul(x, 1 + erf(x / sqrt2)), 0.5)
      int e = b.Op("Erf", {b.Op("Div", {x, b.F(sqrt2)})});
      y = b.Op("Mul", {b.Op("Mul", {x, b.Op("Add", {e, b.F(1.0f)})}), b.F(half)});
      break;
    }
    case GeluForm::kDynamo: {  // Mul(0.5, Mul(x, Add(1, erf)))
      int e = b.Op("Erf", {b.Op("Div", {x, b.F(sqrt2)})});
      y = b.Op("Mul", {b.F(half), b.Op("Mul", {x, b.Op("Add", {b.F(1.0f), e})})});
      break;
    }
    case GeluForm::kHfMulFirst: {  // x * 0.5 * (1 + erf)
      int e = b.Op("Erf", {b.Op("Div", {x, b.F(sqrt2)})});
      y = b.Op("Mul", {b.Op("Mul", {x, b.F(half)}), b.Op("Add", {b.F(1.0f), e})});
      break;
    }
    case GeluForm::kMulBySqrtHalf: {
      int e = b.Op("Erf", {b.Op("Mul", {x, b.F(1.0f / sqrt2)})});
      y = b.Op("Mul", {b.Op("Mul", {x, b.F(half)}), b.Op("Add", {b.F(1.0f), e})});
      break;
    }
    case GeluForm::kTanh:
    case GeluForm::kTanhMuls: {
      int cube = form == GeluForm::kTanh ? b.Op("Pow", {x, b.F(3.0f)})
                                         : b.Op("Mul", {b.Op("Mul", {x, x}), x});
      int inner = b.Op("Add", {x, b.Op("Mul", {b.F(0.044715f), cube})});
      int t =
          b.Op("Tanh", {b.Op("Mul", {b.F(std::sqrt(2.0f / std::numbers::pi_v<float>)), inner})});
      y = b.Op("Mul", {b.F(half), b.Op("Mul", {x, b.Op("Add", {t, b.F(1.0f)})})});
      break;
    }
  }
  b.Output(y);
  return b.g;
}

TEST(FuseGelu, AllForms) {
  std::map<std::string, Tensor> feeds{{"x", RandomFloat({2, 4, 6}, 9, 2.0f)}};
  for (GeluForm f : {GeluForm::kTorchScript, GeluForm::kDynamo, GeluForm::kHfMulFirst,
                     GeluForm::kMulBySqrtHalf, GeluForm::kTanh, GeluForm::kTanhMuls}) {
    ir::Graph g = FuseAndCompare(GeluGraph(f), FuseGelu, feeds, 1);
    ASSERT_EQ(g.nodes.size(), 1u) << static_cast<int>(f);
    EXPECT_EQ(g.nodes[0].op_type, "Gelu");
    bool tanh = f == GeluForm::kTanh || f == GeluForm::kTanhMuls;
    EXPECT_EQ(g.nodes[0].GetString("approximate", ""), tanh ? "tanh" : "none");
  }
}

TEST(FuseGelu, WrongConstantsAreNotFused) {
  std::map<std::string, Tensor> feeds{{"x", RandomFloat({2, 4, 6}, 9)}};
  FuseAndCompare(GeluGraph(GeluForm::kTorchScript, 0.4f), FuseGelu, feeds, 0);
  FuseAndCompare(GeluGraph(GeluForm::kDynamo, 0.5f, 2.0f), FuseGelu, feeds, 0);
  FuseAndCompare(GeluGraph(GeluForm::kTanh, 0.6f), FuseGelu, feeds, 0);
}

TEST(FuseGelu, DifferentOperandsAreNotFused) {
  // x * 0.5 * (1 + erf(z / sqrt2)) with z != x.
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {4});
  int z = b.Input("z", DType::kFloat32, {4});
  int e = b.Op("Erf", {b.Op("Div", {z, b.F(std::numbers::sqrt2_v<float>)})});
  b.Output(b.Op("Mul", {b.Op("Mul", {x, b.F(0.5f)}), b.Op("Add", {e, b.F(1.0f)})}));
  FuseAndCompare(b.g, FuseGelu, {{"x", RandomFloat({4}, 1)}, {"z", RandomFloat({4}, 2)}}, 0);
}

TEST(FuseGelu, OnnxGeluOp) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {3, 5});
  b.Output(b.Op("Gelu", {x}, {{"approximate", std::string("tanh")}}));
  b.g.opset = 20;
  ir::Graph g = b.g;
  auto n = FuseGelu(g);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(Count(g, "surge::Gelu"), 1);
  EXPECT_EQ(g.nodes[0].GetString("approximate", ""), "tanh");
}

enum class L2Form { kDemo, kPowEpsFirst, kSumSquareNoEps, kTorchNormalize, kMaxOfSqrt };

// y = x / ||x|| over the last axis of x[2,3,8] in the forms exporters write; `axis` is the reduced
// axis and `other` the value squared (x unless a near miss is built).
ir::Graph L2Graph(L2Form f, int64_t axis = -1, bool square_other = false) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {2, 3, 8});
  int z = square_other ? b.Input("z", DType::kFloat32, {2, 3, 8}) : x;
  const std::vector<int64_t> axes{axis};
  auto sum_sq = [&](bool pow) {
    int sq = pow ? b.Op("Pow", {z, b.F(2.0f)}) : b.Op("Mul", {z, z});
    return b.Op("ReduceSum", {sq, b.I(axes)}, {{"keepdims", int64_t{1}}});
  };
  int y = -1;
  switch (f) {
    case L2Form::kDemo:  // tools/demo_model: cls / sqrt((cls * cls).sum(-1, keepdim) + 1e-12)
      y = b.Op("Div", {x, b.Op("Sqrt", {b.Op("Add", {sum_sq(false), b.F(1e-12f)})})});
      break;
    case L2Form::kPowEpsFirst:
      y = b.Op("Div", {x, b.Op("Sqrt", {b.Op("Add", {b.F(1e-6f), sum_sq(true)})})});
      break;
    case L2Form::kSumSquareNoEps:
      y = b.Op("Div", {x, b.Op("Sqrt", {b.Op("ReduceSumSquare", {z, b.I(axes)})})});
      break;
    case L2Form::kTorchNormalize: {  // F.normalize: x / Clip(ReduceL2(x), eps).expand_as(x)
      int n = b.Op("ReduceL2", {z, b.I(axes)}, {{"keepdims", int64_t{1}}});
      n = b.Op("Clip", {n, b.F(1e-12f)});
      y = b.Op("Div", {x, b.Op("Expand", {n, b.Op("Shape", {x})})});
      break;
    }
    case L2Form::kMaxOfSqrt:
      y = b.Op("Div", {x, b.Op("Max", {b.Op("Sqrt", {sum_sq(false)}), b.F(1e-4f)})});
      break;
  }
  b.Output(y);
  b.g.opset = 18;
  return b.g;
}

TEST(FuseL2Normalize, AllForms) {
  std::map<std::string, Tensor> feeds{{"x", RandomFloat({2, 3, 8}, 5, 3.0f)}};
  for (L2Form f : {L2Form::kDemo, L2Form::kPowEpsFirst, L2Form::kSumSquareNoEps,
                   L2Form::kTorchNormalize, L2Form::kMaxOfSqrt}) {
    ir::Graph g = FuseAndCompare(L2Graph(f), FuseL2Normalize, feeds, 1);
    ASSERT_EQ(Count(g, "surge::L2Normalize"), 1) << static_cast<int>(f);
    EXPECT_EQ(g.nodes.size(), 1u) << static_cast<int>(f);
    const bool max = f == L2Form::kTorchNormalize || f == L2Form::kMaxOfSqrt;
    EXPECT_EQ(g.nodes[0].GetString("eps_mode", ""), max ? "max" : "add");
    const double eps = f == L2Form::kDemo || f == L2Form::kTorchNormalize ? 1e-12
                       : f == L2Form::kPowEpsFirst                        ? 1e-6
                       : f == L2Form::kMaxOfSqrt                          ? 1e-4
                                                                          : 0.0;
    EXPECT_NEAR(g.nodes[0].GetFloat("epsilon", -1), eps, eps * 1e-6 + 1e-30);
  }
  // The positive last axis.
  EXPECT_EQ(Count(FuseAndCompare(L2Graph(L2Form::kDemo, 2), FuseL2Normalize, feeds, 1),
                  "surge::L2Normalize"),
            1);
}

TEST(FuseL2Normalize, NearMissesAreNotFused) {
  std::map<std::string, Tensor> feeds{{"x", RandomFloat({2, 3, 8}, 5)},
                                      {"z", RandomFloat({2, 3, 8}, 6)}};
  // Another axis, or the squares of another tensor.
  FuseAndCompare(L2Graph(L2Form::kDemo, 1), FuseL2Normalize, feeds, 0);
  FuseAndCompare(L2Graph(L2Form::kTorchNormalize, 0), FuseL2Normalize, feeds, 0);
  FuseAndCompare(L2Graph(L2Form::kDemo, -1, true), FuseL2Normalize, feeds, 0);
  FuseAndCompare(L2Graph(L2Form::kTorchNormalize, -1, true), FuseL2Normalize, feeds, 0);
  // The sum of squares is used elsewhere.
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {2, 3, 8});
  int ss = b.Op("ReduceSum", {b.Op("Mul", {x, x}), b.I({-1})}, {{"keepdims", int64_t{1}}});
  b.Output(b.Op("Div", {x, b.Op("Sqrt", {b.Op("Add", {ss, b.F(1e-12f)})})}));
  b.Output(ss);
  b.g.opset = 18;
  FuseAndCompare(b.g, FuseL2Normalize, feeds, 0);
  // Without keepdims the division would broadcast over another axis.
  GraphBuilder c;
  int x2 = c.Input("x", DType::kFloat32, {8, 8});
  int ss2 = c.Op("ReduceSum", {c.Op("Mul", {x2, x2}), c.I({-1})}, {{"keepdims", int64_t{0}}});
  c.Output(c.Op("Div", {x2, c.Op("Sqrt", {ss2})}));
  c.g.opset = 18;
  FuseAndCompare(c.g, FuseL2Normalize, {{"x", RandomFloat({8, 8}, 7)}}, 0);
}

ir::Graph LinearGraph(bool bias, bool transposed_weight, bool gemm, bool weight_is_input = false) {
  GraphBuilder b;
  int x = b.Input(gemm ? "x" : "x", DType::kFloat32,
                  gemm ? ir::SymShape{kB, 6} : ir::SymShape{kB, kS, 6});
  int y;
  if (gemm) {
    int w = b.Const("w", RandomFloat({5, 6}, 3));  // [N,K], transB
    std::vector<int> ins{x, w};
    if (bias) ins.push_back(b.Const("bias", RandomFloat({5}, 4)));
    y = b.Op("Gemm", ins, {{"transB", int64_t{1}}});
  } else {
    int w = weight_is_input     ? b.Input("w", DType::kFloat32, {6, 5})
            : transposed_weight ? b.Op("Transpose", {b.Const("wt", RandomFloat({5, 6}, 3))},
                                       {{"perm", std::vector<int64_t>{1, 0}}})
                                : b.Const("w", RandomFloat({6, 5}, 3));
    y = b.Op("MatMul", {x, w});
    if (bias) y = b.Op("Add", {b.Const("bias", RandomFloat({5}, 4)), y});
  }
  b.Output(y);
  return b.g;
}

TEST(FuseLinear, MatMulAddGemmTranspose) {
  std::map<std::string, Tensor> f3{{"x", RandomFloat({2, 3, 6}, 5)}};
  std::map<std::string, Tensor> f2{{"x", RandomFloat({4, 6}, 5)}};
  for (bool bias : {true, false}) {
    ir::Graph g = FuseAndCompare(LinearGraph(bias, false, false), FuseLinear, f3, 1);
    ASSERT_EQ(g.nodes.size(), 1u);
    EXPECT_EQ(g.nodes[0].op_type, "Linear");
    EXPECT_EQ(g.nodes[0].inputs.size(), bias ? 3u : 2u);
    g = FuseAndCompare(LinearGraph(bias, true, false), FuseLinear, f3, 1);
    ASSERT_EQ(g.nodes.size(), 1u);
    EXPECT_EQ(g.values[g.nodes[0].inputs[1]].constant.shape(), (Shape{6, 5}));
    g = FuseAndCompare(LinearGraph(bias, false, true), FuseLinear, f2, 1);
    ASSERT_EQ(g.nodes.size(), 1u);
    EXPECT_EQ(g.nodes[0].op_type, "Linear");
  }
}

TEST(FuseLinear, FlattenedGemmLosesItsReshapes) {
  for (bool matching : {true, false}) {
    GraphBuilder b;
    int x = b.Input("x", DType::kFloat32, {kB, kS, 6});
    int x2 = b.Op("Reshape", {x, b.I({-1, 6})});
    int y2 =
        b.Op("Gemm", {x2, b.Const("w", RandomFloat({5, 6}, 3)), b.Const("c", RandomFloat({5}, 4))},
             {{"transB", int64_t{1}}});
    int lead = b.Op("Slice", {b.Op("Shape", {x}), b.I({0}), b.I({2})});
    // The inverse reshape, or one that swaps the leading dims (must keep both reshapes).
    int target = matching ? b.Op("Concat", {lead, b.I({5})}, {{"axis", int64_t{0}}})
                          : b.Op("Concat",
                                 {b.Op("Slice", {lead, b.I({1}), b.I({2})}),
                                  b.Op("Slice", {lead, b.I({0}), b.I({1})}), b.I({5})},
                                 {{"axis", int64_t{0}}});
    b.Output(b.Op("Reshape", {y2, target}));
    ir::Graph g =
        FuseAndCompare(b.g, FuseLinear, {{"x", RandomFloat({2, 3, 6}, 5)}}, matching ? 2 : 1);
    EXPECT_EQ(Count(g, "Reshape"), matching ? 0 : 2);
    EXPECT_EQ(Count(g, "surge::Linear"), 1);
  }
}

TEST(FuseLinear, NonConstantWeightIsNotFused) {
  std::map<std::string, Tensor> feeds{{"x", RandomFloat({2, 3, 6}, 5)},
                                      {"w", RandomFloat({6, 5}, 6)}};
  ir::Graph g = FuseAndCompare(LinearGraph(true, false, false, true), FuseLinear, feeds, 0);
  EXPECT_EQ(Count(g, "MatMul"), 1);
}

TEST(FuseLinear, NonBiasAddStaysOutside) {
  // MatMul + a [3,5] constant (not per-column) keeps its Add.
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {2, 3, 6});
  int y = b.Op("MatMul", {x, b.Const("w", RandomFloat({6, 5}, 3))});
  b.Output(b.Op("Add", {y, b.Const("c", RandomFloat({3, 5}, 4))}));
  ir::Graph g = FuseAndCompare(b.g, FuseLinear, {{"x", RandomFloat({2, 3, 6}, 5)}}, 1);
  EXPECT_EQ(Count(g, "surge::Linear"), 1);
  EXPECT_EQ(Count(g, "Add"), 1);
}

TEST(FuseLinearActivation, GeluTanhRelu) {
  for (const char* act : {"gelu", "Tanh", "Relu"}) {
    GraphBuilder b;
    int x = b.Input("x", DType::kFloat32, {2, 3, 6});
    int y = b.Op("Add", {b.Op("MatMul", {x, b.Const("w", RandomFloat({6, 5}, 3))}),
                         b.Const("bias", RandomFloat({5}, 4))});
    if (std::string(act) == "gelu") {
      int e = b.Op("Erf", {b.Op("Div", {y, b.F(std::numbers::sqrt2_v<float>)})});
      y = b.Op("Mul", {b.Op("Mul", {y, b.Op("Add", {e, b.F(1.0f)})}), b.F(0.5f)});
    } else {
      y = b.Op(act, {y});
    }
    b.Output(y);
    auto all = [](ir::Graph& g) -> Result<int> {
      int n = 0;
      for (auto* p : {FuseGelu, FuseLinear, FuseLinearActivation}) {
        auto r = p(g);
        if (!r.ok()) return r.status();
        n += *r;
      }
      return n;
    };
    ir::Graph g = FuseAndCompare(b.g, all, {{"x", RandomFloat({2, 3, 6}, 5)}},
                                 std::string(act) == "gelu" ? 3 : 2);
    ASSERT_EQ(g.nodes.size(), 1u) << act;
    std::string expect = std::string(act) == "gelu"   ? "gelu"
                         : std::string(act) == "Tanh" ? "tanh"
                                                      : "relu";
    EXPECT_EQ(g.nodes[0].GetString("activation", ""), expect);
  }
}

TEST(FuseLinearActivation, SharedLinearOutputKeepsActivationSeparate) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {2, 6});
  int y = b.Op("MatMul", {x, b.Const("w", RandomFloat({6, 5}, 3))});
  b.Output(b.Op("Relu", {y}));
  b.Output(y);
  ir::Graph g = b.g;
  ASSERT_TRUE(InferShapes(g).ok());
  ASSERT_EQ(*FuseLinear(g), 1);
  EXPECT_EQ(*FuseLinearActivation(g), 0);
  EXPECT_EQ(Count(g, "Relu"), 1);
}

ir::Graph SkipGraph(bool keep_sum, bool broadcast, bool bias_add) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {kB, 4, 8});
  int skip =
      b.Input("skip", DType::kFloat32, broadcast ? ir::SymShape{1, 4, 8} : ir::SymShape{kB, 4, 8});
  int h = b.Op("MatMul", {x, b.Const("w", RandomFloat({8, 8}, 1))});
  if (bias_add) h = b.Op("Add", {h, b.Const("bias", RandomFloat({8}, 2))});
  int sum = b.Op("Add", {h, skip});
  int y = b.Op("LayerNormalization",
               {sum, b.Const("g", RandomFloat({8}, 3)), b.Const("b", RandomFloat({8}, 4))},
               {{"epsilon", 1e-12}});
  b.Output(y);
  if (keep_sum) b.Output(b.Op("Mul", {sum, b.F(2.0f)}));
  return b.g;
}

Result<int> LnThenSkip(ir::Graph& g) {
  auto a = FuseLayerNorm(g);
  if (!a.ok()) return a;
  return FuseSkipLayerNorm(g);
}

TEST(FuseSkipLayerNorm, PlainAndWithSum) {
  std::map<std::string, Tensor> feeds{{"x", RandomFloat({2, 4, 8}, 5)},
                                      {"skip", RandomFloat({2, 4, 8}, 6)}};
  for (bool keep_sum : {false, true}) {
    ir::Graph g = FuseAndCompare(SkipGraph(keep_sum, false, true), LnThenSkip, feeds, 1);
    ASSERT_EQ(Count(g, "surge::SkipLayerNorm"), 1);
    for (const auto& n : g.nodes) {
      if (n.op_type == "SkipLayerNorm") {
        EXPECT_EQ(n.outputs.size(), keep_sum ? 2u : 1u);
        EXPECT_EQ(n.inputs.size(), 5u);  // bias taken from the Add before the residual
      }
    }
    EXPECT_EQ(Count(g, "Add"), 0);
  }
}

TEST(FuseSkipLayerNorm, AfterLinearWithBias) {
  std::map<std::string, Tensor> feeds{{"x", RandomFloat({2, 4, 8}, 5)},
                                      {"skip", RandomFloat({2, 4, 8}, 6)}};
  auto all = [](ir::Graph& g) -> Result<int> {
    int n = 0;
    for (auto* p : {FuseLayerNorm, FuseLinear, FuseSkipLayerNorm, FuseLinearResidual}) {
      auto r = p(g);
      if (!r.ok()) return r.status();
      n += *r;
    }
    return n;
  };
  ir::Graph g = FuseAndCompare(SkipGraph(false, false, true), all, feeds, 3);
  EXPECT_EQ(Count(g, "surge::Linear"), 1);
  EXPECT_EQ(Count(g, "surge::SkipLayerNorm"), 1);
  EXPECT_EQ(g.nodes.size(), 2u);
}

TEST(FuseSkipLayerNorm, BroadcastAddIsNotFused) {
  std::map<std::string, Tensor> feeds{{"x", RandomFloat({2, 4, 8}, 5)},
                                      {"skip", RandomFloat({1, 4, 8}, 6)}};
  ir::Graph g = FuseAndCompare(SkipGraph(false, true, false), LnThenSkip, feeds, 0);
  EXPECT_EQ(Count(g, "surge::LayerNorm"), 1);
  EXPECT_EQ(Count(g, "surge::SkipLayerNorm"), 0);
}

TEST(FuseLinearResidual, ResidualWithoutNorm) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {2, 3, 8});
  int h = b.Op("Add", {b.Op("MatMul", {x, b.Const("w", RandomFloat({8, 8}, 1))}),
                       b.Const("bias", RandomFloat({8}, 2))});
  b.Output(b.Op("Add", {x, h}));
  auto all = [](ir::Graph& g) -> Result<int> {
    auto a = FuseLinear(g);
    if (!a.ok()) return a;
    return FuseLinearResidual(g);
  };
  ir::Graph g = FuseAndCompare(b.g, all, {{"x", RandomFloat({2, 3, 8}, 3)}}, 1);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].inputs.size(), 4u);
  EXPECT_EQ(g.nodes[0].inputs[3], g.inputs[0]);
}

TEST(FoldConstants, FoldsConstantChainsAndShapes) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {kB, 4});
  // sqrt(2) computed at run time from constants, and Shape of a static tensor.
  int c = b.Op("Sqrt", {b.F(2.0f)});
  int w = b.Const("w", RandomFloat({4, 3}, 1));
  int wt = b.Op("Transpose", {b.Const("wt", RandomFloat({3, 4}, 2))},
                {{"perm", std::vector<int64_t>{1, 0}}});
  int shape = b.Op("Shape", {w});
  int y = b.Op("Div", {b.Op("Add", {b.Op("MatMul", {x, w}), b.Op("MatMul", {x, wt})}), c});
  b.Output(y);
  b.Output(b.Op("Cast", {shape}, {{"to", int64_t{1}}}));
  ir::Graph g = b.g;
  ASSERT_TRUE(InferShapes(g).ok());
  ir::Graph before = g;
  auto n = FoldConstants(g);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 3);  // Sqrt, Transpose, Shape
  EXPECT_EQ(Count(g, "Sqrt"), 0);
  EXPECT_EQ(Count(g, "Transpose"), 0);
  EXPECT_EQ(Count(g, "Shape"), 0);
  std::map<std::string, Tensor> feeds{{"x", RandomFloat({2, 4}, 3)}};
  auto ra = RunGraph(before, feeds), rb = RunGraph(g, feeds);
  ASSERT_EQ(ra.size(), 2u);
  ASSERT_EQ(rb.size(), 2u);
  EXPECT_LE(MaxRelDiff(rb[0], ra[0]), 1e-6);
  EXPECT_LE(MaxRelDiff(rb[1], ra[1]), 0);
}

TEST(FoldConstants, LargeExpandIsKept) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {512, 1024});
  // 512x1024 floats = 2 MiB from a scalar: too large to materialise.
  int big = b.Op("Expand", {b.F(1.0f), b.I({512, 1024})});
  b.Output(b.Op("Add", {x, big}));
  // The same expansion read only by Shape folds.
  int big2 = b.Op("Expand", {b.F(1.0f), b.I({512, 1024})});
  b.Output(b.Op("Cast", {b.Op("Shape", {big2})}, {{"to", int64_t{1}}}));
  ir::Graph g = b.g;
  ASSERT_TRUE(InferShapes(g).ok());
  auto n = FoldConstants(g);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(Count(g, "Expand"), 1);
  EXPECT_LT(g.ConstantBytes(), size_t{1} << 20);
}

TEST(FoldConstants, HalfWeightCastIsFolded) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {2, 1024});
  // A 2 MiB fp16 weight cast to a 4 MiB fp32 one: a widening, not a broadcast.
  int w = b.Const("w16", RandomFloat({1024, 1024}, 1).CastFromFloat32(DType::kFloat16));
  b.Output(b.Op("MatMul", {x, b.Op("Cast", {w}, {{"to", int64_t{1}}})}));
  ir::Graph g = b.g;
  ASSERT_TRUE(InferShapes(g).ok());
  auto n = FoldConstants(g);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(Count(g, "Cast"), 0);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.values[g.nodes[0].inputs[1]].constant.dtype(), DType::kFloat32);
}

TEST(FoldConstants, ConstantNodesBecomeValues) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {3});
  int c = b.Op("Constant", {}, {{"value_floats", std::vector<double>{1.0, 2.0, 3.0}}});
  int y = b.Op("Mul", {x, b.Op("Neg", {c})});
  b.Output(y);
  ir::Graph g = b.g;
  auto n = FoldConstants(g);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2);  // Constant, then Neg of it
  ASSERT_EQ(g.nodes.size(), 1u);
  const Tensor& folded = g.values[g.nodes[0].inputs[1]].constant;
  ASSERT_TRUE(folded.defined());
  EXPECT_EQ(folded.GetDouble(2), -3.0);
}

TEST(RemoveIdentities, IdentityDropoutAndNoOpCast) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {2, 3});
  int y = b.Op("Identity", {x});
  y = b.Op("Dropout", {y, b.F(0.1f)});
  y = b.Op("Cast", {y}, {{"to", int64_t{1}}});
  y = b.Op("Relu", {y});
  // A Dropout in training mode and a real Cast stay.
  int t = b.Op("Dropout", {y, b.F(0.5f), b.g.AddConstant("train", Tensor(DType::kBool, {}))});
  b.g.values[b.g.nodes.back().inputs[2]].constant.data_as<uint8_t>()[0] = 1;
  b.Output(b.Op("Cast", {t}, {{"to", int64_t{10}}}));
  ir::Graph g = b.g;
  ASSERT_TRUE(InferShapes(g).ok());
  auto n = RemoveIdentities(g);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 3);
  EXPECT_EQ(Count(g, "Identity"), 0);
  EXPECT_EQ(Count(g, "Dropout"), 1);
  EXPECT_EQ(Count(g, "Cast"), 1);
  EXPECT_TRUE(g.Validate().ok());
}

TEST(RemoveIdentities, AnOutputIdentityHandsItsNameToTheValueBefore) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {2, 3});
  int r = b.Op("Relu", {x});
  int out = b.Op("Identity", {r});
  b.g.values[out].name = "last_hidden_state";
  b.Output(out);
  // An Identity of a graph input, and one of a value that is an output too, stay.
  int kept_in = b.Op("Identity", {x});
  b.Output(kept_in);
  int s = b.Op("Sigmoid", {x});
  b.Output(s);
  b.Output(b.Op("Identity", {s}));
  ir::Graph g = b.g;
  ASSERT_TRUE(InferShapes(g).ok());
  auto n = RemoveIdentities(g);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(Count(g, "Identity"), 2);
  ASSERT_EQ(g.outputs.size(), 4u);
  const ir::Value& o = g.values[g.outputs[0]];
  EXPECT_EQ(o.name, "last_hidden_state");
  ASSERT_GE(o.producer, 0);
  EXPECT_EQ(g.nodes[o.producer].op_type, "Relu");
  EXPECT_EQ(g.FindValue("last_hidden_state"), g.outputs[0]);
  EXPECT_TRUE(g.Validate().ok());
  Tensor xv(DType::kFloat32, {2, 3});
  for (int i = 0; i < 6; ++i) xv.data_as<float>()[i] = static_cast<float>(i) - 2.5f;
  const std::vector<Tensor> got = RunGraph(g, {{"x", xv}});
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(got[0].data_as<float>()[i], std::max(0.f, static_cast<float>(i) - 2.5f));
  }
}

TEST(Optimize, ReportsPassesAndCounts) {
  ir::Graph g = SkipGraph(false, false, true);
  PassReport report;
  ASSERT_TRUE(Optimize(g, PassOptions{}, &report).ok());
  EXPECT_EQ(report.ops_before.at("MatMul"), 1);
  EXPECT_EQ(report.ops_after.at("surge::SkipLayerNorm"), 1);
  EXPECT_EQ(report.ops_after.at("surge::Linear"), 1);
  EXPECT_GE(report.log.size(), 10u);
  // Without fusion nothing becomes a Surge op.
  ir::Graph g2 = SkipGraph(false, false, true);
  PassReport r2;
  ASSERT_TRUE(Optimize(g2, PassOptions{.fuse = false}, &r2).ok());
  EXPECT_EQ(r2.ops_after.count("surge::Linear"), 0u);
}

TEST(Optimize, CycleIsAnError) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {2});
  int a = b.g.AddValue("a");
  int c = b.Op("Add", {x, a});
  ir::Node n;
  n.op_type = "Relu";
  n.name = "loop";
  n.inputs = {c};
  n.outputs = {a};
  b.g.AddNode(n);
  b.Output(c);
  PassReport report;
  Status s = Optimize(b.g, PassOptions{}, &report);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cycle"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace surge::engine::passes
