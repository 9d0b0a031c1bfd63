// What the CUDA measurement programs here share: a CUDA runtime call that must succeed (the
// program prints the call and the error, then exits 1).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_CUDA(x)                                                                         \
  do {                                                                                        \
    const cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)
