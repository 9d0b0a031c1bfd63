// INT8 GEMM, 64 x 128 x 128 tiles, ping-pong schedule (int8_gemm.cuh): more tiles for few rows.
#include "engine/backends/cuda/int8_gemm.cuh"

namespace surge::engine::cuda::int8_gemm {

TileOps Tile64x128(Epilogue e) {
  return OpsFor<Shape<_64, _128, _128>, Shape<_1, _1, _1>,
                cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                cutlass::epilogue::TmaWarpSpecialized>(e);
}

}  // namespace surge::engine::cuda::int8_gemm
