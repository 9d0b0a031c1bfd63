#include "op_test_harness.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <limits>

#include "engine/backends/cuda/lowering.h"

namespace surge::engine::cuda::testing {

void CheckCuda(int err, const char* what) {
  ASSERT_EQ(err, 0) << what << ": " << cudaGetErrorString(static_cast<cudaError_t>(err));
}

DeviceTensor::DeviceTensor(const Tensor& f32, DataType dt, bool keep_f32) {
  std::vector<uint8_t> bytes;
  if (keep_f32) {
    bytes.assign(static_cast<const uint8_t*>(f32.data()),
                 static_cast<const uint8_t*>(f32.data()) + f32.nbytes());
  } else {
    auto r = ConvertWeight(f32, false, dt);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    bytes = std::move(*r);
  }
  bytes_ = bytes.size();
  EXPECT_EQ(cudaMalloc(&p_, std::max<size_t>(bytes_, 1)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p_, bytes.data(), bytes_, cudaMemcpyHostToDevice), cudaSuccess);
}

DeviceTensor::DeviceTensor(size_t bytes) : bytes_(bytes) {
  EXPECT_EQ(cudaMalloc(&p_, std::max<size_t>(bytes_, 1)), cudaSuccess);
  Poison();
}

DeviceTensor::~DeviceTensor() {
  if (p_) cudaFree(p_);
}

void DeviceTensor::Poison() { EXPECT_EQ(cudaMemset(p_, 0xFF, bytes_), cudaSuccess); }

Tensor DeviceTensor::Download(Shape shape, DataType dt) const {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Tensor t(HostType(dt), std::move(shape));
  EXPECT_LE(t.nbytes(), bytes_);
  EXPECT_EQ(cudaMemcpy(t.data(), p_, t.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  return t.ToFloat32();
}

std::vector<Tensor> Reference(const ir::Node& node, std::span<const Tensor> inputs) {
  std::vector<Tensor> out;
  Status st = ir::EvalNode(node, inputs, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

double RelError(const Tensor& got, const Tensor& ref, int64_t cols,
                const std::vector<int64_t>& rows, const std::vector<int64_t>& ref_rows) {
  const Tensor g = got.ToFloat32(), r = ref.ToFloat32();
  const float* pg = g.data_as<float>();
  const float* pr = r.data_as<float>();
  double num = 0, den = 0;
  auto add = [&](int64_t gi, int64_t ri) {
    const double a = pg[gi], b = pr[ri];
    if (!std::isfinite(a)) num = std::numeric_limits<double>::infinity();
    num += (a - b) * (a - b);
    den += b * b;
  };
  if (rows.empty()) {
    EXPECT_EQ(g.numel(), r.numel());
    for (int64_t i = 0; i < std::min(g.numel(), r.numel()); ++i) add(i, i);
  } else {
    for (size_t k = 0; k < rows.size(); ++k) {
      const int64_t rr = ref_rows.empty() ? rows[k] : ref_rows[k];
      for (int64_t c = 0; c < cols; ++c) add(rows[k] * cols + c, rr * cols + c);
    }
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace surge::engine::cuda::testing
