// Test helpers: a small graph builder, random tensors and a reference interpreter over
// ir::EvalNode, to compare graphs before and after a pass.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/ir/eval.h"
#include "engine/ir/graph.h"

namespace surge::engine::passes::testing {

inline Tensor RandomFloat(Shape shape, uint32_t seed, float scale = 1.0f) {
  Tensor t(DType::kFloat32, std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  for (float& x : t.span<float>()) x = dist(rng);
  return t;
}

inline Tensor Ints(Shape shape, std::vector<int64_t> data) {
  Tensor t(DType::kInt64, std::move(shape));
  std::copy(data.begin(), data.end(), t.data_as<int64_t>());
  return t;
}

inline Tensor Scalar(float v) {
  Tensor t(DType::kFloat32, {});
  t.data_as<float>()[0] = v;
  return t;
}

class GraphBuilder {
 public:
  ir::Graph g;

  int Input(const std::string& name, DType dt, ir::SymShape shape) {
    return g.AddInput(name, dt, std::move(shape));
  }
  int Const(const std::string& name, Tensor t) { return g.AddConstant(name, std::move(t)); }
  int F(float v) { return g.AddConstant("c", Scalar(v)); }
  int I(std::vector<int64_t> v) {
    int64_t n = static_cast<int64_t>(v.size());
    return g.AddConstant("i", Ints({n}, std::move(v)));
  }
  int Op(const std::string& op, std::vector<int> inputs,
         std::map<std::string, ir::Attribute> attrs = {}, int num_outputs = 1) {
    ir::Node n;
    n.op_type = op;
    n.name = g.UniqueName(op + std::to_string(counter_++));
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    for (int i = 0; i < num_outputs; ++i) n.outputs.push_back(g.AddValue(n.name + "_out"));
    int first = n.outputs[0];
    g.AddNode(std::move(n));
    return first;
  }
  void Output(int v) { g.outputs.push_back(v); }

 private:
  int counter_ = 0;
};

// Runs `g` on `feeds` (by input name) with the reference evaluator; returns the graph outputs.
inline std::vector<Tensor> RunGraph(const ir::Graph& g,
                                    const std::map<std::string, Tensor>& feeds) {
  std::vector<Tensor> vals(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i) {
    if (g.values[i].is_constant()) vals[i] = g.values[i].constant;
  }
  for (int in : g.inputs) {
    auto it = feeds.find(g.values[in].name);
    EXPECT_TRUE(it != feeds.end()) << "missing feed " << g.values[in].name;
    if (it != feeds.end()) vals[in] = it->second;
  }
  for (const ir::Node& n : g.nodes) {
    std::vector<Tensor> ins;
    for (int in : n.inputs) ins.push_back(in >= 0 ? vals[in] : Tensor());
    std::vector<Tensor> outs;
    Status s = ir::EvalNode(n, ins, &outs);
    EXPECT_TRUE(s.ok()) << n.op_type << " " << n.name << ": " << s.ToString();
    if (!s.ok()) return {};
    for (size_t k = 0; k < n.outputs.size() && k < outs.size(); ++k) vals[n.outputs[k]] = outs[k];
  }
  std::vector<Tensor> result;
  for (int o : g.outputs) result.push_back(vals[o]);
  return result;
}

// Max relative difference (|a-b| / max(1, |b|)) between two float tensors of the same shape.
inline double MaxRelDiff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape()) return 1e30;
  Tensor fa = a.ToFloat32(), fb = b.ToFloat32();
  double worst = 0;
  for (int64_t i = 0; i < fa.numel(); ++i) {
    double x = fa.data_as<float>()[i], y = fb.data_as<float>()[i];
    worst = std::max(worst, std::abs(x - y) / std::max(1.0, std::abs(y)));
  }
  return worst;
}

inline int Count(const ir::Graph& g, const std::string& op) {
  auto c = g.OpCounts();
  auto it = c.find(op);
  return it == c.end() ? 0 : it->second;
}

}  // namespace surge::engine::passes::testing
