// CPU backend kernels: Linear (oneDNN, packed weights) at BERT-base sizes, attention 12 heads x
// 128, and the fused elementwise kernels. Counters report GFLOP/s (matmul-type) or GB/s.
//   build/<dir>/bench/engine/cpu_kernels_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>

#include "core/aligned_buffer.h"
#include "engine/backends/cpu/isa.h"
#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/linear.h"
#include "engine/backends/cpu/parallel.h"

namespace surge::engine::cpu {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

Isa IsaArg(int64_t a) { return a == 512 ? Isa::kAvx512 : Isa::kAvx2; }

bool SkipUnsupported(benchmark::State& state, Isa isa) {
  if (CpuSupports(isa)) return false;
  state.SkipWithError("ISA not supported by this CPU");
  return true;
}

// Linear M x K -> N with bias (+ GELU when range(3) = 1), weights packed for this M.
void BM_Linear(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  LinearSpec spec{k, n, true, false, state.range(3) ? Activation::kGelu : Activation::kNone};
  std::vector<float> w = Random(k * n, 1), x = Random(m * k, 2), b = Random(n, 3),
                     y(static_cast<size_t>(m * n));
  Result<PackedWeights> pw = PackLinearWeights(spec, w.data(), m);
  if (!pw.ok()) return state.SkipWithError(pw.status().ToString().c_str());
  AlignedBuffer buf(pw->data.size());
  std::memcpy(buf.data(), pw->data.data(), pw->data.size());
  auto kernel = LinearKernel::Create(spec, pw->desc, buf.data(), pw->data.size());
  if (!kernel.ok()) return state.SkipWithError(kernel.status().ToString().c_str());
  SetNumThreads(0);
  for (auto _ : state) {
    Status s = (*kernel)->Run(x.data(), b.data(), nullptr, y.data(), m);
    benchmark::DoNotOptimize(y.data());
    if (!s.ok()) return state.SkipWithError(s.ToString().c_str());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * k * n * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(pw->impl + (pw->desc.empty() ? " plain" : " packed"));
}
BENCHMARK(BM_Linear)
    ->Args({1024, 768, 3072, 1})
    ->Args({1024, 3072, 768, 0})
    ->Args({1024, 768, 2304, 0})
    ->Args({1024, 768, 768, 0})
    ->Args({32, 768, 3072, 1})
    ->ArgNames({"M", "K", "N", "gelu"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Attention over QKV[B,S,3H] with 12 heads (d = 64); range(2) = padded keys per sequence.
void BM_Attention(benchmark::State& state) {
  const Isa isa = IsaArg(state.range(3));
  if (SkipUnsupported(state, isa)) return;
  const int64_t b = state.range(0), s = state.range(1), pad = state.range(2), h = 768, heads = 12;
  std::vector<float> qkv = Random(b * s * 3 * h, 4), y(static_cast<size_t>(b * s * h));
  std::vector<int64_t> mask(static_cast<size_t>(b * s), 1);
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t j = s - pad; j < s; ++j) mask[i * s + j] = 0;
  }
  SetNumThreads(0);
  for (auto _ : state) {
    AttentionKernel(isa, qkv.data(), mask.data(), y.data(), b, s, h, heads, 0.125f);
    benchmark::DoNotOptimize(y.data());
  }
  const double flops = 4.0 * b * s * (s - pad) * h;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Attention)
    ->Args({8, 128, 0, 512})
    ->Args({8, 128, 0, 2})
    ->Args({8, 128, 64, 512})
    ->Args({1, 32, 0, 512})
    ->ArgNames({"B", "S", "pad", "isa"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_SkipLayerNorm(benchmark::State& state) {
  const Isa isa = IsaArg(state.range(1));
  if (SkipUnsupported(state, isa)) return;
  const int64_t rows = state.range(0), h = 768;
  std::vector<float> x = Random(rows * h, 5), skip = Random(rows * h, 6), g = Random(h, 7),
                     bt = Random(h, 8), bias = Random(h, 9), y(static_cast<size_t>(rows * h));
  SetNumThreads(0);
  for (auto _ : state) {
    SkipLayerNormKernel(isa, x.data(), skip.data(), bias.data(), g.data(), bt.data(), y.data(),
                        nullptr, rows, h, 1e-12f);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(3.0 * rows * h * 4 * state.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SkipLayerNorm)->Args({1024, 512})->Args({1024, 2})->UseRealTime();

void BM_Gelu(benchmark::State& state) {
  const Isa isa = IsaArg(state.range(1));
  if (SkipUnsupported(state, isa)) return;
  const int64_t n = state.range(0);
  std::vector<float> x = Random(n, 10), y(static_cast<size_t>(n));
  SetNumThreads(0);
  for (auto _ : state) {
    GeluKernel(isa, x.data(), y.data(), n, false);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["Gelem/s"] = benchmark::Counter(static_cast<double>(n) * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Gelu)->Args({1024 * 3072, 512})->Args({1024 * 3072, 2})->UseRealTime();

}  // namespace
}  // namespace surge::engine::cpu

BENCHMARK_MAIN();
