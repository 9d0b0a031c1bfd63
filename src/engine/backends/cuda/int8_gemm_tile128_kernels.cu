// INT8 GEMM, 128 x 128 x 128 tiles, cooperative schedule (int8_gemm.cuh).
#include "engine/backends/cuda/int8_gemm.cuh"

namespace surge::engine::cuda::int8_gemm {

TileOps Tile128x128(Epilogue e) {
  return OpsFor<Shape<_128, _128, _128>, Shape<_1, _1, _1>,
                cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                cutlass::epilogue::TmaWarpSpecializedCooperative>(e);
}

}  // namespace surge::engine::cuda::int8_gemm
