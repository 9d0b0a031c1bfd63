// `surge inspect PLAN_OR_MODEL`: what a plan holds (header, sections, inputs/outputs, profile, op
// counts before and after fusion, memory, the precision of every layer and why, the backend's
// description) or, for a model, what the passes make of it.
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "cli/engine_io.h"
#include "engine/builder/builder.h"
#include "engine/ir/graph.h"
#include "engine/plan/plan_file.h"
#include "engine/quant/quantize.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/graph_codec.h"
#include "engine/runtime/plan_config.h"

namespace surge::cli {
namespace {

using nlohmann::json;

struct InspectArgs {
  std::string path;
  bool json = false;
  std::string dot;
};

bool LooksLikePlan(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[8] = {};
  f.read(magic, sizeof(magic));
  return f.gcount() == 8 && std::memcmp(magic, engine::plan::kPlanMagic.data(), 8) == 0;
}

json Io(const ir::Graph& g, const std::vector<int>& ids) {
  json out = json::array();
  for (int id : ids) {
    const ir::Value& v = g.values[id];
    out.push_back({{"name", v.name},
                   {"dtype", std::string(DTypeName(v.dtype))},
                   {"shape", v.shape ? ir::SymShapeToString(*v.shape) : "?"}});
  }
  return out;
}

json Fusions(const std::map<std::string, int>& ops) {
  json f = json::object();
  for (const auto& [op, n] : ops) {
    if (op.rfind("surge::", 0) == 0) f[op.substr(7)] = n;
  }
  return f;
}

json ProfileJson(const engine::Profile& p) {
  json out = json::array();
  for (const auto& ip : p.inputs) {
    out.push_back({{"name", ip.name}, {"min", ip.min}, {"opt", ip.opt}, {"max", ip.max}});
  }
  return out;
}

int Total(const json& ops) {
  int n = 0;
  for (const auto& [k, v] : ops.items()) n += v.get<int>();
  return n;
}

// Every node's precision and the reason: Linear layers from the plan's quant section, the rest
// from what the backend runs them at.
json LayerPrecisions(const ir::Graph& g, const engine::BuilderConfig& b) {
  using engine::Precision;
  const Precision build = b.precision;
  const bool quantised = build == Precision::kInt8 || build == Precision::kFp8;
  const Precision base = b.backend == "cpu" ? Precision::kFp32
                         : quantised        ? engine::quant::BasePrecision(b.backend)
                                            : build;
  json out = json::array();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const std::string op = n.domain.empty() ? n.op_type : n.domain + "::" + n.op_type;
    const bool linear = (n.domain == ir::kSurgeDomain && n.op_type == "Linear") ||
                        (n.domain.empty() && n.op_type == "MatMul");
    Precision p = base;
    std::string reason;
    auto it = b.quant.layers.find(n.name);
    if (linear && it != b.quant.layers.end()) {
      p = it->second.precision;
      reason = it->second.reason;
    } else if (linear && build == Precision::kBf16) {
      p = Precision::kBf16;
      reason = "build precision";
    } else if (linear && (quantised || build == Precision::kBf16)) {
      reason = "not quantisable (no constant float weight)";
    } else if (build == Precision::kFp32 || (!quantised && build == base)) {
      reason = "build precision";
    } else if (n.op_type == "Attention") {
      reason = "attention is not quantised (scores and softmax stay in " +
               std::string(engine::PrecisionName(base)) + ")";
    } else if (n.op_type.find("LayerNorm") != std::string::npos) {
      reason = "normalisation is not quantised (statistics in fp32)";
    } else {
      reason = "not a quantised op";
    }
    out.push_back({{"index", i},
                   {"node", n.name},
                   {"op", op},
                   {"precision", std::string(engine::PrecisionName(p))},
                   {"reason", reason}});
  }
  return out;
}

void PrintText(const json& j) {
  std::cout << j["kind"].get<std::string>() << ": " << j["path"].get<std::string>() << '\n';
  if (j.contains("header")) {
    const json& h = j["header"];
    std::cout << fmt::format("format v{}, backend {}, device arch {}, built by surge {}, {}\n",
                             h["format_version"].get<int>(), h["backend"].get<std::string>(),
                             h["device_arch"].get<std::string>(),
                             h["surge_version"].get<std::string>(),
                             h["precision"].get<std::string>());
    std::cout << "sections:\n";
    for (const auto& s : j["sections"]) {
      std::cout << fmt::format("  {:<10} offset {:>12} size {:>12} xxh64 {}\n",
                               s["name"].get<std::string>(), s["offset"].get<uint64_t>(),
                               s["size"].get<uint64_t>(), s["checksum"].get<std::string>());
    }
  }
  for (const char* key : {"inputs", "outputs"}) {
    std::cout << key << ":\n";
    for (const auto& v : j[key]) {
      std::cout << "  " << v["name"].get<std::string>() << ": " << v["dtype"].get<std::string>()
                << v["shape"].get<std::string>() << '\n';
    }
  }
  std::cout << "profile:\n";
  for (const auto& p : j["profile"]) {
    std::cout << "  " << p["name"].get<std::string>() << ": min " << p["min"].dump() << " opt "
              << p["opt"].dump() << " max " << p["max"].dump() << '\n';
  }
  std::cout << "ops before fusion (" << Total(j["ops_before"]) << "):";
  for (const auto& [op, n] : j["ops_before"].items()) std::cout << ' ' << op << '=' << n;
  std::cout << "\nops after fusion (" << Total(j["ops_after"]) << "):";
  for (const auto& [op, n] : j["ops_after"].items()) std::cout << ' ' << op << '=' << n;
  std::cout << "\nfusions:";
  for (const auto& [op, n] : j["fusions"].items()) std::cout << ' ' << op << '=' << n;
  if (j["fusions"].empty()) std::cout << " none";
  std::cout << '\n';
  if (j.contains("passes") && !j["passes"].empty()) {
    std::cout << "passes:\n";
    for (const auto& line : j["passes"]) std::cout << "  " << line.get<std::string>() << '\n';
  }
  std::cout << "memory: weights " << j["memory"]["weights_bytes"].get<uint64_t>() << " bytes";
  if (j["memory"].contains("tactics_bytes")) {
    std::cout << ", tactics " << j["memory"]["tactics_bytes"].get<uint64_t>() << " bytes";
  }
  std::cout << '\n';
  if (j.contains("layers")) {
    std::cout << "precision per layer";
    if (j.contains("quant") && !j["quant"]["calibrator"].get<std::string>().empty()) {
      std::cout << " (calibrator " << j["quant"]["calibrator"].get<std::string>() << ")";
    }
    std::cout << ":\n";
    for (const auto& l : j["layers"]) {
      std::cout << fmt::format("  [{}] {} '{}': {} - {}\n", l["index"].get<size_t>(),
                               l["op"].get<std::string>(), l["node"].get<std::string>(),
                               l["precision"].get<std::string>(), l["reason"].get<std::string>());
    }
    if (j.contains("quant") && j["quant"]["report"].contains("guard")) {
      const json& g = j["quant"]["report"]["guard"];
      // Plans built before the confidence bound have no "confidence".
      const double confidence = g["budget"].value("confidence", 0.0);
      std::cout << fmt::format(
          "accuracy guard: budget cosine{} >= {}, top-1 drop <= {:.2f}%; all quantised: cosine "
          "{:.6f}, top-1 {:.2f}%; built: cosine {:.6f}{}, top-1 {:.2f}%; {} plan(s) measured on {} "
          "held-out batch(es)\n",
          confidence > 0 ? fmt::format(" ({:g}% lower bound)", 100 * confidence) : "",
          g["budget"]["min_cosine"].get<double>(), 100 * g["budget"]["max_top1_drop"].get<double>(),
          g["all_quantised"]["cosine"].get<double>(),
          100 * g["all_quantised"]["top1_agreement"].get<double>(),
          g["final"]["cosine"].get<double>(),
          confidence > 0
              ? fmt::format(" (lower bound {:.6f})", g["final_cosine_bound"].get<double>())
              : "",
          100 * g["final"]["top1_agreement"].get<double>(), g["plans_evaluated"].get<int>(),
          g["holdout_batches"].get<int>());
      // Plans built before the fallback ladder have neither key.
      if (g.contains("stages")) {
        for (const json& st : g["stages"]) {
          std::cout << fmt::format(
              "  {} -> {}: all {} layer(s) at {}: cosine {:.6f}; {} moved{}\n",
              st["from"].get<std::string>(), st["to"].get<std::string>(), st["layers"].get<int>(),
              st["to"].get<std::string>(), st["all_moved"]["cosine"].get<double>(),
              st["moved"].size(),
              st["sensitivity"].empty()
                  ? " (all: the budget needs every one of them at least there)"
                  : fmt::format(" (the most sensitive of {} ranked; engine then cosine {:.6f})",
                                st["sensitivity"].size(), st["result"]["cosine"].get<double>()));
        }
      }
    }
  }
  if (j.contains("backend")) {
    std::cout << "backend:\n" << j["backend"].get<std::string>();
    if (!j["backend"].get<std::string>().empty() &&
        j["backend"].get<std::string>().back() != '\n') {
      std::cout << '\n';
    }
  }
}

Result<json> InspectPlan(const std::string& path, std::string* dot) {
  SURGE_ASSIGN_OR_RETURN(auto plan, engine::plan::PlanFile::Open(path));
  SURGE_ASSIGN_OR_RETURN(auto config_bytes, plan->Section(engine::plan::kConfigSection));
  SURGE_ASSIGN_OR_RETURN(
      engine::PlanConfig config,
      engine::PlanConfigFromJson(
          {reinterpret_cast<const char*>(config_bytes.data()), config_bytes.size()}));
  SURGE_ASSIGN_OR_RETURN(auto graph_bytes, plan->Section(engine::plan::kGraphSection));
  SURGE_ASSIGN_OR_RETURN(auto weights, plan->Section(engine::plan::kWeightsSection));
  SURGE_ASSIGN_OR_RETURN(ir::Graph g, engine::DecodeGraph(graph_bytes, weights));
  json j;
  j["kind"] = "plan";
  j["path"] = path;
  j["header"] = {{"format_version", plan->format_version()},
                 {"backend", plan->backend()},
                 {"device_arch", plan->device_arch()},
                 {"surge_version", config.surge_version},
                 {"precision", std::string(engine::PrecisionName(config.builder.precision))},
                 {"threads", config.builder.num_threads}};
  json sections = json::array();
  for (const auto& s : plan->sections()) {
    sections.push_back({{"name", s.name},
                        {"offset", s.offset},
                        {"size", s.size},
                        {"checksum", fmt::format("{:016x}", s.checksum)}});
  }
  j["sections"] = sections;
  j["inputs"] = Io(g, g.inputs);
  j["outputs"] = Io(g, g.outputs);
  j["profile"] = ProfileJson(config.builder.profile);
  json report = json::parse(config.build_report_json, nullptr, false);
  j["ops_before"] =
      report.is_object() && report.contains("ops_before") ? report["ops_before"] : json::object();
  j["ops_after"] = g.OpCounts();
  j["fusions"] = Fusions(g.OpCounts());
  j["passes"] = report.is_object() && report.contains("passes") ? report["passes"] : json::array();
  j["build_report"] = report.is_object() ? report : json::object();
  if (plan->FindSection(engine::plan::kQuantSection) != nullptr) {
    SURGE_ASSIGN_OR_RETURN(auto quant_bytes, plan->Section(engine::plan::kQuantSection));
    SURGE_ASSIGN_OR_RETURN(
        config.builder.quant,
        engine::QuantSpecFromJson(
            {reinterpret_cast<const char*>(quant_bytes.data()), quant_bytes.size()}));
    json q = json::parse(engine::QuantSpecToJson(config.builder.quant));
    j["quant"] = {{"calibrator", q["calibrator"]}, {"amax", q["amax"]}, {"report", q["report"]}};
  }
  j["layers"] = LayerPrecisions(g, config.builder);
  const auto* tactics = plan->FindSection(engine::plan::kTacticsSection);
  j["memory"] = {{"weights_bytes", weights.size()},
                 {"tactics_bytes", tactics ? tactics->size : 0},
                 {"plan_bytes", plan->size()}};
  // The backend's own description needs the plan loaded; a plan for another machine still
  // inspects, with the reason it cannot run here.
  auto engine = engine::Engine::Load(path);
  j["backend"] =
      engine.ok() ? (*engine)->Describe() : "cannot load here: " + engine.status().ToString();
  if (dot) *dot = ir::DumpDot(g);
  return j;
}

Result<json> InspectModel(const std::string& path, std::string* dot) {
  engine::builder::BuildReport report;
  SURGE_ASSIGN_OR_RETURN(ir::Graph g, engine::builder::ImportAndOptimize(path, {}, &report));
  SURGE_ASSIGN_OR_RETURN(engine::Profile profile, engine::builder::ResolveProfile(g, {}));
  json j;
  j["kind"] = "model";
  j["path"] = path;
  j["inputs"] = Io(g, g.inputs);
  j["outputs"] = Io(g, g.outputs);
  j["profile"] = ProfileJson(profile);
  j["ops_before"] = report.passes.ops_before;
  j["ops_after"] = report.passes.ops_after.empty() ? g.OpCounts() : report.passes.ops_after;
  j["fusions"] = Fusions(g.OpCounts());
  j["passes"] = report.passes.log;
  j["timing_ms"] = {{"import", report.import_ms}, {"passes", report.optimize_ms}};
  j["memory"] = {{"weights_bytes", g.ConstantBytes()}};
  if (dot) *dot = ir::DumpDot(g);
  return j;
}

int RunInspect(const InspectArgs& a) {
  std::string dot;
  auto j = LooksLikePlan(a.path) ? InspectPlan(a.path, a.dot.empty() ? nullptr : &dot)
                                 : InspectModel(a.path, a.dot.empty() ? nullptr : &dot);
  if (!j.ok()) return Fail(j.status());
  if (!a.dot.empty()) {
    Status st = WriteText(a.dot, dot);
    if (!st.ok()) return Fail(st);
  }
  if (a.json) {
    std::cout << j->dump(1) << '\n';
  } else {
    PrintText(*j);
  }
  return 0;
}

std::function<int()> SetupInspect(CLI::App& sub) {
  auto a = std::make_shared<InspectArgs>();
  sub.add_option("path", a->path, "plan file, ONNX file or Hugging Face folder")->required();
  sub.add_flag("--json", a->json, "print JSON");
  sub.add_option("--dot", a->dot, "write the (optimised) graph as Graphviz DOT to this file");
  return [a] { return RunInspect(*a); };
}

SURGE_REGISTER_COMMAND(inspect, "inspect", "Show what a plan or model holds (ops, fusions, memory)",
                       SetupInspect);

}  // namespace
}  // namespace surge::cli
