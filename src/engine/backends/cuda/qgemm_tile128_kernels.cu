// Quantised GEMM, 128 x 128 x 128 tiles, cooperative schedule (qgemm.cuh).
#include "engine/backends/cuda/qgemm.cuh"

namespace surge::engine::cuda::qgemm {

TileOps Tile128x128(QuantType t, Epilogue e) {
  return OpsFor<Shape<_128, _128, _128>, Shape<_1, _1, _1>, true,
                cutlass::epilogue::TmaWarpSpecializedCooperative>(t, e);
}

}  // namespace surge::engine::cuda::qgemm
