// Helpers shared by the built-in op schemas (ops_*.cc): input access, broadcasting of symbolic
// dims, and the `sym_data` (symbolic element values) of small integer tensors. Internal to ir.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/ir/graph.h"
#include "engine/ir/op_schema.h"

namespace surge::engine::ir::ops {

// Largest element count of a constant that shape inference reads as symbolic data.
inline constexpr int64_t kMaxSymDataElements = 64;

// The value of input i, or nullptr when it is omitted.
const Value* Input(const Graph& g, const Node& n, size_t i);
Value& Output(Graph& g, const Node& n, size_t i);

// "node 'name' (Op): <message>" as an InvalidArgument error.
template <typename... Args>
Status NodeError(const Node& n, fmt::format_string<Args...> f, Args&&... args) {
  return InvalidArgumentError("node '{}' ({}): {}", n.name, n.op_type,
                              fmt::format(f, std::forward<Args>(args)...));
}

// Element values of a rank-0/1 integer (or integer-valued) value: its sym_data, or the data of a
// small integer constant. nullopt when unknown.
std::optional<std::vector<Dim>> SymData(const Graph& g, int value_id);
// Same, but only when every element is static.
std::optional<std::vector<int64_t>> StaticData(const Graph& g, int value_id);
// Input i's data (nullopt when absent or unknown).
std::optional<std::vector<Dim>> InputSymData(const Graph& g, const Node& n, size_t i);
std::optional<std::vector<int64_t>> InputStaticData(const Graph& g, const Node& n, size_t i);

// Broadcasts two symbolic shapes with numpy rules. A symbolic dim is assumed not to be 1; two
// different symbolic dims are assumed equal (the first is kept).
Result<SymShape> BroadcastShapes(const Node& n, const SymShape& a, const SymShape& b);
Result<Dim> BroadcastDim(const Node& n, const Dim& a, const Dim& b);

// Normalises a possibly negative axis into [0, rank); error names the node.
Result<int64_t> NormalizeAxis(const Node& n, int64_t axis, int64_t rank);

// Sets output i's dtype and shape (and clears stale sym_data).
void SetOutput(Graph& g, const Node& n, size_t i, DType dtype, std::optional<SymShape> shape);
void SetSymData(Graph& g, const Node& n, size_t i, std::vector<Dim> data);

// Registers a schema; max_inputs -1 means variadic.
void Define(std::string_view domain, std::string_view op, int min_in, int max_in, int min_out,
            int max_out, InferFn infer);

// Families, called from RegisterBuiltinOpSchemas().
void RegisterElementwiseOps();
void RegisterShapeOps();
void RegisterNnOps();
void RegisterFusedOps();

}  // namespace surge::engine::ir::ops
