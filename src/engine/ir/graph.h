// The Surge IR: a dataflow graph of Nodes over Values. Values carry a dtype and an (optionally
// unknown) symbolic shape; constants (weights, folded values) carry their data. Nodes name an op
// (ONNX ops in domain "", fused Surge ops in domain "surge", see op_schema.h) with attributes.
//
// Ownership: a Graph owns its nodes and values; constant Tensors may view memory owned elsewhere
// (a mapped plan file), which must outlive the graph. Not thread-safe for mutation; a finished
// graph is read concurrently by many execution contexts.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "engine/ir/dim.h"

namespace surge::engine::ir {

inline constexpr std::string_view kSurgeDomain = "surge";

using Attribute = std::variant<int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>, Tensor>;

struct Value {
  std::string name;
  DType dtype = DType::kUndefined;
  std::optional<SymShape> shape;  // unknown until shape inference
  Tensor constant;                // defined() for weights and folded constants
  // For small int64 tensors (rank 0/1) whose elements are known symbolically — the outputs of
  // Shape, and what Gather/Concat/Unsqueeze/arithmetic make of them — the element values.
  // Lets shape inference resolve Reshape/Expand/ConstantOfShape targets like [batch, seq, 12, 64].
  std::optional<std::vector<Dim>> sym_data;
  int producer = -1;  // index of the producing node, -1 for inputs and constants

  bool is_constant() const { return constant.defined(); }
};

struct Node {
  std::string op_type;
  std::string domain;  // "" (ONNX default) or "surge"
  std::string name;
  std::vector<int> inputs;  // value ids; -1 marks an omitted optional input
  std::vector<int> outputs;
  std::map<std::string, Attribute> attrs;

  bool HasAttr(std::string_view key) const { return attrs.count(std::string(key)) > 0; }
  int64_t GetInt(std::string_view key, int64_t dflt) const;
  double GetFloat(std::string_view key, double dflt) const;
  std::string GetString(std::string_view key, std::string_view dflt) const;
  std::vector<int64_t> GetInts(std::string_view key, std::vector<int64_t> dflt = {}) const;
  std::vector<double> GetFloats(std::string_view key, std::vector<double> dflt = {}) const;
  const Tensor* GetTensor(std::string_view key) const;
  // Input value id i, or -1 when absent.
  int input(size_t i) const { return i < inputs.size() ? inputs[i] : -1; }
};

class Graph {
 public:
  std::string name;
  int64_t opset = 17;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;   // graph inputs (value ids), in order
  std::vector<int> outputs;  // graph outputs (value ids), in order
  std::map<std::string, std::string> metadata;

  // Adds a value; the name is made unique if taken.
  int AddValue(std::string name, DType dtype = DType::kUndefined,
               std::optional<SymShape> shape = std::nullopt);
  int AddConstant(std::string name, Tensor tensor);
  int AddInput(std::string name, DType dtype, SymShape shape);
  // Appends a node and records it as the producer of its outputs. Returns its index.
  int AddNode(Node node);

  // Value id by name, or -1.
  int FindValue(std::string_view name) const;
  std::string UniqueName(std::string_view base);

  // For each value id, the indices of the nodes that read it.
  std::vector<std::vector<int>> Consumers() const;
  // Number of uses of each value (graph outputs count as uses).
  std::vector<int> UseCounts() const;

  // Orders nodes so every node follows its producers. Error on a cycle or a missing producer.
  Status TopoSort();
  // Drops nodes whose outputs reach no graph output, and values nothing refers to. Keeps order.
  void RemoveDeadNodes();
  // Redirects every use of value `from` (including graph outputs) to value `to`.
  void ReplaceAllUses(int from, int to);
  // Names every node uniquely, deterministically: in node order, the first node of a name keeps
  // it; a later one, or one without a name, becomes `<name or op type>_<k>` with the smallest
  // k >= 1 no node uses (an unnamed node takes its op type alone when that is free). Returns
  // the number of nodes renamed. Layers of a quantised plan are addressed by node name.
  int MakeNodeNamesUnique();

  // Checks ids are in range, single producers, inputs produced before use (after TopoSort).
  Status Validate() const;

  // "domain::Op" (or "Op" for ONNX) → count.
  std::map<std::string, int> OpCounts() const;

  // Total bytes of constant data.
  size_t ConstantBytes() const;

 private:
  std::unordered_map<std::string, int> name_index_;
};

// Dumps. Text: one line per node, `out:dtype[shape] = Op(in, ...) {attrs}`. JSON: full structure
// without constant data (constants listed with dtype/shape). DOT: Graphviz digraph.
std::string DumpText(const Graph& g);
std::string DumpJson(const Graph& g, int indent = 2);
std::string DumpDot(const Graph& g);
std::string AttributeToString(const Attribute& a);

}  // namespace surge::engine::ir
