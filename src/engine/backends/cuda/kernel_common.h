// Types shared by the CUDA kernels' plain-C++ headers. Kernels follow one calling convention:
// `XxxCanImplement(args)` says whether the kernel handles the arguments, `XxxWorkspaceSize(args)`
// how many device bytes of scratch it needs, and `XxxRun(args, workspace, stream)` launches it
// asynchronously on `stream`, returning the launch error (cudaSuccess when queued). No framework
// headers here: nvcc compiles only these and the *_kernels.cu files.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace surge::engine::cuda {

// Element type of activations and weights on the device. Statistics are always float32.
enum class DataType { kF16, kBF16 };

inline size_t DataTypeSize(DataType) { return 2; }

// Unary activations applied after a bias.
enum class Activation { kNone, kGelu, kGeluTanh, kTanh, kRelu };

// Byte formats of quantised GEMM operands.
enum class QuantType { kInt8, kFp8E4M3 };

// A quantised copy of a kernel's output for the INT8/FP8 GEMM that reads it next, written by the
// producing kernel instead of a separate quantise pass: q = saturate(round_to_nearest_even(
// v · inv_scale)) as int8 or e4m3 bytes, row-major like the output, where v is the output value
// as stored in the I/O type (so the copy equals QuantizeRun on the stored output, bit for bit).
struct QuantizedCopy {
  QuantType type = QuantType::kFp8E4M3;
  void* y = nullptr;  // null: no copy
  float inv_scale = 1.f;
};

}  // namespace surge::engine::cuda
