// The host's bulk weight conversions (host_convert.h) against the scalar conversions of CUDA's
// own headers (quant_kernels.h), bit for bit. Every rounding class is covered: each exponent, each
// pattern of the kept mantissa bits (every one for BF16 and e4m3, every one for FP16 too), the
// dropped bits just below, at and just above the halfway point, both signs; then random bit
// patterns (subnormal results round at other positions) and the edges (zeros, infinities, NaN
// payloads, the largest finite values, the overflow and subnormal thresholds). All 2^32 float
// inputs agreed for all three formats when the conversions were written (a 17 s run: too long for
// every CI run). No GPU needed.
#include "engine/backends/cuda/host_convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/backends/cuda/quant_kernels.h"
#include "engine/backends/cuda/quant_linear.h"

namespace surge::engine::cuda {
namespace {

// Bit patterns: sign x exponent x kept mantissa bits x dropped bits around the halfway point.
std::vector<uint32_t> Patterns(int dropped_bits) {
  const uint32_t half = 1u << (dropped_bits - 1);
  const uint32_t low[] = {0u, 1u, half - 1, half, half + 1, (1u << dropped_bits) - 1};
  std::vector<uint32_t> out;
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t exp = 0; exp < 256; ++exp) {
      for (uint32_t kept = 0; kept < (1u << (23 - dropped_bits)); ++kept) {
        for (uint32_t l : low) out.push_back(sign | exp << 23 | kept << dropped_bits | l);
      }
    }
  }
  std::mt19937 rng(2026);
  for (int i = 0; i < 200000; ++i) out.push_back(rng());
  for (float f : {0.f,
                  448.f,
                  464.f,
                  480.f,
                  449.f,
                  65504.f,
                  65519.f,
                  65520.f,
                  0x1p-6f,
                  0x1p-9f,
                  0x1p-10f,
                  0x1.8p-10f,
                  0x1p-14f,
                  0x1p-24f,
                  0x1p-25f,
                  0x1.8p-25f,
                  std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min()}) {
    out.push_back(std::bit_cast<uint32_t>(f));
    out.push_back(std::bit_cast<uint32_t>(-f));
  }
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fbfffffu, 0x7fffffffu}) {
    out.push_back(nan);
    out.push_back(nan | 0x80000000u);
  }
  return out;
}

std::vector<float> Floats(const std::vector<uint32_t>& bits) {
  std::vector<float> f(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) f[i] = std::bit_cast<float>(bits[i]);
  return f;
}

// Elements where `fast` (the bulk conversion) and `reference` (CUDA's, one value) differ; the
// first few are reported.
template <typename T, typename Fast, typename Reference>
int Mismatches(const std::vector<uint32_t>& bits, Fast fast, Reference reference) {
  const std::vector<float> x = Floats(bits);
  std::vector<T> y(x.size());
  fast(x.data(), y.data(), static_cast<int64_t>(x.size()));
  int bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const T want = reference(x[i]);
    if (y[i] != want && ++bad <= 5) {
      ADD_FAILURE() << std::hex << "0x" << bits[i] << ": 0x" << int{y[i]} << ", CUDA 0x"
                    << int{want};
    }
  }
  return bad;
}

TEST(HostConvert, HalfMatchesCudaFp16BitForBit) {
  const std::vector<uint32_t> bits = Patterns(13);
  EXPECT_EQ(Mismatches<uint16_t>(bits, FloatsToHalf, FloatToHalfHost), 0) << "of " << bits.size();
}

TEST(HostConvert, Bf16MatchesCudaBf16BitForBit) {
  const std::vector<uint32_t> bits = Patterns(16);
  EXPECT_EQ(Mismatches<uint16_t>(bits, FloatsToBf16, FloatToBf16Host), 0) << "of " << bits.size();
}

TEST(HostConvert, E4m3MatchesCudaFp8BitForBit) {
  const std::vector<uint32_t> bits = Patterns(20);
  auto reference = [](float v) {
    uint8_t q = 0;
    FloatToE4m3Host(&v, &q, 1);
    return q;
  };
  EXPECT_EQ(Mismatches<uint8_t>(bits, FloatsToE4m3, reference), 0) << "of " << bits.size();
  // The saturating edges by value.
  const float edges[] = {448.f, 1000.f, std::numeric_limits<float>::infinity(), -1e30f, 0x1p-10f};
  uint8_t e[5];
  FloatsToE4m3(edges, e, 5);
  EXPECT_EQ(e[0], 0x7e);
  EXPECT_EQ(e[1], 0x7e);
  EXPECT_EQ(e[2], 0x7e);
  EXPECT_EQ(e[3], 0xfe);
  EXPECT_EQ(e[4], 0x00);  // half the smallest subnormal: ties to even, zero
}

TEST(HostConvert, TransposeOfEveryShapeClass) {
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {1, 70}, {70, 1}, {32, 32}, {33, 65}, {64, 31}, {100, 257}}) {
    std::vector<float> src(static_cast<size_t>(rows * cols)), dst(src.size(), -1.f);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
    Transpose(src.data(), rows, cols, dst.data());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        ASSERT_EQ(dst[c * rows + r], src[r * cols + c])
            << rows << "x" << cols << " at " << r << "," << c;
      }
    }
  }
}

// Weights W[K,N] quantised into [N,K]: INT8 per output channel, e4m3 per tensor, against the
// definition written out element by element (an all-zero column keeps the step 1).
TEST(HostConvert, LinearWeightsQuantisedAsDefined) {
  const int64_t k = 48, n = 80;
  Tensor w(DType::kFloat32, {k, n});
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.f, 0.05f);
  for (int64_t i = 0; i < k * n; ++i) w.data_as<float>()[i] = (i % n == 3) ? 0.f : d(rng);
  w.data_as<float>()[5 * n + 9] = 2.f;  // one large entry: column 9's step, the tensor's FP8 scale
  const float* src = w.data_as<float>();
  std::vector<uint8_t> q;
  std::vector<float> scales;
  QuantizeLinearWeight(w, QuantType::kInt8, &q, &scales);
  ASSERT_EQ(scales.size(), static_cast<size_t>(n));
  ASSERT_EQ(q.size(), static_cast<size_t>(k * n));
  EXPECT_EQ(scales[3], 1.f);
  EXPECT_FLOAT_EQ(scales[9], 2.f / 127);
  for (int64_t j = 0; j < n; ++j) {
    float amax = 0;
    for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::abs(src[i * n + j]));
    ASSERT_EQ(scales[j], amax > 0 ? amax / 127 : 1.f) << j;
    for (int64_t i = 0; i < k; ++i) {
      const float want = std::clamp(std::nearbyint(src[i * n + j] / scales[j]), -127.f, 127.f);
      ASSERT_EQ(static_cast<int8_t>(q[j * k + i]), static_cast<int8_t>(want)) << i << "," << j;
    }
  }
  QuantizeLinearWeight(w, QuantType::kFp8E4M3, &q, &scales);
  ASSERT_EQ(scales.size(), 1u);
  EXPECT_FLOAT_EQ(scales[0], 2.f / 448);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < k; ++i) {
      const float v = src[i * n + j] / scales[0];
      uint8_t want = 0;
      FloatToE4m3Host(&v, &want, 1);
      ASSERT_EQ(q[j * k + i], want) << i << "," << j;
    }
  }
  EXPECT_EQ(q[9 * k + 5], 0x7e);  // 2 / (2 / 448) = 448, the largest e4m3
}

}  // namespace
}  // namespace surge::engine::cuda
