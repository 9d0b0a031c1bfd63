// Quantised GEMM, 128 x 128 x 128 tiles, ping-pong with overlapped register epilogues, in
// clusters of N / 128 CTAs: the residual Linear with the LayerNorm after it in its epilogue
// (qgemm_layer_norm_epilogue.cuh).
#include "engine/backends/cuda/qgemm_layer_norm_epilogue.cuh"

namespace surge::engine::cuda {

int64_t QGemmExchangeBytes(int64_t m, int64_t n) { return qgemm::lnepi::ExchangeBytes(m, n); }
int64_t QGemmCounterBytes(int64_t m) { return qgemm::lnepi::CounterBytes(m); }

namespace qgemm {

TileOps Tile128x128LayerNorm(QuantType t, Epilogue e) {
  return e == Epilogue::kBiasResidualLayerNorm ? LayerNormOps(t) : TileOps{};
}

}  // namespace qgemm
}  // namespace surge::engine::cuda
