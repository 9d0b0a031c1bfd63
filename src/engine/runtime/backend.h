// The backend interface: what the builder and the runtime ask of a device backend (cpu, cuda).
//
// Build time: Lower() turns an optimised graph (fused Surge ops + generic ONNX ops, symbolic
// shapes) into an opaque blob stored in the plan's tactics section: pre-packed weights, chosen
// algorithms, memory plan. Run time: Load() makes a BackendEngine from the same graph (constants
// view the mapped plan) and that blob; the engine is immutable and shared; each BackendContext
// owns activations/streams and is used by one thread at a time.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "engine/ir/graph.h"
#include "engine/runtime/profile.h"

namespace surge::engine {

enum class Precision { kFp32, kFp16, kBf16, kInt8, kFp8 };
std::string_view PrecisionName(Precision p);
Result<Precision> ParsePrecision(std::string_view name);

// Quantisation of a build (filled by engine/quant, read by the backends' Lower): the precision
// each quantisable layer (Linear node, by node name) runs at and why, and the calibrated absolute
// threshold ("amax") of every tensor a quantised layer reads (by value name). A tensor's scale is
// amax / 127 for INT8 and amax / 448 for FP8 e4m3; values beyond amax saturate. Layers not named
// run at the build's base precision (CPU fp32, CUDA fp16 for int8/fp8 builds).
struct LayerPrecision {
  Precision precision = Precision::kFp32;
  std::string reason;  // one line for `surge inspect`: why this precision
};

struct QuantSpec {
  std::map<std::string, LayerPrecision> layers;  // node name -> precision
  std::map<std::string, float> amax;             // value name -> calibrated |x| threshold
  std::string calibrator;                        // "entropy", "percentile 99.99", "minmax"
  std::string report_json = "{}";                // accuracy-guard results (a JSON object)

  bool empty() const { return layers.empty() && amax.empty(); }
  // The precision `node_name` runs at: its entry, else `fallback`.
  Precision LayerOr(const std::string& node_name, Precision fallback) const {
    auto it = layers.find(node_name);
    return it == layers.end() ? fallback : it->second.precision;
  }
  // amax of `value_name`, or 0 when not calibrated.
  float AmaxOf(const std::string& value_name) const {
    auto it = amax.find(value_name);
    return it == amax.end() ? 0.f : it->second;
  }
};

struct BuilderConfig {
  std::string backend = "cpu";
  Precision precision = Precision::kFp32;
  Profile profile;
  int num_threads = 0;             // 0: all cores
  bool padding_free = true;        // pack tokens for recognised encoders (where supported)
  size_t memory_budget_bytes = 0;  // 0: unlimited
  std::string timing_cache_path;   // backends that time tactics keep results here
  // Backends that time tactics: also search the configurations around the library's heuristic
  // picks (the CUDA backend's cuBLASLt GEMMs, TacticSearch::kFull; slower builds).
  bool full_tactic_search = false;
  QuantSpec quant;  // per-layer precision and scales (int8/fp8/bf16 builds)
};

struct EngineOptions {
  int num_threads = 0;             // 0: as built
  size_t memory_budget_bytes = 0;  // 0: unlimited
};

class BackendContext {
 public:
  virtual ~BackendContext() = default;
  // `inputs` in graph-input order with concrete shapes (already checked against the profile).
  // Fills `outputs` in graph-output order; the tensors own their memory (or view memory owned by
  // this context that stays valid until the next Execute).
  virtual Status Execute(std::span<const Tensor> inputs, std::vector<Tensor>* outputs) = 0;
};

class BackendEngine {
 public:
  virtual ~BackendEngine() = default;
  virtual Result<std::unique_ptr<BackendContext>> CreateContext() = 0;
  // Human-readable summary for `surge inspect`: kernels per node, memory plan, weights layout.
  virtual std::string Describe() const { return {}; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // Identifies the hardware a plan's tactics are valid for ("x86_64-avx512", "sm_90a").
  virtual std::string DeviceArch() const = 0;
  // Whether this machine has the device the backend runs on (Unavailable, with the reason, when
  // not). Lower may still work without it; Load and contexts need it.
  virtual Status DeviceAvailable() const { return Status::Ok(); }
  // The precision a build gets when none is asked for.
  virtual Precision DefaultPrecision() const { return Precision::kFp32; }
  virtual Result<std::string> Lower(const ir::Graph& graph, const BuilderConfig& config) = 0;
  // Constants whose data the tactics blob of a Lower with `config` already carries in the form
  // Load reads, so that Load never reads the graph's copy: the plan keeps only their dtype and
  // shape (EncodeGraph's data_in_tactics) and Load sees them as data-less views.
  virtual Result<std::vector<int>> ConstantsKeptByTactics(const ir::Graph& /*graph*/,
                                                          const BuilderConfig& /*config*/,
                                                          std::span<const uint8_t> /*tactics*/) {
    return std::vector<int>{};
  }
  virtual Result<std::unique_ptr<BackendEngine>> Load(std::shared_ptr<const ir::Graph> graph,
                                                      std::span<const uint8_t> tactics,
                                                      const BuilderConfig& built_with,
                                                      const EngineOptions& options) = 0;
};

// The registry is filled once, on first lookup, by RegisterBuiltinBackends() (defined in
// engine/backends/builtin.cc: cpu, and cuda when built with SURGE_CUDA).
void RegisterBackend(std::unique_ptr<Backend> backend);
void RegisterBuiltinBackends();
// nullptr when no backend of that name was built in.
Backend* FindBackend(std::string_view name);
// The named backend's DefaultPrecision (fp32 for a name not built in: building then fails on the
// name).
Precision DefaultPrecision(std::string_view backend);
std::vector<std::string> BackendNames();

}  // namespace surge::engine
