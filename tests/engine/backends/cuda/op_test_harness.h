// The shared op-test harness of the CUDA backend: random inputs (never zeros) rounded to the
// device type so the reference sees exactly what the kernel sees, device upload/download, the
// ir::EvalNode reference, and a relative-error measure.
//
// Tolerances (relative L2 error ‖got − ref‖ / ‖ref‖ against the float64 reference): FP16 keeps an
// 11-bit significand (unit roundoff 2^-11 ≈ 4.9e-4), so one rounding of each output costs about
// 3e-4 relative; kernels that also store intermediates in FP16 (attention probabilities, GEMM
// outputs feeding an epilogue) add one or two more roundings: 2e-3 leaves room for those and
// would still catch any indexing or normalisation error (which shows as O(1)). BF16 has an 8-bit
// significand (unit roundoff 3.9e-3): 1.5e-2. Whole encoders chain many FP16 roundings: 1e-2 /
// 5e-2.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "engine/backends/cuda/cuda_backend.h"
#include "engine/backends/cuda/kernel_common.h"
#include "engine/ir/eval.h"
#include "engine/ir/graph.h"

namespace surge::engine::cuda::testing {

#define SURGE_SKIP_WITHOUT_GPU()                                              \
  do {                                                                        \
    ::surge::Status _gpu = ::surge::engine::cuda::CudaDeviceAvailable();      \
    if (!_gpu.ok()) GTEST_SKIP() << "needs an sm_90 GPU: " << _gpu.message(); \
  } while (0)

inline double Tolerance(DataType dt) { return dt == DataType::kF16 ? 2e-3 : 1.5e-2; }
inline DType HostType(DataType dt) {
  return dt == DataType::kF16 ? DType::kFloat16 : DType::kBFloat16;
}

// float32 tensor of uniform values in [lo, hi], each representable in `dt` and none zero.
inline Tensor Random(Shape shape, std::mt19937& rng, DataType dt, float lo = -1.f, float hi = 1.f) {
  Tensor t(DType::kFloat32, std::move(shape));
  std::uniform_real_distribution<float> d(lo, hi);
  for (float& v : t.span<float>()) {
    do v = d(rng);
    while (std::fabs(v) < 1e-3f);
  }
  return t.CastFromFloat32(HostType(dt)).ToFloat32();
}

// Device copy of a float32 tensor in `dt` (or float32 when keep_f32). Freed on destruction.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  DeviceTensor(const Tensor& f32, DataType dt, bool keep_f32 = false);
  explicit DeviceTensor(size_t bytes);
  ~DeviceTensor();
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  void* get() const { return p_; }
  // Poisons the memory (NaN pattern 0xFF) so unwritten elements show.
  void Poison();
  // Reads `shape` elements of `dt` back as float32.
  Tensor Download(Shape shape, DataType dt) const;

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

inline DeviceTensor UploadInts(const std::vector<int32_t>& v) {
  Tensor t(DType::kInt32, Shape{static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data_as<int32_t>());
  return DeviceTensor(t, DataType::kF16, /*keep_f32=*/true);  // 4-byte elements, copied as is
}

// Runs the reference evaluator on a one-node graph built from `node` over `inputs`.
std::vector<Tensor> Reference(const ir::Node& node, std::span<const Tensor> inputs);

// ‖got − ref‖ / ‖ref‖ over the rows selected by `rows` (all rows when empty) of [rows, cols]
// views; +inf when `got` holds NaN/Inf.
double RelError(const Tensor& got, const Tensor& ref, int64_t cols = 0,
                const std::vector<int64_t>& rows = {}, const std::vector<int64_t>& ref_rows = {});

void CheckCuda(int err, const char* what);

}  // namespace surge::engine::cuda::testing
