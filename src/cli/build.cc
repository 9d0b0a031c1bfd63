// `surge build MODEL -o PLAN`: import an ONNX file or Hugging Face folder, optimise, lower for a
// backend and write a plan file (trtexec --onnx ... --saveEngine).
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/engine_io.h"
#include "engine/builder/builder.h"

namespace surge::cli {
namespace {

struct BuildArgs {
  std::string model;
  std::string output;
  std::string backend = "cpu";
  std::string precision = "fp32";
  std::vector<std::string> profiles;
  int threads = 0;
  bool json = false;
};

int RunBuild(const BuildArgs& a) {
  engine::BuilderConfig config;
  config.backend = a.backend;
  auto precision = engine::ParsePrecision(a.precision);
  if (!precision.ok()) return Fail(precision.status());
  config.precision = *precision;
  config.num_threads = a.threads;
  std::string spec;
  for (const auto& p : a.profiles) spec += (spec.empty() ? "" : ";") + p;
  auto profile = engine::Profile::Parse(spec);
  if (!profile.ok()) return Fail(profile.status());
  config.profile = *profile;

  engine::builder::BuildReport report;
  Status st = engine::builder::BuildToFile(a.model, config, a.output, &report);
  if (!st.ok()) return Fail(st);
  if (a.json) {
    auto j = nlohmann::json::parse(report.ToJson());
    j["plan"] = a.output;
    j["plan_bytes"] = report.plan_bytes;
    std::cout << j.dump(1) << '\n';
    return 0;
  }
  std::cout << "built " << a.output << " (" << report.plan_bytes << " bytes) from " << a.model
            << " for backend " << a.backend << ", " << a.precision << '\n';
  std::cout << fmt::format(
      "time: {:.1f} ms (import {:.1f}, passes {:.1f}, lower {:.1f}, write "
      "{:.1f})\n",
      report.total_ms, report.import_ms, report.optimize_ms, report.lower_ms, report.write_ms);
  std::cout << "fused ops:";
  bool any = false;
  for (const auto& [op, n] : report.passes.ops_after) {
    if (op.rfind("surge::", 0) == 0) {
      std::cout << ' ' << op.substr(7) << '=' << n;
      any = true;
    }
  }
  std::cout << (any ? "" : " none") << '\n';
  int before = 0, after = 0;
  for (const auto& [op, n] : report.passes.ops_before) before += n;
  for (const auto& [op, n] : report.passes.ops_after) after += n;
  std::cout << "nodes: " << before << " -> " << after << '\n';
  std::cout << "profile: " << report.profile.ToString() << '\n';
  std::cout << "weights: " << report.weights_bytes << " bytes, tactics: " << report.tactics_bytes
            << " bytes\n";
  return 0;
}

std::function<int()> SetupBuild(CLI::App& sub) {
  auto a = std::make_shared<BuildArgs>();
  sub.add_option("model", a->model, "ONNX file or Hugging Face folder")->required();
  sub.add_option("-o,--output", a->output, "plan file to write")->required();
  sub.add_option("--backend", a->backend, "cpu or cuda")->capture_default_str();
  sub.add_option("--precision", a->precision, "fp32, fp16, bf16, int8, fp8")->capture_default_str();
  sub.add_option("--profile", a->profiles,
                 "NAME:MIN,OPT,MAX, e.g. input_ids:1x1,8x128,64x512 (repeatable; inputs not named "
                 "get batch 1..64 opt 8, seq 1..512 opt 128)");
  sub.add_option("--threads", a->threads, "threads the plan runs with (0: all cores)");
  sub.add_flag("--json", a->json, "print the build report as JSON");
  return [a] { return RunBuild(*a); };
}

SURGE_REGISTER_COMMAND(build, "build", "Build a plan file from an ONNX model or HF checkpoint",
                       SetupBuild);

}  // namespace
}  // namespace surge::cli
