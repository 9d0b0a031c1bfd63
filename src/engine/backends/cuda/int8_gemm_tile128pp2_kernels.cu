// INT8 GEMM, 128 x 128 x 128 tiles, ping-pong schedule, 2 x 1 clusters (int8_gemm.cuh).
#include "engine/backends/cuda/int8_gemm.cuh"

namespace surge::engine::cuda::int8_gemm {

TileOps Tile128x128PingPongCluster2(Epilogue e) {
  return OpsFor<Shape<_128, _128, _128>, Shape<_2, _1, _1>,
                cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                cutlass::epilogue::TmaWarpSpecialized>(e);
}

}  // namespace surge::engine::cuda::int8_gemm
