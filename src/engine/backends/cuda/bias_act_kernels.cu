#include "engine/backends/cuda/bias_act_kernels.h"
#include "engine/backends/cuda/device_math.cuh"

namespace surge::engine::cuda {
namespace {

template <typename T>
__global__ void BiasActKernel(BiasActArgs a) {
  const int64_t n = a.rows * a.cols;
  const T* x = static_cast<const T*>(a.x);
  const T* bias = static_cast<const T*>(a.bias);
  const T* res = static_cast<const T*>(a.residual);
  T* y = static_cast<T*>(a.y);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v = ToFloat(x[i]);
    if (bias) v += ToFloat(bias[i % a.cols]);
    switch (a.activation) {
      case Activation::kGelu:
        v = GeluErf(v);
        break;
      case Activation::kGeluTanh:
        v = GeluTanh(v);
        break;
      case Activation::kTanh:
        v = tanhf(v);
        break;
      case Activation::kRelu:
        v = fmaxf(v, 0.f);
        break;
      case Activation::kNone:
        break;
    }
    if (res) v += ToFloat(res[i]);
    y[i] = FromFloat<T>(v);
  }
}

}  // namespace

bool BiasActCanImplement(const BiasActArgs& a) { return a.cols >= 1 && a.rows >= 0 && a.x && a.y; }

size_t BiasActWorkspaceSize(const BiasActArgs&) { return 0; }

cudaError_t BiasActRun(const BiasActArgs& a, void*, cudaStream_t stream) {
  const int64_t n = a.rows * a.cols;
  if (n == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks64 = (n + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(blocks64 < 132 * 32 ? blocks64 : 132 * 32);
  if (a.dtype == DataType::kF16) {
    BiasActKernel<__half><<<blocks, threads, 0, stream>>>(a);
  } else {
    BiasActKernel<__nv_bfloat16><<<blocks, threads, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

}  // namespace surge::engine::cuda
