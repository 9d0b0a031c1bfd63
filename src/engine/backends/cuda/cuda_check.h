// Error checks for CUDA runtime and cuBLASLt calls in framework code (.cc files): every call's
// result becomes a surge::Status naming the call and the CUDA error.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "core/status.h"

namespace surge::engine::cuda {

inline Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return InternalError("CUDA call {} failed: {} ({})", what, cudaGetErrorName(err),
                       cudaGetErrorString(err));
}

inline Status CublasStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return InternalError("cuBLASLt call {} failed: status {}", what, static_cast<int>(st));
}

}  // namespace surge::engine::cuda

#define SURGE_CUDA_RETURN_IF_ERROR(expr) \
  SURGE_RETURN_IF_ERROR(::surge::engine::cuda::CudaStatus((expr), #expr))
#define SURGE_CUBLAS_RETURN_IF_ERROR(expr) \
  SURGE_RETURN_IF_ERROR(::surge::engine::cuda::CublasStatus((expr), #expr))
