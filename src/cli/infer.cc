// `surge infer PLAN --input FILE.json|-`: run a plan once on inputs given as JSON and print the
// outputs as JSON ({"logits": {"shape": [..], "dtype": "float32", "data": [..]}}).
#include <iostream>
#include <string>

#include "cli/command.h"
#include "cli/engine_io.h"
#include "engine/runtime/engine.h"

namespace surge::cli {
namespace {

struct InferArgs {
  std::string plan;
  std::string input;
  std::string output;
  int threads = 0;
};

int RunInfer(const InferArgs& a) {
  engine::EngineOptions options;
  options.num_threads = a.threads;
  auto engine = engine::Engine::Load(a.plan, options);
  if (!engine.ok()) return Fail(engine.status());
  auto j = ReadJson(a.input);
  if (!j.ok()) return Fail(j.status());
  auto inputs = TensorsFromJson(*j, engine->get());
  if (!inputs.ok()) return Fail(inputs.status());
  auto ctx = (*engine)->CreateContext();
  if (!ctx.ok()) return Fail(ctx.status());
  auto outputs = (*ctx)->Run(*inputs);
  if (!outputs.ok()) return Fail(outputs.status());
  Status st = WriteText(a.output, TensorsToJson(*outputs).dump() + "\n");
  return st.ok() ? 0 : Fail(st);
}

std::function<int()> SetupInfer(CLI::App& sub) {
  auto a = std::make_shared<InferArgs>();
  sub.add_option("plan", a->plan, "plan file")->required();
  sub.add_option("-i,--input", a->input,
                 "JSON inputs {\"input_ids\": {\"shape\": [1,5], \"data\": [..]}, ...}; - for "
                 "stdin")
      ->required();
  sub.add_option("-o,--output", a->output, "write the JSON outputs here (default stdout)");
  sub.add_option("--threads", a->threads, "threads (0: as built)");
  return [a] { return RunInfer(*a); };
}

SURGE_REGISTER_COMMAND(infer, "infer", "Run a plan on JSON inputs, print JSON outputs", SetupInfer);

}  // namespace
}  // namespace surge::cli
