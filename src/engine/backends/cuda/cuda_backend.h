// The CUDA backend ("cuda", device arch "sm_90a"): FP16/BF16 fused encoder kernels, cuBLASLt GEMMs
// with tuned algorithms, padding-free execution (tokens packed after EmbedLayerNorm, attention
// per sequence, [CLS] gathered), one activation arena per context sized for the profile's max,
// CUDA graphs captured per shape bucket. Engines are shared; each context has its own stream.
//
// Lower works without a GPU (weights converted, GEMMs left to cuBLASLt's heuristic); Load and
// CreateContext return Unavailable when no suitable GPU is present.
#pragma once

#include <memory>

#include "engine/runtime/backend.h"

namespace surge::engine::cuda {

std::unique_ptr<Backend> CreateCudaBackend();

// Whether a GPU this backend can run on (compute capability 9.0) is present; the error says why
// not. Cheap after the first call.
Status CudaDeviceAvailable();

}  // namespace surge::engine::cuda
