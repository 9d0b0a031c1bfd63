// Quantised GEMM, 128 x 128 x 128 tiles, ping-pong schedule with overlapped epilogues
// (qgemm_overlap_pingpong.cuh), 2 x 1 clusters, the epilogue from the accumulator registers
// (qgemm_register_epilogue.cuh).
#include "engine/backends/cuda/qgemm_register_epilogue.cuh"

namespace surge::engine::cuda::qgemm {

TileOps Tile128x128PingPongCluster2Overlap(QuantType t, Epilogue e) {
  return RegisterEpilogueOps<Shape<_2, _1, _1>>(t, e);
}

}  // namespace surge::engine::cuda::qgemm
