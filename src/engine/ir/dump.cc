#include <nlohmann/json.hpp>

#include "engine/ir/graph.h"

namespace surge::engine::ir {

namespace {

std::string ValueLabel(const Graph& g, int id) {
  if (id < 0) return "<none>";
  const Value& v = g.values[id];
  std::string s = v.name + ":" + std::string(DTypeName(v.dtype));
  s += v.shape ? SymShapeToString(*v.shape) : "[?]";
  return s;
}

template <typename T>
std::string JoinList(const std::vector<T>& xs) {
  std::string s = "[";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) s += ",";
    if constexpr (std::is_same_v<T, std::string>) {
      s += "\"" + xs[i] + "\"";
    } else {
      s += fmt::format("{}", xs[i]);
    }
  }
  return s + "]";
}

}  // namespace

std::string AttributeToString(const Attribute& a) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
          return fmt::format("{}", v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return "\"" + v + "\"";
        } else if constexpr (std::is_same_v<T, Tensor>) {
          return fmt::format("tensor<{}{}>", DTypeName(v.dtype()), ShapeToString(v.shape()));
        } else {
          return JoinList(v);
        }
      },
      a);
}

std::string DumpText(const Graph& g) {
  std::string out = fmt::format("graph {} (opset {})\n", g.name.empty() ? "main" : g.name, g.opset);
  for (int in : g.inputs) out += "  input  " + ValueLabel(g, in) + "\n";
  for (int o : g.outputs) out += "  output " + ValueLabel(g, o) + "\n";
  size_t nconst = 0;
  for (const auto& v : g.values) nconst += v.is_constant();
  out += fmt::format("  {} constants, {} bytes\n", nconst, g.ConstantBytes());
  for (const auto& n : g.nodes) {
    out += "  ";
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (i) out += ", ";
      out += ValueLabel(g, n.outputs[i]);
    }
    out += " = " + (n.domain.empty() ? "" : n.domain + "::") + n.op_type + "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (i) out += ", ";
      out += n.inputs[i] < 0 ? "<none>" : g.values[n.inputs[i]].name;
    }
    out += ")";
    if (!n.attrs.empty()) {
      out += " {";
      bool first = true;
      for (const auto& [k, v] : n.attrs) {
        out += (first ? "" : ", ") + k + "=" + AttributeToString(v);
        first = false;
      }
      out += "}";
    }
    out += "  # " + n.name + "\n";
  }
  return out;
}

std::string DumpJson(const Graph& g, int indent) {
  using nlohmann::json;
  auto value_json = [&](int id) {
    json j;
    const Value& v = g.values[id];
    j["name"] = v.name;
    j["dtype"] = DTypeName(v.dtype);
    if (v.shape) {
      json dims = json::array();
      for (const auto& d : *v.shape) {
        if (d.IsStatic()) {
          dims.push_back(d.StaticValue());
        } else {
          dims.push_back(d.ToString());
        }
      }
      j["shape"] = dims;
    }
    return j;
  };
  json root;
  root["name"] = g.name;
  root["opset"] = g.opset;
  root["inputs"] = json::array();
  for (int in : g.inputs) root["inputs"].push_back(value_json(in));
  root["outputs"] = json::array();
  for (int o : g.outputs) root["outputs"].push_back(value_json(o));
  root["constants"] = json::array();
  for (size_t i = 0; i < g.values.size(); ++i) {
    if (g.values[i].is_constant()) root["constants"].push_back(value_json(static_cast<int>(i)));
  }
  root["nodes"] = json::array();
  for (const auto& n : g.nodes) {
    json jn;
    jn["name"] = n.name;
    jn["op"] = n.op_type;
    if (!n.domain.empty()) jn["domain"] = n.domain;
    jn["inputs"] = json::array();
    for (int in : n.inputs)
      jn["inputs"].push_back(in < 0 ? json(nullptr) : json(g.values[in].name));
    jn["outputs"] = json::array();
    for (int o : n.outputs) jn["outputs"].push_back(value_json(o));
    if (!n.attrs.empty()) {
      json attrs;
      for (const auto& [k, v] : n.attrs) attrs[k] = AttributeToString(v);
      jn["attrs"] = attrs;
    }
    root["nodes"].push_back(jn);
  }
  root["op_counts"] = g.OpCounts();
  return root.dump(indent);
}

std::string DumpDot(const Graph& g) {
  std::string out = "digraph surge {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  for (int in : g.inputs) {
    out += fmt::format("  v{} [label=\"{}\", shape=ellipse];\n", in, g.values[in].name);
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    out += fmt::format("  n{} [label=\"{}\\n{}\"{}];\n", i, n.op_type, n.name,
                       n.domain == kSurgeDomain ? ", style=filled, fillcolor=\"#cde8ff\"" : "");
    for (int in : n.inputs) {
      if (in < 0 || g.values[in].is_constant()) continue;
      int p = g.values[in].producer;
      if (p >= 0) {
        out += fmt::format("  n{} -> n{};\n", p, i);
      } else {
        out += fmt::format("  v{} -> n{};\n", in, i);
      }
    }
  }
  for (int o : g.outputs) {
    out += fmt::format("  o{} [label=\"{}\", shape=ellipse];\n", o, g.values[o].name);
    if (g.values[o].producer >= 0) out += fmt::format("  n{} -> o{};\n", g.values[o].producer, o);
  }
  return out + "}\n";
}

}  // namespace surge::engine::ir
