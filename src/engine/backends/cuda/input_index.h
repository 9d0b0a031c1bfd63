// A request's token inputs on the host, before the GPU starts: integer tensors read as int32
// with their ranges checked, and the index arrays of the packed (padding-free) form. Host code
// only, so the checks are tested without a GPU.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "core/status.h"
#include "core/tensor.h"

namespace surge::engine::cuda {

// Reads an integer-valued host tensor (int64, int32, bool/uint8, or float32 read as != 0) as
// int32 into out[0, numel). An int64 value outside int32 is kOutOfRange, naming `name` and the
// first such index; another dtype is kInvalidArgument.
Status ReadInts(const Tensor& t, std::string_view name, int32_t* out);

// kOutOfRange, naming `what` and the first offending flat index, unless every value of `v` lies
// in [0, limit).
Status CheckRange(std::span<const int32_t> v, int64_t limit, std::string_view what);

// The packed form of mask[B, S] (row-major, non-zero = real token): cu_seqlens[0..B] (each
// sequence's first packed row, then the total), cls[b] = cu_seqlens[b], and row_index[t] = the
// flat index b * S + s of the t-th real token. row_index must hold B * S entries. Returns the
// number of real tokens.
int64_t PackRealTokens(const int32_t* mask, int64_t B, int64_t S, int32_t* cu_seqlens, int32_t* cls,
                       int32_t* row_index);

}  // namespace surge::engine::cuda
