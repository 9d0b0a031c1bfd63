// Quantised GEMM, 128 x 128 x 128 tiles, ping-pong schedule, 64 x 128 epilogue subtiles
// (qgemm.cuh).
#include "engine/backends/cuda/qgemm.cuh"

namespace surge::engine::cuda::qgemm {

TileOps Tile128x128PingPong(QuantType t, Epilogue e) {
  return OpsFor<Shape<_128, _128, _128>, Shape<_1, _1, _1>, false,
                cutlass::epilogue::TmaWarpSpecialized, Shape<_64, _128>>(t, e);
}

TileOps Tile128x128PingPongHalf(Epilogue e) {
  return OpsForHalf<Shape<_128, _128, _64>, Shape<_64, _128>>(e);
}

}  // namespace surge::engine::cuda::qgemm
