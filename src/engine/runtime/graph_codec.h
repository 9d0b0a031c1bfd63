// Binary (de)serialisation of an optimised ir::Graph for the plan's "graph" and "weights"
// sections. Lives in runtime because both the builder (encode) and the runtime (decode) need it
// and the plan module may only use core.
//
// The graph section holds names, dtypes, symbolic shapes (Dim::ToString form), sym_data, nodes and
// every attribute kind (tensor attributes inline); constant data goes to the weights section at
// 64-byte-aligned offsets and is referenced by (offset, bytes). Decoding checks every count, id,
// dtype, offset and length, and returns DataLoss naming what is wrong; decoded constants are
// zero-copy Tensor views into the weights bytes, which must outlive the graph. A constant whose
// data the backend's tactics hold instead is stored as its header alone (see EncodeGraph).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"
#include "engine/ir/graph.h"

namespace surge::engine {

struct EncodedGraph {
  std::string graph;
  std::string weights;
};

// `data_in_tactics`: constants whose data a backend's tactics blob carries in the form its Load
// uses (Backend::ConstantsKeptByTactics); the graph section keeps their dtype and shape, the
// weights section leaves their bytes out, and DecodeGraph gives them as data-less views
// (is_constant() true, empty() true). Every id must name a constant.
Result<EncodedGraph> EncodeGraph(const ir::Graph& graph, std::span<const int> data_in_tactics = {});
Result<ir::Graph> DecodeGraph(std::span<const uint8_t> graph_bytes,
                              std::span<const uint8_t> weights);

}  // namespace surge::engine
