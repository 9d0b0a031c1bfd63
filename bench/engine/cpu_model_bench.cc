// End-to-end CPU backend latency on a real model, without the CLI:
//   SURGE_BENCH_MODEL=bench/work/bert_base_ts/model.onnx cpu_model_bench
//     --benchmark_filter='BM_Model/8/128' --benchmark_min_time=3   (one command line)
// Imports and optimises the model once, lowers it for the CPU backend at the benchmarked shape,
// then times Execute on random token ids (all tokens real); Time is per batch.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "engine/backends/cpu/cpu_backend.h"
#include "engine/builder/builder.h"

namespace surge::engine::cpu {
namespace {

void BM_Model(benchmark::State& state) {
  const char* path = std::getenv("SURGE_BENCH_MODEL");
  if (path == nullptr) return state.SkipWithError("set SURGE_BENCH_MODEL to an ONNX file");
  const int64_t batch = state.range(0), seq = state.range(1);
  builder::BuildReport report;
  Result<ir::Graph> graph = builder::ImportAndOptimize(path, passes::PassOptions{}, &report);
  if (!graph.ok()) return state.SkipWithError(graph.status().ToString().c_str());
  auto shared = std::make_shared<ir::Graph>(std::move(graph).value());
  std::string prof;
  for (int id : shared->inputs) {
    prof += fmt::format("{}{}:1x1,{}x{},{}x{}", prof.empty() ? "" : ";", shared->values[id].name,
                        batch, seq, batch, seq);
  }
  BuilderConfig config;
  config.profile = *Profile::Parse(prof);
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  Result<std::string> blob = backend->Lower(*shared, config);
  if (!blob.ok()) return state.SkipWithError(blob.status().ToString().c_str());
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(blob->data()), blob->size());
  auto engine = backend->Load(shared, bytes, config, {});
  if (!engine.ok()) return state.SkipWithError(engine.status().ToString().c_str());
  if (std::getenv("SURGE_BENCH_DESCRIBE") != nullptr) {
    std::fputs((*engine)->Describe().c_str(), stderr);
  }
  auto ctx = (*engine)->CreateContext();
  std::mt19937 gen(1);
  std::vector<Tensor> inputs;
  for (int id : shared->inputs) {
    const std::string& name = shared->values[id].name;
    Tensor t(DType::kInt64, {batch, seq});
    for (int64_t& v : t.span<int64_t>()) {
      v = name == "attention_mask" ? 1 : name == "token_type_ids" ? 0 : 100 + gen() % 20000;
    }
    inputs.push_back(t);
  }
  std::vector<Tensor> out;
  Status s = (*ctx)->Execute(inputs, &out);  // warm-up: primitives, arena
  if (!s.ok()) return state.SkipWithError(s.ToString().c_str());
  // Process CPU time (all threads) per batch as well: on a machine shared with other work it
  // tracks the work done better than wall time does.
  auto cpu_seconds = [] {
    rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  };
  const double cpu0 = cpu_seconds();
  for (auto _ : state) {
    s = (*ctx)->Execute(inputs, &out);
    if (!s.ok()) return state.SkipWithError(s.ToString().c_str());
  }
  state.counters["process_cpu_ms"] =
      1e3 * (cpu_seconds() - cpu0) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_Model)
    ->Args({1, 32})
    ->Args({8, 128})
    ->Args({32, 128})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);

}  // namespace
}  // namespace surge::engine::cpu

BENCHMARK_MAIN();
