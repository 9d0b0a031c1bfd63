// oneDNN plumbing shared by the Linear kernels (linear.cc, quant_linear.cc): the CPU engine,
// weight reorders between the plain [K,N] layout and the packed one oneDNN picks, descriptors as
// stored in plans, and activation post-ops. Internal to the CPU backend.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/status.h"
#include "engine/backends/cpu/kernels.h"

namespace surge::engine::cpu::onednn {

dnnl::engine& Engine();

// The eltwise algorithm of a Linear activation (undef for kNone).
dnnl::algorithm EltwiseOf(Activation act);

// Copies `src` (in layout `from`) into `dst` (in layout `to`, same dims and type).
Status Reorder(const dnnl::memory::desc& from, const void* src, const dnnl::memory::desc& to,
               void* dst);

// Weights in the layout `chosen` from plain ones: `data` and `desc` (the descriptor bytes, empty
// when `chosen` is the plain layout and the bytes are copied as they are).
Status PackWeights(const dnnl::memory::desc& plain, const void* src,
                   const dnnl::memory::desc& chosen, std::vector<uint8_t>* data, std::string* desc);

// The weights layout stored in a plan: `plain` when `bytes` is empty, else the descriptor those
// bytes hold, which must describe `plain`'s dims and data type (DataLoss otherwise, naming
// `what`).
Result<dnnl::memory::desc> StoredWeightsDesc(std::string_view bytes,
                                             const dnnl::memory::desc& plain,
                                             std::string_view what);

// The plain copy a kernel falls back to when oneDNN refuses the packed layout at some M; filled
// once into `plain_copy` (the caller holds its lock).
Status EnsurePlainCopy(const dnnl::memory::desc& packed, const void* weights,
                       const dnnl::memory::desc& plain, AlignedBuffer* plain_copy);

}  // namespace surge::engine::cpu::onednn
