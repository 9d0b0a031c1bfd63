#include <gtest/gtest.h>

#include "engine/ir/dim.h"
#include "engine/ir/graph.h"

namespace surge::engine::ir {
namespace {

TEST(Dim, Arithmetic) {
  Dim b = Dim::Symbol("batch"), s = Dim::Symbol("seq");
  Dim bs = b * s;
  EXPECT_EQ(bs.ToString(), "batch*seq");
  EXPECT_EQ((bs * Dim(768)).DivExact(Dim(12) * b)->ToString(), "64*seq");
  EXPECT_FALSE((s + Dim(1)).DivExact(Dim(2)).has_value());
  EXPECT_EQ((s + Dim(1) - s), Dim(1));
  EXPECT_TRUE((s - s).IsStatic());
  SymbolBindings env{{"batch", 8}, {"seq", 128}};
  EXPECT_EQ(*(bs * Dim(3) + Dim(2)).Eval(env), 8 * 128 * 3 + 2);
  EXPECT_FALSE(Dim::Symbol("other").Eval(env).ok());
}

TEST(Dim, ParseRoundTrip) {
  for (const char* text : {"batch*seq", "768", "-1*seq", "2*batch*seq+1", "seq-3", "0"}) {
    auto d = Dim::Parse(text);
    ASSERT_TRUE(d.ok()) << text;
    EXPECT_EQ(*Dim::Parse(d->ToString()), *d) << text;
  }
  EXPECT_EQ(Dim::Parse("2*batch*seq+1")->ToString(), "2*batch*seq+1");
  EXPECT_FALSE(Dim::Parse("").ok());
  EXPECT_FALSE(Dim::Parse("a**b").ok());
  EXPECT_FALSE(Dim::Parse("+").ok());
}

Graph Chain() {
  Graph g;
  int x = g.AddInput("x", DType::kFloat32, {Dim::Symbol("batch"), Dim(4)});
  int w = g.AddConstant("w", Tensor(DType::kFloat32, {4, 4}));
  int y = g.AddValue("y");
  int z = g.AddValue("z");
  int dead = g.AddValue("dead");
  g.AddNode({"Relu", "", "relu", {y}, {z}, {}});
  g.AddNode({"MatMul", "", "mm", {x, w}, {y}, {}});
  g.AddNode({"Neg", "", "unused", {x}, {dead}, {}});
  g.outputs = {z};
  return g;
}

TEST(Graph, TopoSortDeadNodesAndDumps) {
  Graph g = Chain();
  EXPECT_FALSE(g.Validate().ok());  // relu reads y before matmul produces it
  ASSERT_TRUE(g.TopoSort().ok());
  EXPECT_EQ(g.nodes[0].op_type, "MatMul");
  ASSERT_TRUE(g.Validate().ok());
  g.RemoveDeadNodes();
  EXPECT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.FindValue("dead"), -1);
  EXPECT_EQ(g.OpCounts().at("Relu"), 1);
  EXPECT_NE(DumpText(g).find("MatMul(x, w)"), std::string::npos);
  EXPECT_NE(DumpJson(g).find("\"op_counts\""), std::string::npos);
  EXPECT_NE(DumpDot(g).find("digraph"), std::string::npos);
}

TEST(Graph, MakeNodeNamesUniqueRenamesRepeatsAndBlanksDeterministically) {
  Graph g;
  int v = g.AddInput("x", DType::kFloat32, {Dim(4)});
  auto add = [&](const char* op, const char* name) {
    const int out = g.AddValue("v");
    g.AddNode({op, "", name, {v}, {out}, {}});
    v = out;
  };
  add("Relu", "Linear");
  add("Relu", "Linear");
  add("Relu", "Linear_1");  // already taken by name: the repeat above skips it
  add("Relu", "");
  add("Neg", "");
  add("Relu", "Linear");
  add("Relu", "Relu");  // the first blank Relu must not take this name
  g.outputs = {v};
  EXPECT_EQ(g.MakeNodeNamesUnique(), 4);
  std::vector<std::string> names;
  for (const Node& n : g.nodes) names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string>{"Linear", "Linear_2", "Linear_1", "Relu_1", "Neg",
                                             "Linear_3", "Relu"}));
  EXPECT_EQ(g.MakeNodeNamesUnique(), 0);  // unique names stay as they are
}

TEST(Graph, CycleIsAnError) {
  Graph g;
  int a = g.AddValue("a"), b = g.AddValue("b");
  g.AddNode({"Relu", "", "r1", {a}, {b}, {}});
  g.AddNode({"Relu", "", "r2", {b}, {a}, {}});
  g.outputs = {b};
  Status s = g.TopoSort();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cycle"), std::string::npos);
}

}  // namespace
}  // namespace surge::engine::ir
