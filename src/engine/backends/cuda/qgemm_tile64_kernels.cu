// Quantised GEMM, 64 x 128 x 128 tiles, ping-pong schedule: more tiles for few rows (qgemm.cuh).
#include "engine/backends/cuda/qgemm.cuh"

namespace surge::engine::cuda::qgemm {

TileOps Tile64x128(QuantType t, Epilogue e) {
  return OpsFor<Shape<_64, _128, _128>, Shape<_1, _1, _1>, false,
                cutlass::epilogue::TmaWarpSpecialized>(t, e);
}

TileOps Tile64x128Half(Epilogue e) { return OpsForHalf<Shape<_64, _128, _64>>(e); }

}  // namespace surge::engine::cuda::qgemm
