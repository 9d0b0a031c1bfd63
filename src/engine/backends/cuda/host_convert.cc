#include "engine/backends/cuda/host_convert.h"

#include <bit>

namespace surge::engine::cuda {
namespace {

inline uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
inline float Float(uint32_t u) { return std::bit_cast<float>(u); }

// A float rounded to nearest even into a narrower format with `kMantissa` mantissa bits and
// exponent bias `kBias`, from the absolute value's bits `a`: normal results rebias the exponent
// and round away the low 23 - kMantissa bits; below the smallest normal, adding `magic` (the
// float whose step is the format's subnormal step) leaves the subnormal in the sum's low bits,
// rounded by the FPU. Beyond the range and NaN are the caller's.
template <int kMantissa, int kBias>
inline uint32_t RoundNarrow(uint32_t a) {
  constexpr int kDropped = 23 - kMantissa;
  constexpr uint32_t kRebias = static_cast<uint32_t>(127 - kBias) << 23;
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(127 - kBias + 1) << 23;
  // 2^(24 - kBias - kMantissa), whose step is 2^(1 - kBias - kMantissa): 0.5f for FP16, 16384.0f
  // for e4m3.
  constexpr uint32_t kMagic = static_cast<uint32_t>(127 + 23 + 1 - kBias - kMantissa) << 23;
  const uint32_t normal =
      (a - kRebias + ((1u << (kDropped - 1)) - 1) + ((a >> kDropped) & 1u)) >> kDropped;
  const uint32_t subnormal = Bits(Float(a) + Float(kMagic)) - kMagic;
  return a < kMinNormal ? subnormal : normal;
}

inline uint16_t HalfBits(float f) {
  const uint32_t x = Bits(f);
  const uint32_t a = x & 0x7fffffffu;
  uint32_t r = RoundNarrow<10, 15>(a);
  r = a >= 0x477ff000u ? 0x7c00u : r;  // 65520 and above round to infinity
  r |= (x >> 16) & 0x8000u;
  return static_cast<uint16_t>(a > 0x7f800000u ? 0x7fffu : r);
}

inline uint16_t Bf16Bits(float f) {
  const uint32_t x = Bits(f);
  const uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? 0x7fffu : r);
}

inline uint8_t E4m3Bits(float f) {
  const uint32_t x = Bits(f);
  const uint32_t a = x & 0x7fffffffu;
  uint32_t r = RoundNarrow<3, 7>(a);
  r = a > 0x43e00000u ? 0x7eu : r;  // beyond 448 (and infinity): the largest finite
  r |= (x >> 24) & 0x80u;
  return static_cast<uint8_t>(a > 0x7f800000u ? 0x7fu : r);
}

}  // namespace

void FloatsToHalf(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = HalfBits(x[i]);
}

void FloatsToBf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Bf16Bits(x[i]);
}

void FloatsToE4m3(const float* x, uint8_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = E4m3Bits(x[i]);
}

}  // namespace surge::engine::cuda
