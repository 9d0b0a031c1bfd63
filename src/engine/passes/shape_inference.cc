// Symbolic shape and dtype inference over the whole graph (see passes.h).
#include "core/logging.h"
#include "engine/ir/op_schema.h"
#include "engine/passes/passes.h"

namespace surge::engine::passes {

Status InferShapes(ir::Graph& graph) {
  SURGE_RETURN_IF_ERROR(graph.TopoSort());
  for (auto& v : graph.values) {
    // Constants know their shape; everything produced by a node is recomputed.
    if (v.is_constant()) {
      v.dtype = v.constant.dtype();
      v.shape = ir::StaticShape(v.constant.shape());
    }
  }
  for (auto& node : graph.nodes) {
    SURGE_RETURN_IF_ERROR(ir::CheckArity(node, graph.opset));
    for (int in : node.inputs) {
      if (in >= static_cast<int>(graph.values.size())) {
        return InternalError("node '{}' ({}) reads value id {} out of range", node.name,
                             node.op_type, in);
      }
    }
    const ir::OpSchema* schema = ir::FindOpSchema(node.domain, node.op_type);
    if (!schema->infer) continue;
    Status s = schema->infer(graph, node);
    if (!s.ok()) {
      // Schema errors already name the node; add context for the few that do not.
      if (s.message().find(node.name) == std::string::npos) {
        return Status(s.code(), fmt::format("shape inference of node '{}' ({}): {}", node.name,
                                            node.op_type, s.message()));
      }
      return s;
    }
  }
  return Status::Ok();
}

}  // namespace surge::engine::passes
