// Helpers for op-schema tests: build small graphs and run each node's shape inference.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/ir/graph.h"
#include "engine/ir/op_schema.h"

namespace surge::engine::ir::testing {

inline Dim Sym(const char* s) { return Dim::Symbol(s); }

inline int Ints(Graph& g, const std::string& name, std::vector<int64_t> v, bool scalar = false) {
  Tensor t(DType::kInt64, scalar ? Shape{} : Shape{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data_as<int64_t>()[i] = v[i];
  return g.AddConstant(name, t);
}

inline int Floats(Graph& g, const std::string& name, Shape shape) {
  Tensor t(DType::kFloat32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = 0.25f * static_cast<float>(i % 7);
  return g.AddConstant(name, t);
}

// Adds node `op` reading `inputs` with `n_out` fresh outputs; returns the first output id.
inline int Op(Graph& g, const std::string& op, std::vector<int> inputs,
              std::map<std::string, Attribute> attrs = {}, int n_out = 1,
              const std::string& domain = "") {
  Node n;
  n.op_type = op;
  n.domain = domain;
  n.name = op + "_" + std::to_string(g.nodes.size());
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  int first = -1;
  for (int i = 0; i < n_out; ++i) {
    int v = g.AddValue(n.name + "_out" + std::to_string(i));
    if (first < 0) first = v;
    n.outputs.push_back(v);
  }
  g.AddNode(std::move(n));
  return first;
}

// Runs arity checks and inference on every node in order.
inline Status InferAll(Graph& g) {
  for (auto& n : g.nodes) {
    SURGE_RETURN_IF_ERROR(CheckArity(n, g.opset));
    const OpSchema* s = FindOpSchema(n.domain, n.op_type);
    if (s->infer) SURGE_RETURN_IF_ERROR(s->infer(g, n));
  }
  return Status::Ok();
}

inline std::string ShapeOf(const Graph& g, int v) {
  return g.values[v].shape ? SymShapeToString(*g.values[v].shape) : "?";
}

inline std::string DataOf(const Graph& g, int v) {
  if (!g.values[v].sym_data) return "?";
  return SymShapeToString(*g.values[v].sym_data);
}

}  // namespace surge::engine::ir::testing
