// Attention (with QKV merge and mask tracing) and EmbedLayerNorm fusions on hand-built graphs in
// the layouts of both exporters, and the near misses that must stay unfused.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/passes/fusions.h"
#include "engine/passes/passes.h"
#include "graph_util.h"

namespace surge::engine::passes {
namespace {

using ir::Dim;
using testing::Count;
using testing::GraphBuilder;
using testing::Ints;
using testing::MaxRelDiff;
using testing::RandomFloat;
using testing::RunGraph;

const Dim kB = Dim::Symbol("batch");
const Dim kS = Dim::Symbol("seq");
constexpr int64_t kHidden = 8, kHeads = 2, kHeadDim = 4;

enum class MaskForm {
  kNone,
  kTorchScript,    // (1 - float(mask[:, None, None, :])) * -10000
  kFinfoWhere,     // inverted = 1 - mask; Where(bool(inverted), finfo.min, inverted)
  kWrongPolarity,  // mask * -10000: masks the attended keys
  kDistilWhere,    // Where(mask == 0, min, scores)
};

enum class ScaleForm { kDivScores, kSplitQK, kMulQ };

struct AttentionSpec {
  MaskForm mask = MaskForm::kTorchScript;
  ScaleForm scale = ScaleForm::kDivScores;
  bool two_transposes_on_k = false;
  bool sdpa_key_swap =
      false;                  // K^T as Reshape(Transpose(Reshape(k, [-1,S,d]), [0,2,1]), [B,h,d,S])
  bool cross = false;         // K/V from a different input
  int64_t softmax_axis = -1;  // 2: not the key axis
};

int Linear(GraphBuilder& b, int x, uint32_t seed) {
  int mm = b.Op("MatMul", {x, b.Const("w", RandomFloat({kHidden, kHidden}, seed, 0.5f))});
  return b.Op("Add", {mm, b.Const("b", RandomFloat({kHidden}, seed + 100, 0.1f))});
}

int SplitHeads(GraphBuilder& b, int v, std::vector<int64_t> perm) {
  int r = b.Op("Reshape", {v, b.I({0, 0, kHeads, kHeadDim})});
  return b.Op("Transpose", {r}, {{"perm", perm}});
}

ir::Graph AttentionGraph(const AttentionSpec& spec) {
  GraphBuilder b;
  int x = b.Input("x", DType::kFloat32, {kB, kS, kHidden});
  int mask = b.Input("attention_mask", DType::kInt64, {kB, kS});
  int kv_in = spec.cross ? b.Input("memory", DType::kFloat32, {kB, kS, kHidden}) : x;
  int q = SplitHeads(b, Linear(b, x, 1), {0, 2, 1, 3});
  int k;
  if (spec.sdpa_key_swap) {
    int k4 = SplitHeads(b, Linear(b, kv_in, 2), {0, 2, 1, 3});
    int shape = b.Op("Shape", {k4});
    auto dims = [&](int64_t from, int64_t to) {
      return b.Op("Slice", {shape, b.I({from}), b.I({to})});
    };
    int k3 = b.Op("Reshape", {k4, b.Op("Concat", {b.I({-1}), dims(2, 4)}, {{"axis", int64_t{0}}})});
    int kt = b.Op("Transpose", {k3}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
    k = b.Op("Reshape",
             {kt, b.Op("Concat", {dims(0, 2), dims(3, 4), dims(2, 3)}, {{"axis", int64_t{0}}})});
  } else if (spec.two_transposes_on_k) {
    k = b.Op("Transpose", {SplitHeads(b, Linear(b, kv_in, 2), {0, 2, 1, 3})},
             {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  } else {
    k = SplitHeads(b, Linear(b, kv_in, 2), {0, 2, 3, 1});
  }
  int v = SplitHeads(b, Linear(b, kv_in, 3), {0, 2, 1, 3});
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  if (spec.scale == ScaleForm::kSplitQK) {
    q = b.Op("Mul", {q, b.F(std::sqrt(inv_sqrt_d))});
    k = b.Op("Mul", {k, b.F(std::sqrt(inv_sqrt_d))});
  } else if (spec.scale == ScaleForm::kMulQ) {
    q = b.Op("Mul", {b.F(inv_sqrt_d), q});
  }
  int scores = b.Op("MatMul", {q, k});
  if (spec.scale == ScaleForm::kDivScores) {
    scores = b.Op("Div", {scores, b.F(std::sqrt(static_cast<float>(kHeadDim)))});
  }
  int m4 = b.Op("Unsqueeze", {b.Op("Unsqueeze", {mask, b.I({1})}), b.I({2})});
  const float kMin = std::numeric_limits<float>::lowest();
  switch (spec.mask) {
    case MaskForm::kNone:
      break;
    case MaskForm::kTorchScript: {
      int mf = b.Op("Cast", {m4}, {{"to", int64_t{1}}});
      int bias = b.Op("Mul", {b.Op("Sub", {b.F(1.0f), mf}), b.F(-10000.0f)});
      scores = b.Op("Add", {scores, bias});
      break;
    }
    case MaskForm::kFinfoWhere: {
      int mf = b.Op("Cast", {b.Op("Expand", {m4, b.I({1, 1, 1, 1})})}, {{"to", int64_t{1}}});
      int inv = b.Op("Sub", {b.F(1.0f), mf});
      int cond = b.Op("Cast", {inv}, {{"to", int64_t{9}}});
      int bias = b.Op("Where", {cond, b.F(kMin), inv});
      scores = b.Op("Add", {bias, scores});
      break;
    }
    case MaskForm::kWrongPolarity: {
      int mf = b.Op("Cast", {m4}, {{"to", int64_t{1}}});
      scores = b.Op("Add", {scores, b.Op("Mul", {mf, b.F(-10000.0f)})});
      break;
    }
    case MaskForm::kDistilWhere: {
      int cond = b.Op("Equal", {m4, b.g.AddConstant("zero", Ints({}, {0}))});
      scores = b.Op("Where", {cond, b.F(kMin), scores});
      break;
    }
  }
  int p = b.Op("Softmax", {scores}, {{"axis", spec.softmax_axis}});
  int ctx =
      b.Op("Transpose", {b.Op("MatMul", {p, v})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  int y = b.Op("Reshape", {ctx, b.I({0, 0, kHidden})});
  b.Output(y);
  return b.g;
}

std::map<std::string, Tensor> AttentionFeeds() {
  // batch 3, seq 5, lengths 5, 3, 1.
  return {{"x", RandomFloat({3, 5, kHidden}, 11)},
          {"memory", RandomFloat({3, 5, kHidden}, 12)},
          {"attention_mask", Ints({3, 5}, {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0})}};
}

// Shape inference → Linear fusion → Attention fusion; returns the graph and checks numerics.
ir::Graph RunAttention(const AttentionSpec& spec, int expected) {
  ir::Graph g = AttentionGraph(spec);
  EXPECT_TRUE(InferShapes(g).ok());
  ir::Graph before = g;
  EXPECT_TRUE(FuseLinear(g).ok());
  auto n = FuseAttention(g);
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  if (n.ok()) {
    EXPECT_EQ(*n, expected);
  }
  EXPECT_TRUE(g.Validate().ok());
  auto feeds = AttentionFeeds();
  auto ra = RunGraph(before, feeds), rb = RunGraph(g, feeds);
  EXPECT_EQ(ra.size(), 1u);
  EXPECT_EQ(rb.size(), 1u);
  if (ra.size() == 1 && rb.size() == 1) {
    EXPECT_LE(MaxRelDiff(rb[0], ra[0]), 1e-5);
  }
  return g;
}

TEST(FuseAttention, TorchScriptLayout) {
  ir::Graph g = RunAttention({}, 1);
  EXPECT_EQ(Count(g, "surge::Attention"), 1);
  EXPECT_EQ(Count(g, "surge::Linear"), 1);  // merged QKV
  EXPECT_EQ(Count(g, "Softmax"), 0);
  EXPECT_EQ(Count(g, "Reshape"), 0);
  for (const auto& n : g.nodes) {
    if (n.op_type == "Attention") {
      EXPECT_EQ(n.GetInt("num_heads", 0), kHeads);
      EXPECT_NEAR(n.GetFloat("scale", 0), 0.5, 1e-7);
      ASSERT_EQ(n.inputs.size(), 2u);
      EXPECT_EQ(g.values[n.inputs[1]].name, "attention_mask");
    }
    if (n.op_type == "Linear") {
      EXPECT_EQ(g.values[n.inputs[1]].constant.shape(), (Shape{kHidden, 3 * kHidden}));
    }
  }
}

TEST(FuseAttention, DynamoLayouts) {
  for (ScaleForm s : {ScaleForm::kSplitQK, ScaleForm::kMulQ}) {
    ir::Graph g =
        RunAttention({.mask = MaskForm::kFinfoWhere, .scale = s, .two_transposes_on_k = true}, 1);
    EXPECT_EQ(Count(g, "surge::Attention"), 1);
    EXPECT_EQ(Count(g, "Where"), 0);
  }
  // ONNX's SDPA function: K^T through a 3-D reshape, sqrt(scale) on Q and K, bool-mask Where.
  ir::Graph sdpa = RunAttention(
      {.mask = MaskForm::kFinfoWhere, .scale = ScaleForm::kSplitQK, .sdpa_key_swap = true}, 1);
  EXPECT_EQ(Count(sdpa, "Transpose"), 0);
  ir::Graph g = RunAttention({.mask = MaskForm::kDistilWhere, .scale = ScaleForm::kMulQ}, 1);
  EXPECT_EQ(Count(g, "surge::Attention"), 1);
}

TEST(FuseAttention, WithoutMask) {
  ir::Graph g = RunAttention({.mask = MaskForm::kNone}, 1);
  for (const auto& n : g.nodes) {
    if (n.op_type == "Attention") {
      EXPECT_EQ(n.inputs.size(), 1u);
    }
  }
}

TEST(FuseAttention, NearMissesStayUnfused) {
  // A mask that hides the attended keys is not a padding mask.
  ir::Graph g = RunAttention({.mask = MaskForm::kWrongPolarity}, 0);
  EXPECT_EQ(Count(g, "Softmax"), 1);
  // Cross-attention: K/V read another input.
  g = RunAttention({.cross = true}, 0);
  EXPECT_EQ(Count(g, "surge::Attention"), 0);
  // Softmax over the query axis.
  g = RunAttention({.softmax_axis = 2}, 0);
  EXPECT_EQ(Count(g, "surge::Attention"), 0);
}

// Embeddings: word (+ type) + position → LayerNormalization.
enum class PosForm { kArangeSlice, kRoberta, kReversed };

ir::Graph EmbedGraph(PosForm pos, bool types_input, bool const_types) {
  GraphBuilder b;
  constexpr int64_t kVocab = 20, kMaxPos = 12, kH = 6, kPad = 1;
  int ids = b.Input("input_ids", DType::kInt64, {kB, kS});
  int tt = types_input ? b.Input("token_type_ids", DType::kInt64, {kB, kS}) : -1;
  int sum = b.Op("Gather", {b.Const("word", RandomFloat({kVocab, kH}, 1)), ids});
  if (types_input || const_types) {
    int type_ids = tt;
    if (const_types) {
      int buf = b.Const("type_buf", Ints({1, kMaxPos}, std::vector<int64_t>(kMaxPos, 0)));
      int seq = b.Op("Gather", {b.Op("Shape", {ids}), b.g.AddConstant("one", Ints({}, {1}))},
                     {{"axis", int64_t{0}}});
      int sl = b.Op("Slice", {buf, b.I({0}), b.Op("Unsqueeze", {seq, b.I({0})}), b.I({1})});
      type_ids = b.Op("Expand", {sl, b.Op("Shape", {ids})});
    }
    sum = b.Op("Add", {sum, b.Op("Gather", {b.Const("type", RandomFloat({2, kH}, 2)), type_ids})});
  }
  int pos_ids;
  if (pos == PosForm::kRoberta) {
    int ne = b.Op("Not", {b.Op("Equal", {ids, b.g.AddConstant("pad", Ints({}, {kPad}))})});
    int nei = b.Op("Cast", {ne}, {{"to", int64_t{6}}});
    int cs = b.Op("CumSum", {nei, b.g.AddConstant("axis", Ints({}, {1}))});
    int inc = b.Op("Mul", {b.Op("Cast", {cs}, {{"to", int64_t{6}}}), nei});
    pos_ids = b.Op("Add", {b.Op("Cast", {inc}, {{"to", int64_t{7}}}),
                           b.g.AddConstant("pad2", Ints({}, {kPad}))});
  } else {
    std::vector<int64_t> buf(kMaxPos);
    for (int64_t i = 0; i < kMaxPos; ++i) buf[i] = pos == PosForm::kReversed ? kMaxPos - 1 - i : i;
    int seq = b.Op("Gather", {b.Op("Shape", {ids}), b.g.AddConstant("one", Ints({}, {1}))},
                   {{"axis", int64_t{0}}});
    pos_ids = b.Op("Slice", {b.Const("position_ids", Ints({1, kMaxPos}, buf)), b.I({0}),
                             b.Op("Unsqueeze", {seq, b.I({0})}), b.I({1})});
  }
  sum = b.Op("Add",
             {sum, b.Op("Gather", {b.Const("pos", RandomFloat({kMaxPos + 2, kH}, 3)), pos_ids})});
  int y = b.Op("LayerNormalization",
               {sum, b.Const("g", RandomFloat({kH}, 4)), b.Const("beta", RandomFloat({kH}, 5))},
               {{"epsilon", 1e-12}});
  b.Output(y);
  return b.g;
}

ir::Graph RunEmbed(PosForm pos, bool types_input, bool const_types, int expected) {
  ir::Graph g = EmbedGraph(pos, types_input, const_types);
  EXPECT_TRUE(InferShapes(g).ok());
  ir::Graph before = g;
  EXPECT_TRUE(FuseLayerNorm(g).ok());
  auto n = FuseEmbedLayerNorm(g);
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  if (n.ok()) {
    EXPECT_EQ(*n, expected);
  }
  EXPECT_TRUE(g.Validate().ok());
  std::map<std::string, Tensor> feeds{{"input_ids", Ints({2, 4}, {0, 5, 7, 3, 0, 9, 1, 1})},
                                      {"token_type_ids", Ints({2, 4}, {0, 0, 1, 1, 0, 1, 0, 0})}};
  auto ra = RunGraph(before, feeds), rb = RunGraph(g, feeds);
  EXPECT_EQ(rb.size(), 1u);
  if (ra.size() == 1 && rb.size() == 1) {
    EXPECT_LE(MaxRelDiff(rb[0], ra[0]), 1e-5);
  }
  return g;
}

TEST(FuseEmbedLayerNorm, BertDistilRoberta) {
  ir::Graph g = RunEmbed(PosForm::kArangeSlice, true, false, 1);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].GetString("position_mode", ""), "arange");
  EXPECT_GE(g.nodes[0].input(5), 0);                     // type table
  g = RunEmbed(PosForm::kArangeSlice, false, false, 1);  // DistilBERT: no types
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].input(5), -1);
  g = RunEmbed(PosForm::kRoberta, false, true, 1);  // RoBERTa: buffered zero types
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].GetString("position_mode", ""), "roberta");
  EXPECT_EQ(g.nodes[0].GetInt("padding_idx", -1), 1);
  EXPECT_EQ(g.nodes[0].input(1), -1);
}

TEST(FuseEmbedLayerNorm, UnrecognisedPositionsStayUnfused) {
  ir::Graph g = RunEmbed(PosForm::kReversed, true, false, 0);
  EXPECT_EQ(Count(g, "surge::EmbedLayerNorm"), 0);
  EXPECT_EQ(Count(g, "surge::LayerNorm"), 1);
}

}  // namespace
}  // namespace surge::engine::passes
