#include "engine/ir/graph.h"

#include <algorithm>
#include <numeric>
#include <queue>
#include <unordered_set>

namespace surge::engine::ir {

int64_t Node::GetInt(std::string_view key, int64_t dflt) const {
  auto it = attrs.find(std::string(key));
  if (it == attrs.end()) return dflt;
  if (auto* v = std::get_if<int64_t>(&it->second)) return *v;
  if (auto* v = std::get_if<double>(&it->second)) return static_cast<int64_t>(*v);
  return dflt;
}

double Node::GetFloat(std::string_view key, double dflt) const {
  auto it = attrs.find(std::string(key));
  if (it == attrs.end()) return dflt;
  if (auto* v = std::get_if<double>(&it->second)) return *v;
  if (auto* v = std::get_if<int64_t>(&it->second)) return static_cast<double>(*v);
  return dflt;
}

std::string Node::GetString(std::string_view key, std::string_view dflt) const {
  auto it = attrs.find(std::string(key));
  if (it == attrs.end()) return std::string(dflt);
  if (auto* v = std::get_if<std::string>(&it->second)) return *v;
  return std::string(dflt);
}

std::vector<int64_t> Node::GetInts(std::string_view key, std::vector<int64_t> dflt) const {
  auto it = attrs.find(std::string(key));
  if (it == attrs.end()) return dflt;
  if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  if (auto* v = std::get_if<int64_t>(&it->second)) return {*v};
  return dflt;
}

std::vector<double> Node::GetFloats(std::string_view key, std::vector<double> dflt) const {
  auto it = attrs.find(std::string(key));
  if (it == attrs.end()) return dflt;
  if (auto* v = std::get_if<std::vector<double>>(&it->second)) return *v;
  return dflt;
}

const Tensor* Node::GetTensor(std::string_view key) const {
  auto it = attrs.find(std::string(key));
  if (it == attrs.end()) return nullptr;
  return std::get_if<Tensor>(&it->second);
}

std::string Graph::UniqueName(std::string_view base) {
  std::string name(base.empty() ? "v" : base);
  if (!name_index_.count(name)) return name;
  for (int i = 1;; ++i) {
    std::string candidate = name + "_" + std::to_string(i);
    if (!name_index_.count(candidate)) return candidate;
  }
}

int Graph::AddValue(std::string name, DType dtype, std::optional<SymShape> shape) {
  Value v;
  v.name = UniqueName(name);
  v.dtype = dtype;
  v.shape = std::move(shape);
  int id = static_cast<int>(values.size());
  name_index_[v.name] = id;
  values.push_back(std::move(v));
  return id;
}

int Graph::AddConstant(std::string name, Tensor tensor) {
  DType dt = tensor.dtype();
  SymShape shape = StaticShape(tensor.shape());
  int id = AddValue(std::move(name), dt, std::move(shape));
  values[id].constant = std::move(tensor);
  return id;
}

int Graph::AddInput(std::string name, DType dtype, SymShape shape) {
  int id = AddValue(std::move(name), dtype, std::move(shape));
  inputs.push_back(id);
  return id;
}

int Graph::AddNode(Node node) {
  int idx = static_cast<int>(nodes.size());
  for (int out : node.outputs) {
    SURGE_CHECK(out >= 0 && out < static_cast<int>(values.size()), "bad output id {}", out);
    values[out].producer = idx;
  }
  nodes.push_back(std::move(node));
  return idx;
}

int Graph::FindValue(std::string_view name) const {
  auto it = name_index_.find(std::string(name));
  return it == name_index_.end() ? -1 : it->second;
}

std::vector<std::vector<int>> Graph::Consumers() const {
  std::vector<std::vector<int>> out(values.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (int in : nodes[n].inputs) {
      if (in >= 0 && (out[in].empty() || out[in].back() != static_cast<int>(n))) {
        out[in].push_back(static_cast<int>(n));
      }
    }
  }
  return out;
}

std::vector<int> Graph::UseCounts() const {
  std::vector<int> uses(values.size(), 0);
  for (const auto& n : nodes) {
    for (int in : n.inputs) {
      if (in >= 0) ++uses[in];
    }
  }
  for (int o : outputs) ++uses[o];
  return uses;
}

Status Graph::TopoSort() {
  const size_t n = nodes.size();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> succ(n);
  for (size_t i = 0; i < n; ++i) {
    for (int in : nodes[i].inputs) {
      if (in < 0) continue;
      int p = values[in].producer;
      if (p >= 0) {
        ++pending[i];
        succ[p].push_back(static_cast<int>(i));
      }
    }
  }
  // Stable: among ready nodes, keep the original order.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(static_cast<int>(i));
  }
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int s : succ[i]) {
      if (--pending[s] == 0) ready.push(s);
    }
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i) {
      if (pending[i] > 0) {
        return InvalidArgumentError("graph has a cycle through node '{}' ({})", nodes[i].name,
                                    nodes[i].op_type);
      }
    }
  }
  std::vector<Node> sorted;
  sorted.reserve(n);
  for (int i : order) sorted.push_back(std::move(nodes[i]));
  nodes = std::move(sorted);
  for (auto& v : values) v.producer = -1;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int out : nodes[i].outputs) values[out].producer = static_cast<int>(i);
  }
  return Status::Ok();
}

int Graph::MakeNodeNamesUnique() {
  std::unordered_set<std::string> taken;
  for (const Node& n : nodes) {
    if (!n.name.empty()) taken.insert(n.name);
  }
  std::unordered_set<std::string> kept;
  int renamed = 0;
  for (Node& n : nodes) {
    if (!n.name.empty() && kept.insert(n.name).second) continue;
    const std::string base = n.name.empty() ? (n.op_type.empty() ? "node" : n.op_type) : n.name;
    std::string name = base;
    if (!n.name.empty() || taken.count(name)) {
      for (int k = 1;; ++k) {
        name = base + "_" + std::to_string(k);
        if (!taken.count(name)) break;
      }
    }
    taken.insert(name);
    kept.insert(name);
    n.name = std::move(name);
    ++renamed;
  }
  return renamed;
}

void Graph::RemoveDeadNodes() {
  std::vector<bool> live_value(values.size(), false);
  std::vector<bool> live_node(nodes.size(), false);
  std::vector<int> stack(outputs.begin(), outputs.end());
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    if (v < 0 || live_value[v]) continue;
    live_value[v] = true;
    int p = values[v].producer;
    if (p >= 0 && !live_node[p]) {
      live_node[p] = true;
      for (int in : nodes[p].inputs) stack.push_back(in);
    }
  }
  for (int in : inputs) live_value[in] = true;
  // Keep every output of a live node (multi-output ops).
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (live_node[i]) {
      for (int o : nodes[i].outputs) live_value[o] = true;
    }
  }
  std::vector<int> remap(values.size(), -1);
  std::vector<Value> new_values;
  for (size_t i = 0; i < values.size(); ++i) {
    if (live_value[i]) {
      remap[i] = static_cast<int>(new_values.size());
      new_values.push_back(std::move(values[i]));
    }
  }
  std::vector<Node> new_nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!live_node[i]) continue;
    Node node = std::move(nodes[i]);
    for (int& in : node.inputs) in = in >= 0 ? remap[in] : -1;
    for (int& out : node.outputs) out = remap[out];
    new_nodes.push_back(std::move(node));
  }
  for (int& in : inputs) in = remap[in];
  for (int& out : outputs) out = remap[out];
  values = std::move(new_values);
  nodes = std::move(new_nodes);
  name_index_.clear();
  for (size_t i = 0; i < values.size(); ++i) {
    name_index_[values[i].name] = static_cast<int>(i);
    values[i].producer = -1;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int out : nodes[i].outputs) values[out].producer = static_cast<int>(i);
  }
}

void Graph::ReplaceAllUses(int from, int to) {
  for (auto& n : nodes) {
    for (int& in : n.inputs) {
      if (in == from) in = to;
    }
  }
  for (int& o : outputs) {
    if (o == from) {
      // Keep the graph's output name stable: the new value takes the old name.
      o = to;
    }
  }
}

Status Graph::Validate() const {
  const int nv = static_cast<int>(values.size());
  std::vector<bool> defined(values.size(), false);
  for (int in : inputs) {
    if (in < 0 || in >= nv) return InternalError("graph input id {} out of range", in);
    defined[in] = true;
  }
  for (int i = 0; i < nv; ++i) {
    if (values[i].is_constant()) defined[i] = true;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    for (int in : n.inputs) {
      if (in < -1 || in >= nv)
        return InternalError("node '{}' input id {} out of range", n.name, in);
      if (in >= 0 && !defined[in]) {
        return InternalError("node '{}' ({}) reads '{}' before it is produced", n.name, n.op_type,
                             values[in].name);
      }
    }
    for (int out : n.outputs) {
      if (out < 0 || out >= nv)
        return InternalError("node '{}' output id {} out of range", n.name, out);
      if (defined[out]) {
        return InternalError("value '{}' is produced twice (node '{}')", values[out].name, n.name);
      }
      defined[out] = true;
    }
  }
  for (int o : outputs) {
    if (o < 0 || o >= nv || !defined[o])
      return InternalError("graph output {} is never produced", o);
  }
  return Status::Ok();
}

std::map<std::string, int> Graph::OpCounts() const {
  std::map<std::string, int> counts;
  for (const auto& n : nodes) {
    counts[n.domain.empty() ? n.op_type : n.domain + "::" + n.op_type]++;
  }
  return counts;
}

size_t Graph::ConstantBytes() const {
  size_t total = 0;
  for (const auto& v : values) {
    if (v.is_constant()) total += v.constant.nbytes();
  }
  return total;
}

}  // namespace surge::engine::ir
