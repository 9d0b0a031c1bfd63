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

}  // namespace surge::engine::cuda
