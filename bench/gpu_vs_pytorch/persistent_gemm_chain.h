// A chain of GEMMs over 128 token rows run as one persistent kernel (surge_persistent_gemm_bench):
// clusters of `cs` CTAs, one CTA per multiprocessor, each cluster owning a slice of every GEMM's
// output columns and each CTA of it a 1/cs share of K. A CTA streams its share of the activation
// rows through shared memory (cp.async, 32-column k-blocks), multiplies with mma.sync m16n8k16
// (8 warps x 16 rows), and the cluster adds its partial sums through distributed shared memory,
// each CTA finishing 128/cs rows with the epilogue (bias, tanh-form GELU, residual). The next
// GEMM's weight share is copied into shared memory (bulk copies on an mbarrier) while the current
// one runs, so weights never wait on a barrier; a grid-wide barrier (one atomic counter) separates
// consecutive GEMMs. Every CTA must be resident at once (MaxActiveClusters), and nothing else may
// run on the device meanwhile. A measurement for the benchmark, not an engine path.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace surge::engine::cuda {

constexpr int kChainRows = 128;

// out[128, n] = a[128, k] · wᵀ + bias (then GELU) (+ residual); w is [n, k] row-major.
struct ChainPhase {
  const __half* a = nullptr;
  const __half* w = nullptr;
  const __half* bias = nullptr;
  const __half* residual = nullptr;  // [128, n] or null
  __half* out = nullptr;
  int n = 0, k = 0;
  int gelu = 0;
  // Optional: w laid out as each CTA copies it, [clusters][cs][n / clusters][k / cs + 8] (rows
  // padded as in shared memory), so that a CTA's share is one bulk copy instead of one per row.
  const __half* w_tiled = nullptr;
};

struct ChainConfig {
  int cs = 1;        // CTAs per cluster (the K split)
  int kblock = 32;   // activation columns streamed per stage (32: 6 stages, 64: 4)
  int clusters = 0;  // output-column slices
  size_t w_bytes = 0;
  size_t smem_bytes = 0;
  // Each cluster walks its K range starting at k-block (cluster index mod the k-block count), so
  // that clusters read different activation columns at a time rather than all the same ones.
  bool stagger = false;
  // Each CTA copies the next GEMM's weight share after its K loop rather than before it, so
  // that the copy does not compete with the loop's activation loads.
  bool late_weights = false;
};

// The most clusters (at most sm_count / cs) that divide every phase's columns into slices of a
// multiple of 16 columns the kernel holds, with every K a multiple of kblock·cs. False, with the
// reason, when there is none.
bool PlanChain(const std::vector<ChainPhase>& phases, int cs, int kblock, int sm_count,
               ChainConfig* config, std::string* why);
// `w` ([n, k]) laid out as ChainPhase::w_tiled for `config`, on the host (halves as bits).
std::vector<uint16_t> TileChainWeight(const std::vector<uint16_t>& w, int n, int k,
                                      const ChainConfig& config);
// How many clusters of the configuration's shape can be resident at once.
cudaError_t ChainMaxActiveClusters(const ChainConfig& config, int* clusters);
// What a launch runs: everything, or parts (to see where the time goes).
enum class ChainWork {
  kFull,
  kBarriersOnly,  // the grid-wide barriers alone
  kNoMma,         // loads, partial sums of zeros through the cluster, epilogue
  kNoEpilogue,    // loads and the K loop; no cluster reduction or epilogue
};

// Points of a phase `marks` records: start, weights in shared memory, K loop done, cluster's
// partial sums visible, epilogue done, grid barrier passed.
constexpr int kChainMarks = 6;
// Runs `num_phases` phases (device array) in one launch; `barrier` (one unsigned, device) is
// zeroed first on `stream`. With `marks` (device,
// CTAs x num_phases x kChainMarks) thread 0 of each CTA records the SM clock at each point.
cudaError_t LaunchChain(const ChainConfig& config, const ChainPhase* phases, int num_phases,
                        unsigned* barrier, ChainWork work, cudaStream_t stream,
                        long long* marks = nullptr);

}  // namespace surge::engine::cuda
