// Node-level entry points of the fused CPU kernels: check a node's input tensors (dtype, shape,
// attributes), allocate or take the output buffers, and call the raw kernels in kernels.h /
// linear.h. Used by cpu_backend.cc; errors name the node.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/status.h"
#include "core/tensor.h"
#include "engine/backends/cpu/isa.h"
#include "engine/backends/cpu/linear.h"
#include "engine/backends/cpu/quant_linear.h"
#include "engine/ir/graph.h"

namespace surge::engine::cpu {

// Returns the buffer for output `index` of shape `shape` (float32, or the dtype the backend planned
// for that value, e.g. int8 for a requantising Linear): an arena view when the memory plan has one
// of that shape, else a new owned tensor.
using OutputAllocator = std::function<Tensor(size_t index, const Shape& shape)>;

Status RunLinearNode(const ir::Node& node, const LinearKernel& kernel,
                     std::span<const Tensor* const> in, const OutputAllocator& alloc,
                     std::vector<Tensor>* out);
// INT8/BF16 Linear; X may be int8 (written by a requantising producer) for INT8 kernels. `scratch`
// holds the quantised X.
Status RunQuantLinearNode(const ir::Node& node, const QuantLinearKernel& kernel,
                          std::span<const Tensor* const> in, const OutputAllocator& alloc,
                          AlignedBuffer* scratch, std::vector<Tensor>* out);
Status RunLayerNormNode(Isa isa, const ir::Node& node, std::span<const Tensor* const> in,
                        const OutputAllocator& alloc, std::vector<Tensor>* out);
Status RunSkipLayerNormNode(Isa isa, const ir::Node& node, std::span<const Tensor* const> in,
                            const OutputAllocator& alloc, std::vector<Tensor>* out);
Status RunEmbedLayerNormNode(Isa isa, const ir::Node& node, std::span<const Tensor* const> in,
                             const OutputAllocator& alloc, std::vector<Tensor>* out);
Status RunGeluNode(Isa isa, const ir::Node& node, std::span<const Tensor* const> in,
                   const OutputAllocator& alloc, std::vector<Tensor>* out);
Status RunAttentionNode(Isa isa, const ir::Node& node, std::span<const Tensor* const> in,
                        const OutputAllocator& alloc, std::vector<Tensor>* out);
// Any op through the reference evaluator (ir::EvalNode).
Status RunGenericNode(const ir::Node& node, std::span<const Tensor* const> in,
                      std::vector<Tensor>* out);

Result<Activation> ParseActivation(std::string_view name);

}  // namespace surge::engine::cpu
