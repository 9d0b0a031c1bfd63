#include "engine/builder/builder.h"

#include <chrono>

#include "core/logging.h"
#include "engine/import/importer.h"
#include "engine/plan/plan_file.h"

namespace surge::engine::builder {

namespace {
using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

Result<ir::Graph> ImportAndOptimize(const std::string& model_path,
                                    const passes::PassOptions& options, BuildReport* report) {
  BuildReport local;
  if (report == nullptr) report = &local;
  auto t0 = Clock::now();
  SURGE_ASSIGN_OR_RETURN(ir::Graph graph, import::ImportModel(model_path));
  report->import_ms = MsSince(t0);
  t0 = Clock::now();
  Status st = passes::Optimize(graph, options, &report->passes);
  if (!st.ok()) return st.WithContext("optimising '" + model_path + "'");
  report->optimize_ms = MsSince(t0);
  return graph;
}

Result<std::string> Build(const std::string& model_path, const BuilderConfig& config,
                          BuildReport* report) {
  BuildReport local;
  if (report == nullptr) report = &local;
  auto t0 = Clock::now();
  SURGE_ASSIGN_OR_RETURN(ir::Graph graph, ImportAndOptimize(model_path, {}, report));
  SURGE_ASSIGN_OR_RETURN(std::string bytes, BuildPlanFromGraph(graph, config, report));
  report->total_ms = MsSince(t0);
  SURGE_LOG_INFO(
      "built '{}' for backend {} in {:.1f} ms (import {:.1f}, passes {:.1f}, lower "
      "{:.1f}): {} nodes, {} bytes of weights",
      model_path, config.backend, report->total_ms, report->import_ms, report->optimize_ms,
      report->lower_ms, graph.nodes.size(), report->weights_bytes);
  return bytes;
}

Status BuildToFile(const std::string& model_path, const BuilderConfig& config,
                   const std::string& plan_path, BuildReport* report) {
  SURGE_ASSIGN_OR_RETURN(std::string bytes, Build(model_path, config, report));
  return plan::WriteFileAtomically(plan_path, bytes);
}

}  // namespace surge::engine::builder
