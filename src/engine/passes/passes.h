// Graph optimisation passes, run by the builder in this order: shape inference (symbolic), constant
// folding, dead-node removal, then fusion into the Surge vocabulary (see ir/op_schema.h):
// LayerNorm (decomposed or LayerNormalization), Gelu (erf and tanh forms), MatMul+Add → Linear,
// Linear+Gelu, Q/K/V merge, Attention with padding mask, SkipLayerNorm, EmbedLayerNorm; then shape
// inference again so every value has a dtype and a symbolic shape.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/ir/graph.h"

namespace surge::engine::passes {

struct PassOptions {
  bool fuse = true;  // false: only shape inference, folding and dead-node removal
};

struct PassReport {
  std::map<std::string, int> ops_before;  // Graph::OpCounts() of the imported graph
  std::map<std::string, int> ops_after;
  std::vector<std::string> log;  // one line per pass: what it changed
};

// Optimises `graph` in place. On error the graph may be partially transformed.
Status Optimize(ir::Graph& graph, const PassOptions& options, PassReport* report);

// Individual passes (each returns the number of changes it made).
Status InferShapes(ir::Graph& graph);
Result<int> FoldConstants(ir::Graph& graph);
int RemoveDeadNodes(ir::Graph& graph);

}  // namespace surge::engine::passes
