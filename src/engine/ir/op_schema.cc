#include "engine/ir/op_schema.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

namespace surge::engine::ir {

namespace {
using SchemaMap = std::map<std::pair<std::string, std::string>, std::unique_ptr<OpSchema>>;

SchemaMap& RawRegistry() {
  static SchemaMap registry;
  return registry;
}

SchemaMap& Registry() {
  static std::once_flag once;
  std::call_once(once, [] { RegisterBuiltinOpSchemas(); });
  return RawRegistry();
}
}  // namespace

void RegisterOpSchema(OpSchema schema) {
  auto key = std::make_pair(schema.domain, schema.op_type);
  RawRegistry()[key] = std::make_unique<OpSchema>(std::move(schema));
}

const OpSchema* FindOpSchema(std::string_view domain, std::string_view op_type) {
  auto& r = Registry();
  auto it = r.find({std::string(domain), std::string(op_type)});
  return it == r.end() ? nullptr : it->second.get();
}

std::vector<const OpSchema*> AllOpSchemas() {
  std::vector<const OpSchema*> out;
  for (auto& [k, v] : Registry()) out.push_back(v.get());
  return out;
}

Status CheckArity(const Node& node, int64_t opset) {
  const OpSchema* s = FindOpSchema(node.domain, node.op_type);
  if (s == nullptr) {
    return UnimplementedError("unsupported op '{}{}' in node '{}' (opset {})",
                              node.domain.empty() ? "" : node.domain + "::", node.op_type,
                              node.name, opset);
  }
  int n_in = static_cast<int>(node.inputs.size());
  while (n_in > 0 && node.inputs[n_in - 1] < 0) --n_in;
  if (n_in < s->min_inputs || (s->max_inputs >= 0 && n_in > s->max_inputs)) {
    return InvalidArgumentError("node '{}' ({}) has {} inputs; expected {}..{}", node.name,
                                node.op_type, n_in, s->min_inputs, s->max_inputs);
  }
  int n_out = static_cast<int>(node.outputs.size());
  if (n_out < s->min_outputs || n_out > s->max_outputs) {
    return InvalidArgumentError("node '{}' ({}) has {} outputs; expected {}..{}", node.name,
                                node.op_type, n_out, s->min_outputs, s->max_outputs);
  }
  return Status::Ok();
}

}  // namespace surge::engine::ir
