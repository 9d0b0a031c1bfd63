// Shared helpers for the reference evaluators (eval_*.cc). Internal to engine/ir.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "engine/ir/graph.h"

namespace surge::engine::ir::eval_internal {

using EvalFn = std::function<Status(const Node&, std::span<const Tensor>, std::vector<Tensor>*)>;

// Registers `fn` for (domain, op_type); called by the Register*Evaluators() functions below.
void RegisterEvaluator(std::string_view domain, std::string_view op_type, EvalFn fn);

void RegisterElementwiseEvaluators();
void RegisterShapeEvaluators();
void RegisterReduceEvaluators();
void RegisterMatMulEvaluators();
void RegisterFusedEvaluators();

// "Op 'name'" for error messages.
std::string NodeLabel(const Node& node);

// Input i when present and defined, else nullptr.
const Tensor* OptionalInput(std::span<const Tensor> inputs, size_t i);
// Input i; an error naming the node when it is missing.
Result<const Tensor*> RequiredInput(const Node& node, std::span<const Tensor> inputs, size_t i);

// The elements of an integer (or float) tensor as int64.
std::vector<int64_t> ToInt64Vector(const Tensor& t);
// Normalises a possibly negative axis against `rank`; error when out of [-rank, rank).
Result<int64_t> NormalizeAxis(const Node& node, int64_t axis, int64_t rank);

// Numpy-style broadcast of several shapes; error naming the node when incompatible.
Result<Shape> BroadcastShapes(const Node& node, std::span<const Shape> shapes);
// Row-major strides of `shape`.
std::vector<int64_t> Strides(const Shape& shape);
// For an input of `in_shape` broadcast to `out_shape`: per output axis, the input stride (0 on
// broadcast axes).
std::vector<int64_t> BroadcastStrides(const Shape& in_shape, const Shape& out_shape);

// Calls fn(begin_out_index, count, in_offsets...) for contiguous runs; simpler: iterates every
// output element and hands the input element offsets to `fn`.
template <size_t N, typename Fn>
void ForEachBroadcast(const Shape& out_shape, const std::array<std::vector<int64_t>, N>& strides,
                      Fn&& fn) {
  const int64_t total = ::surge::NumElements(out_shape);
  if (total == 0) return;
  const size_t rank = out_shape.size();
  std::vector<int64_t> idx(rank, 0);
  std::array<int64_t, N> off{};
  const int64_t inner = rank ? out_shape[rank - 1] : 1;
  std::array<int64_t, N> inner_stride{};
  for (size_t k = 0; k < N; ++k) inner_stride[k] = rank ? strides[k][rank - 1] : 0;
  for (int64_t base = 0; base < total; base += inner) {
    std::array<int64_t, N> o = off;
    for (int64_t j = 0; j < inner; ++j) {
      fn(base + j, o);
      for (size_t k = 0; k < N; ++k) o[k] += inner_stride[k];
    }
    // Advance the outer index (all axes but the last).
    for (int64_t ax = static_cast<int64_t>(rank) - 2; ax >= 0; --ax) {
      ++idx[ax];
      for (size_t k = 0; k < N; ++k) off[k] += strides[k][ax];
      if (idx[ax] < out_shape[ax]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][ax] * out_shape[ax];
      idx[ax] = 0;
    }
  }
}

// Converts any supported tensor to `dtype` (numeric conversions as static_cast; to bool: != 0).
Result<Tensor> ConvertTo(const Tensor& t, DType dtype);

// Calls fn(T{}) with T the C++ type of `dtype` for the computing dtypes (float, double, int64_t,
// int32_t, int8_t, uint8_t, bool). Returns false for others.
template <typename Fn>
bool DispatchDType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32:
      fn(float{});
      return true;
    case DType::kFloat64:
      fn(double{});
      return true;
    case DType::kInt64:
      fn(int64_t{});
      return true;
    case DType::kInt32:
      fn(int32_t{});
      return true;
    case DType::kInt8:
      fn(int8_t{});
      return true;
    case DType::kUInt8:
      fn(uint8_t{});
      return true;
    case DType::kBool:
      fn(bool{});
      return true;
    default:
      return false;
  }
}

Status UnsupportedDType(const Node& node, DType dtype, std::string_view what = "input");

// Erf-based and tanh-based GELU on one value (double precision; the reference).
double GeluErf(double x);
double GeluTanh(double x);

}  // namespace surge::engine::ir::eval_internal
