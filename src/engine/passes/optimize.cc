#include "engine/passes/passes.h"

namespace surge::engine::passes {

int RemoveDeadNodes(ir::Graph& graph) {
  size_t before = graph.nodes.size();
  graph.RemoveDeadNodes();
  return static_cast<int>(before - graph.nodes.size());
}

}  // namespace surge::engine::passes
