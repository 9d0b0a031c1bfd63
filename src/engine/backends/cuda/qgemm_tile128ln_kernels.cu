// Quantised GEMM, 128 x 128 x 128 tiles, ping-pong with overlapped register epilogues, in
// clusters of N / 128 CTAs: the residual Linear with the LayerNorm after it in its epilogue
// (qgemm_layer_norm_epilogue.cuh).
#include "engine/backends/cuda/qgemm_layer_norm_epilogue.cuh"

namespace surge::engine::cuda {

int QGemmLayerNormClusters(QuantType t, int64_t n) {
  if (n % qgemm::lnepi::kRowTile != 0) return 0;
  const int n_blocks = static_cast<int>(n / qgemm::lnepi::kRowTile);
  return t == QuantType::kInt8
             ? qgemm::LayerNormKernel<
                   int8_t, qgemm::Operand<int8_t>::PingPong>::Gemm::MaxActiveClusters(n_blocks)
             : qgemm::LayerNormKernel<cutlass::float_e4m3_t,
                                      qgemm::Operand<cutlass::float_e4m3_t>::PingPong>::Gemm::
                   MaxActiveClusters(n_blocks);
}

namespace qgemm {

TileOps Tile128x128LayerNorm(QuantType t, Epilogue e) {
  return e == Epilogue::kBiasResidualLayerNorm ? LayerNormOps(t) : TileOps{};
}

}  // namespace qgemm
}  // namespace surge::engine::cuda
