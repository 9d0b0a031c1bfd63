// Internal helpers for the graph passes: reading constants, walking producers, counting uses and
// splicing fused nodes into a graph. Not part of the engine's public API.
//
// Fusions follow one discipline: a pass takes a Matcher snapshot of the graph, matches patterns on
// it, appends each fused node (its output takes over the uses and the name of the value it
// replaces) and marks the matched nodes as claimed so that no later match in the same sweep reuses
// them. The replaced nodes become dead and are dropped by FinishPass (dead-node removal +
// topological sort), after which value ids and node indices are renumbered.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "engine/ir/graph.h"

namespace surge::engine::passes {

// Largest folded constant that a growth op (Expand, ConstantOfShape, Tile, ...; more than twice
// its inputs) may make unless only shape ops read it.
inline constexpr size_t kMaxFoldGrowthBytes = size_t{1} << 20;

class Matcher {
 public:
  explicit Matcher(ir::Graph& g);

  ir::Graph& graph() { return g_; }
  const ir::Graph& graph() const { return g_; }
  const ir::Value& value(int v) const { return g_.values[v]; }

  // The node producing value `v` when it is an ONNX-domain node of type `op` that is not claimed;
  // nullptr otherwise.
  const ir::Node* Producer(int v, std::string_view op) const;
  int ProducerIndex(int v) const { return v < 0 ? -1 : g_.values[v].producer; }
  // Data uses of `v` (node inputs other than Shape/Size, and graph outputs) in the snapshot.
  int Uses(int v) const { return v < 0 ? 0 : uses_[v]; }
  const std::vector<int>& Consumers(int v) const { return consumers_[v]; }
  bool IsGraphOutput(int v) const;

  bool IsClaimed(int node) const { return claimed_[node]; }
  void Claim(int node) { claimed_[node] = true; }
  void Claim(std::span<const int> nodes) {
    for (int n : nodes) Claim(n);
  }

  // Constant helpers.
  bool IsConst(int v) const { return v >= 0 && g_.values[v].is_constant(); }
  // The single element of a constant with one element, as double.
  std::optional<double> ScalarConst(int v) const;
  // A constant integer vector (rank 0 or 1 int32/int64).
  std::optional<std::vector<int64_t>> IntsConst(int v) const;

  // Follows Cast nodes that keep a floating dtype or integer dtype identical in meaning; returns
  // the first value that is not the output of a Cast.
  int SkipCasts(int v) const;

  // Adds a node with the given outputs created as fresh values; returns the output ids.
  std::vector<int> AddNode(std::string op_type, std::string_view domain, std::string_view name,
                           std::vector<int> inputs, int num_outputs,
                           std::map<std::string, ir::Attribute> attrs = {});
  // Makes `to` take over every use of `from`, including graph outputs; `to` also takes `from`'s
  // name, dtype and shape (when known) so model outputs keep their names.
  void Replace(int from, int to);

 private:
  ir::Graph& g_;
  std::vector<int> uses_;
  std::vector<std::vector<int>> consumers_;
  std::vector<bool> claimed_;
  std::vector<bool> is_output_;
};

// Rank of a value when its shape is known, else -1.
int64_t RankOf(const Matcher& m, int v);
// True when reduction node `r` (ReduceMean, ReduceSum, ReduceL2, ...) reduces exactly the last
// axis of `x` with keepdims = 1; axes come from the attribute or the constant second input.
bool ReducesLastAxis(const Matcher& m, const ir::Node& r, int x);
// Every use of `v` is a node in `nodes` (and `v` is not a graph output).
bool UsesWithin(const Matcher& m, int v, std::span<const int> nodes);

// What a traced attention-mask value must be, per key: an additive bias (0 where attended, <= -1e4
// where padded), or a condition that is true exactly at padded (or at attended) keys.
enum class MaskRole { kAdditiveBias, kTrueAtPadding, kTrueAtAttended };

// Checks by evaluation (ir::EvalNode on several concrete masks and sizes) that value `v` is
// a key-padding mask of role `role`, broadcastable to the [B, heads, S, S] scores, computed from
// exactly one [batch, seq] graph input. Returns that input, or nullopt with the reason in *why.
std::optional<int> ProbeMask(const ir::Graph& g, int v, MaskRole role, std::string* why);

// Drops dead nodes and re-sorts the graph after a fusion sweep.
Status FinishPass(ir::Graph& g);

// Float tensor helpers.
Tensor ConstFloat(Shape shape, std::span<const float> data);
// Row-major transpose of a rank-2 tensor (any dtype).
Tensor Transpose2D(const Tensor& t);
// General permutation of a constant tensor (any dtype).
Tensor TransposeTensor(const Tensor& t, std::span<const int64_t> perm);

// Normalises a possibly negative axis for `rank`; nullopt when out of range.
std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank);

// Whether `actual` is within relative tolerance of `expected`.
bool Near(double actual, double expected, double rel = 1e-5);

}  // namespace surge::engine::passes
