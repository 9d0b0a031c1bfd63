// Bulk conversions on the host with the device's rounding, for weights at build and load time:
// float -> FP16, BF16 and FP8 e4m3, each rounding to nearest even exactly as cuda_fp16.h,
// cuda_bf16.h and cuda_fp8.h do (FP16: beyond 65504 to infinity, NaN -> 0x7fff; BF16: NaN ->
// 0x7fff; e4m3: beyond 448 and infinity saturate to +-448, NaN -> 0x7f), written as selects
// on the bit patterns so that the compiler vectorises them. quant_kernels.h keeps the scalar
// conversions through CUDA's headers; host_convert_test checks these against them.
#pragma once

#include <cstdint>

namespace surge::engine::cuda {

void FloatsToHalf(const float* x, uint16_t* y, int64_t n);
void FloatsToBf16(const float* x, uint16_t* y, int64_t n);
void FloatsToE4m3(const float* x, uint8_t* y, int64_t n);

// Row-major src[rows, cols] -> dst[cols, rows], in cache-sized tiles.
template <typename T>
void Transpose(const T* src, int64_t rows, int64_t cols, T* dst) {
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = r0 + kTile < rows ? r0 + kTile : rows;
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = c0 + kTile < cols ? c0 + kTile : cols;
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t r = r0; r < r1; ++r) dst[c * rows + r] = src[r * cols + c];
      }
    }
  }
}

}  // namespace surge::engine::cuda
