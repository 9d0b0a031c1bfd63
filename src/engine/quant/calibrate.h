// Calibration: which layers a quantised build can quantise, and the activation statistics of
// their inputs measured by running the FP32 model on calibration inputs.
//
// Statistics come from the real engine: the optimised graph gets every observed tensor as an extra
// output, is built for the CPU backend in FP32 and run batch by batch (as TensorRT calibrators
// mark tensors as outputs). Token rows that are padding (attention mask 0) are left out of the
// statistics of [B, S, ...] tensors, so padded batches calibrate like packed ones.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/ir/graph.h"
#include "engine/quant/calibration_cache.h"
#include "engine/runtime/engine.h"

namespace surge::engine::quant {

// A layer int8/fp8 builds may quantise: a surge::Linear or an ONNX MatMul with a constant 2-D
// float weight and a float input (attention, normalisation and every other op stay in the base
// precision).
struct QuantLayer {
  int node = -1;
  std::string name;   // node name (QuantSpec::layers key)
  std::string input;  // value name of X (QuantSpec::amax key)
  int64_t k = 0, n = 0;
};
// In graph order. InvalidArgument when two quantisable nodes share a name (layers are addressed
// by name in plans and reports).
Result<std::vector<QuantLayer>> QuantizableLayers(const ir::Graph& graph);

// The attention mask among `inputs`: the int tensor of rank 2 whose name contains "mask", or
// nullptr.
const Tensor* FindMask(const TensorMap& inputs);

struct CalibrateOptions {
  int num_threads = 0;  // threads of the FP32 engine (0: all cores)
  int bins = AbsHistogram::kDefaultBins;
};

// Runs the FP32 graph on every batch of `calibration` and returns statistics of every
// QuantizableLayers input, plus `holdout` stored for the accuracy guard. `graph` must be the
// optimised graph the build will quantise (its ModelHash goes into the cache). Errors: no
// calibration batch, a batch the model rejects (naming the batch).
Result<CalibrationCache> Calibrate(const ir::Graph& graph, std::span<const TensorMap> calibration,
                                   std::vector<TensorMap> holdout, const std::string& model_label,
                                   const CalibrateOptions& options = {});

// The profile covering every batch (min 1, opt = max = the largest dim seen), for engines that
// run them.
Result<Profile> ProfileCovering(const ir::Graph& graph, std::span<const TensorMap> batches);

}  // namespace surge::engine::quant
