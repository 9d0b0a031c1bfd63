#include "engine/backends/cuda/input_index.h"

#include <climits>
#include <cstring>

namespace surge::engine::cuda {

// ReadInts and CheckRange run over every token of a request before the GPU starts, so they are
// branch-free passes the compiler vectorises; the offending element is looked for only once a
// pass has found one.
Status ReadInts(const Tensor& t, std::string_view name, int32_t* out) {
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::kInt64: {
      const int64_t* s = t.data_as<int64_t>();
      // Non-zero once a value lies outside [INT32_MIN, INT32_MAX] (shifted, it needs 33 bits).
      uint64_t outside = 0;
      for (int64_t i = 0; i < n; ++i) {
        outside |= (static_cast<uint64_t>(s[i]) + 0x80000000ull) >> 32;
        out[i] = static_cast<int32_t>(s[i]);
      }
      if (outside != 0) {
        for (int64_t i = 0; i < n; ++i) {
          if (s[i] < INT32_MIN || s[i] > INT32_MAX) {
            return OutOfRangeError("input '{}': value {} at index {} does not fit int32", name,
                                   s[i], i);
          }
        }
      }
      return Status::Ok();
    }
    case DType::kInt32:
      std::memcpy(out, t.data(), n * 4);
      return Status::Ok();
    case DType::kBool:
    case DType::kUInt8:
      for (int64_t i = 0; i < n; ++i) out[i] = t.data_as<uint8_t>()[i];
      return Status::Ok();
    case DType::kFloat32:
      for (int64_t i = 0; i < n; ++i) out[i] = t.data_as<float>()[i] != 0.f;
      return Status::Ok();
    default:
      return InvalidArgumentError(
          "input '{}': dtype {} is not supported (valid: int64, int32, "
          "bool, float32)",
          name, DTypeName(t.dtype()));
  }
}

Status CheckRange(std::span<const int32_t> v, int64_t limit, std::string_view what) {
  if (limit > 0 && limit <= INT32_MAX) {
    // Unsigned, a negative value compares above every limit.
    const uint32_t ulimit = static_cast<uint32_t>(limit);
    uint32_t bad = 0;
    for (int32_t x : v) bad |= static_cast<uint32_t>(x) >= ulimit;
    if (bad == 0) return Status::Ok();
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] >= limit) {
      return OutOfRangeError("{} {} at flat index {} is out of range [0, {})", what, v[i], i,
                             limit);
    }
  }
  return Status::Ok();
}

int64_t PackRealTokens(const int32_t* mask, int64_t B, int64_t S, int32_t* cu_seqlens, int32_t* cls,
                       int32_t* row_index) {
  int64_t t = 0;
  for (int64_t b = 0; b < B; ++b) {
    cu_seqlens[b] = static_cast<int32_t>(t);
    cls[b] = static_cast<int32_t>(t);
    const int32_t* m = mask + b * S;
    const int32_t base = static_cast<int32_t>(b * S);
    // Branch-free: every token is written at t, and t moves on past the real ones only
    // (t <= b * S + s, inside the array).
    for (int64_t s = 0; s < S; ++s) {
      row_index[t] = base + static_cast<int32_t>(s);
      t += m[s] != 0;
    }
  }
  cu_seqlens[B] = static_cast<int32_t>(t);
  return t;
}

}  // namespace surge::engine::cuda
