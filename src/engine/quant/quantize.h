// Quantised builds: the builder's hook that turns a calibration cache into the per-layer
// precision and tensor thresholds of a BuilderConfig (QuantSpec), running the accuracy guard, and
// the whole `surge build --precision int8|fp8|bf16 --calibration CACHE` flow.
//
//   int8 / fp8  need a calibration cache made from this model (ModelHash must match). Every
//               quantisable layer (calibrate.h) whose input was calibrated starts quantised; the
//               accuracy guard (on the cache's held-out inputs) falls layers back to the base
//               precision (CPU fp32, CUDA fp16) until the budget holds.
//   bf16        needs no calibration; with a cache the guard runs the same way.
// Every quantisable layer gets an entry with its precision and the reason, which plans keep in
// their "quant" section for `surge inspect`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/builder/builder.h"
#include "engine/quant/accuracy_guard.h"
#include "engine/quant/calibration_cache.h"
#include "engine/quant/calibrator.h"

namespace surge::engine::quant {

struct QuantizeOptions {
  CalibratorOptions calibrator;
  bool guard = true;  // false: every calibrated layer quantised, no measurement
  GuardOptions guard_options;
};

struct QuantizeReport {
  std::string calibrator;
  int layers = 0;     // quantisable layers
  int quantised = 0;  // of them, at the quantised precision in the plan
  bool guarded = false;
  GuardResult guard;  // when guarded

  std::string ToJson() const;
};

// The precision a quantised layer falls back to on `backend`: fp32 on the CPU, fp16 on CUDA.
Precision BasePrecision(const std::string& backend);

// The precisions a layer quantised at `target` falls back through on `backend`, cheapest first
// (accuracy_guard.h): CUDA fp8 -> int8 -> fp16; every other build its base precision alone.
std::vector<Precision> DefaultFallbacks(const std::string& backend, Precision target);

// "int8,fp16" -> {kInt8, kFp16}; errors name the bad entry. Checked against a build by Quantize.
Result<std::vector<Precision>> ParseFallbacks(std::string_view list);

// Whether `ladder` can serve a `target` build on `backend`: every entry a precision a single
// layer of that backend runs (cuda: int8, fp8, fp16; cpu: int8, bf16, fp32), int8/fp8 only in
// builds that have calibrated scales (int8/fp8 targets), none repeated, the target not among them.
Status CheckFallbacks(const std::string& backend, Precision target,
                      const std::vector<Precision>& ladder);

// Fills config->quant for the optimised `graph` (config->precision int8, fp8 or bf16; others
// are left alone). `cache` may be null for bf16. Errors: int8/fp8 without a cache, a cache made
// for another model, guard requested without held-out inputs in the cache, a budget that cannot
// be met.
Status Quantize(const ir::Graph& graph, const CalibrationCache* cache,
                const QuantizeOptions& options, BuilderConfig* config, QuantizeReport* report);

// Import, optimise, Quantize (reading `cache_path` when not empty) and write the plan.
Status BuildQuantizedToFile(const std::string& model_path, const BuilderConfig& config,
                            const std::string& cache_path, const QuantizeOptions& options,
                            const std::string& plan_path, builder::BuildReport* build_report,
                            QuantizeReport* report);

}  // namespace surge::engine::quant
