#include "engine/passes/pattern.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace surge::engine::passes {

Matcher::Matcher(ir::Graph& g)
    : g_(g),
      uses_(g.values.size(), 0),
      consumers_(g.values.size()),
      claimed_(g.nodes.size(), false),
      is_output_(g.values.size(), false) {
  for (int o : g.outputs) {
    if (o >= 0) {
      is_output_[o] = true;
      ++uses_[o];
    }
  }
  // Shape/Size read only the shape, which a fused node keeps: they are not data uses. Where they
  // stay live after a fusion, the replaced producer stays too, so the graph remains correct.
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    if (node.domain.empty() && (node.op_type == "Shape" || node.op_type == "Size")) continue;
    for (int in : node.inputs) {
      if (in < 0) continue;
      ++uses_[in];
      auto& c = consumers_[in];
      if (c.empty() || c.back() != static_cast<int>(n)) c.push_back(static_cast<int>(n));
    }
  }
}

const ir::Node* Matcher::Producer(int v, std::string_view op) const {
  if (v < 0 || v >= static_cast<int>(g_.values.size())) return nullptr;
  int p = g_.values[v].producer;
  if (p < 0 || p >= static_cast<int>(claimed_.size()) || claimed_[p]) return nullptr;
  const ir::Node& n = g_.nodes[p];
  if (!n.domain.empty() || n.op_type != op) return nullptr;
  return &n;
}

bool Matcher::IsGraphOutput(int v) const {
  return v >= 0 && v < static_cast<int>(is_output_.size()) && is_output_[v];
}

std::optional<double> Matcher::ScalarConst(int v) const {
  if (!IsConst(v)) return std::nullopt;
  const Tensor& t = g_.values[v].constant;
  if (t.numel() != 1) return std::nullopt;
  return t.GetDouble(0);
}

std::optional<std::vector<int64_t>> Matcher::IntsConst(int v) const {
  if (!IsConst(v)) return std::nullopt;
  const Tensor& t = g_.values[v].constant;
  if (t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32) return std::nullopt;
  if (t.rank() > 1) return std::nullopt;
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = t.GetInt(i);
  return out;
}

int Matcher::SkipCasts(int v) const {
  while (const ir::Node* c = Producer(v, "Cast")) v = c->input(0);
  return v;
}

std::vector<int> Matcher::AddNode(std::string op_type, std::string_view domain,
                                  std::string_view name, std::vector<int> inputs, int num_outputs,
                                  std::map<std::string, ir::Attribute> attrs) {
  ir::Node node;
  node.op_type = std::move(op_type);
  node.domain = std::string(domain);
  node.name = g_.UniqueName(std::string(name));
  node.inputs = std::move(inputs);
  node.attrs = std::move(attrs);
  for (int i = 0; i < num_outputs; ++i) {
    node.outputs.push_back(g_.AddValue(node.name + (i == 0 ? "" : "_" + std::to_string(i))));
  }
  std::vector<int> outs = node.outputs;
  g_.AddNode(std::move(node));
  // Keep the snapshot's per-value and per-node vectors in range for the new ids.
  uses_.resize(g_.values.size(), 0);
  consumers_.resize(g_.values.size());
  is_output_.resize(g_.values.size(), false);
  claimed_.resize(g_.nodes.size(), false);
  return outs;
}

void Matcher::Replace(int from, int to) {
  g_.ReplaceAllUses(from, to);
  ir::Value& f = g_.values[from];
  ir::Value& t = g_.values[to];
  std::swap(f.name, t.name);
  if (t.dtype == DType::kUndefined) t.dtype = f.dtype;
  if (!t.shape && f.shape) t.shape = f.shape;
  if (is_output_[from]) {
    is_output_[from] = false;
    is_output_[to] = true;
  }
}

Status FinishPass(ir::Graph& g) {
  g.RemoveDeadNodes();
  return g.TopoSort();
}

Tensor ConstFloat(Shape shape, std::span<const float> data) {
  Tensor t(DType::kFloat32, std::move(shape));
  SURGE_CHECK(static_cast<size_t>(t.numel()) == data.size(), "size mismatch");
  if (!data.empty()) std::memcpy(t.data(), data.data(), data.size() * sizeof(float));
  return t;
}

Tensor TransposeTensor(const Tensor& t, std::span<const int64_t> perm) {
  const size_t rank = t.rank();
  SURGE_CHECK(perm.size() == rank, "perm rank {} for tensor rank {}", perm.size(), rank);
  Shape out_shape(rank);
  for (size_t i = 0; i < rank; ++i) out_shape[i] = t.dim(perm[i]);
  Tensor out(t.dtype(), out_shape);
  const size_t es = DTypeSize(t.dtype());
  std::vector<int64_t> in_strides(rank, 1);
  for (int i = static_cast<int>(rank) - 2; i >= 0; --i)
    in_strides[i] = in_strides[i + 1] * t.dim(i + 1);
  std::vector<int64_t> idx(rank, 0);
  const auto* src = static_cast<const uint8_t*>(t.data());
  auto* dst = static_cast<uint8_t*>(out.data());
  const int64_t n = out.numel();
  for (int64_t o = 0; o < n; ++o) {
    int64_t off = 0;
    for (size_t i = 0; i < rank; ++i) off += idx[i] * in_strides[perm[i]];
    std::memcpy(dst + o * es, src + off * es, es);
    for (int i = static_cast<int>(rank) - 1; i >= 0; --i) {
      if (++idx[i] < out_shape[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

Tensor Transpose2D(const Tensor& t) {
  const int64_t perm[2] = {1, 0};
  return TransposeTensor(t, perm);
}

std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

int64_t RankOf(const Matcher& m, int v) {
  const auto& s = m.value(v).shape;
  return s ? static_cast<int64_t>(s->size()) : -1;
}

bool ReducesLastAxis(const Matcher& m, const ir::Node& r, int x) {
  if (r.GetInt("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes = r.GetInts("axes");
  if (!r.HasAttr("axes")) {
    auto c = m.IntsConst(r.input(1));
    if (!c) return false;
    axes = *c;
  }
  if (axes.size() != 1) return false;
  if (axes[0] == -1) return true;
  int64_t rank = RankOf(m, x);
  return rank > 0 && axes[0] == rank - 1;
}

bool UsesWithin(const Matcher& m, int v, std::span<const int> nodes) {
  if (m.IsGraphOutput(v)) return false;
  for (int c : m.Consumers(v)) {
    if (std::find(nodes.begin(), nodes.end(), c) == nodes.end()) return false;
  }
  return true;
}

bool Near(double actual, double expected, double rel) {
  return std::abs(actual - expected) <= rel * std::abs(expected);
}

}  // namespace surge::engine::passes
