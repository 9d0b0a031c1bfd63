#include <fmt/format.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/logging.h"
#include "engine/passes/fusions.h"
#include "engine/passes/passes.h"

namespace surge::engine::passes {

int RemoveDeadNodes(ir::Graph& graph) {
  size_t before = graph.nodes.size();
  graph.RemoveDeadNodes();
  return static_cast<int>(before - graph.nodes.size());
}

namespace {

// Runs one pass and records "<name>: <n> change(s), <nodes> nodes" in the report and the log.
Status RunPass(ir::Graph& graph, std::string_view name, const std::function<Result<int>()>& pass,
               PassReport* report) {
  auto changed = pass();
  if (!changed.ok()) return changed.status().WithContext(fmt::format("pass {}", name));
  std::string line = fmt::format("{}: {} change(s), {} nodes", name, *changed, graph.nodes.size());
  SURGE_LOG_DEBUG("{}", line);
  if (report) report->log.push_back(std::move(line));
  return Status::Ok();
}

}  // namespace

Status Optimize(ir::Graph& graph, const PassOptions& options, PassReport* report) {
  if (report) report->ops_before = graph.OpCounts();
  const size_t nodes_before = graph.nodes.size();
  SURGE_RETURN_IF_ERROR(graph.TopoSort());
  auto infer = [&]() -> Result<int> {
    SURGE_RETURN_IF_ERROR(InferShapes(graph));
    return 0;
  };
  auto dead = [&]() -> Result<int> { return RemoveDeadNodes(graph); };
  SURGE_RETURN_IF_ERROR(RunPass(graph, "infer-shapes", infer, report));
  SURGE_RETURN_IF_ERROR(RunPass(
      graph, "fold-constants", [&] { return FoldConstants(graph); }, report));
  SURGE_RETURN_IF_ERROR(RunPass(
      graph, "remove-identities", [&] { return RemoveIdentities(graph); }, report));
  SURGE_RETURN_IF_ERROR(RunPass(graph, "remove-dead-nodes", dead, report));
  if (options.fuse) {
    const std::vector<std::pair<const char*, Result<int> (*)(ir::Graph&)>> fusions = {
        {"fuse-layer-norm", FuseLayerNorm},
        {"fuse-l2-normalize", FuseL2Normalize},
        {"fuse-gelu", FuseGelu},
        {"fuse-linear", FuseLinear},
        {"fuse-linear-activation", FuseLinearActivation},
        {"fuse-attention", FuseAttention},
        {"fuse-embed-layer-norm", FuseEmbedLayerNorm},
        {"fuse-skip-layer-norm", FuseSkipLayerNorm},
        {"fuse-linear-residual", FuseLinearResidual},
    };
    for (const auto& [name, fn] : fusions) {
      SURGE_RETURN_IF_ERROR(RunPass(
          graph, name, [&, fn = fn] { return fn(graph); }, report));
    }
    SURGE_RETURN_IF_ERROR(RunPass(graph, "remove-dead-nodes", dead, report));
  }
  SURGE_RETURN_IF_ERROR(RunPass(graph, "infer-shapes", infer, report));
  // Quantised plans and `surge inspect` address layers by node name.
  SURGE_RETURN_IF_ERROR(RunPass(
      graph, "unique-node-names", [&]() -> Result<int> { return graph.MakeNodeNamesUnique(); },
      report));
  SURGE_RETURN_IF_ERROR(graph.Validate());
  if (report) report->ops_after = graph.OpCounts();
  SURGE_LOG_INFO("optimised graph '{}': {} -> {} nodes", graph.name, nodes_before,
                 graph.nodes.size());
  return Status::Ok();
}

}  // namespace surge::engine::passes
