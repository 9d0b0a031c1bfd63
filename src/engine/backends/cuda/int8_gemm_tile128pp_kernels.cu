// INT8 GEMM, 128 x 128 x 128 tiles, ping-pong schedule (int8_gemm.cuh).
#include "engine/backends/cuda/int8_gemm.cuh"

namespace surge::engine::cuda::int8_gemm {

TileOps Tile128x128PingPong(Epilogue e) {
  return OpsFor<Shape<_128, _128, _128>, Shape<_1, _1, _1>,
                cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                cutlass::epilogue::TmaWarpSpecialized>(e);
}

}  // namespace surge::engine::cuda::int8_gemm
