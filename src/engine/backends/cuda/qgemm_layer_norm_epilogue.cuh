// The quantised GEMM of a residual Linear with the LayerNorm after it in its epilogue (BERT's
// attention projection and FFN2 with the LayerNorm that follows each):
//
//   v = acc · scale[n] + bias[n] + residual[m, n]        (float32, kept in the accumulators)
//   y = (v - mean_m) / sqrt(var_m + epsilon) · gamma[n] + beta[n]    (FP16 out)
//   q = the next Linear's quantised input: int8 or e4m3 of FP16(y) · q_inv_scale (optional)
//
// so that neither the GEMM's FP16 sum nor a LayerNorm pass over it goes through memory. A row's
// statistics span N / 128 column tiles: the kernel runs the overlapped ping-pong body
// (qgemm_overlap_pingpong.cuh) with its row-group tile order, in which the N / 128 CTAs of a group
// run the column tiles of the same row tile at the same time, as one hardware cluster. Each
// consumer warpgroup works out its tile's per-row sum and sum of squared deviations from the
// tile's own mean (float32, from the accumulator registers) and stores them into every cluster
// CTA's shared memory (st.async, counted on that CTA's barrier); once its own barrier has all of
// them, the row's mean and variance combine the N / 128 partial statistics exactly (Chan et al.'s
// pairwise update), as the LayerNorm kernel's two passes do over a whole row. Nothing goes
// through global memory but the residual in and the outputs, and the kernel needs no workspace.
// The CTAs that wait on each other are those of one cluster, which the hardware runs at the same
// time: the kernel cannot wait on a CTA not yet running, whatever else shares the device.
// Clusters hold at most 8 CTAs: N up to 1024.
#pragma once

#include <cuda_fp16.h>
#include <cutlass/arch/barrier.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cutlass/epilogue/collective/detail.hpp>
#include <type_traits>

#include "engine/backends/cuda/qgemm_register_epilogue.cuh"

namespace surge::engine::cuda::qgemm {
namespace lnepi {

constexpr int kRowTile = 128;
constexpr int kMaxClusterCtas = 8;  // portable cluster size

// Shared memory beside the staging areas (LayerNormEpilogue): the column tile's four vectors, and
// a warpgroup's exchange buffer (a cluster's CTAs' statistics of 128 rows).
constexpr int kColumnBytes = 4 * kRowTile * 4;
constexpr int kExchangeBytes = kMaxClusterCtas * kRowTile * 8;
constexpr int kSharedBytes = 8 * 16 * 256 + kColumnBytes + 4 * kExchangeBytes + 4 * 8;

// A float pair into the shared memory of a CTA of the cluster (`to`, `to_barrier`: shared::cluster
// addresses, cute::set_block_rank), counted as 8 bytes on that CTA's barrier.
__device__ __forceinline__ void StoreRemotePair(uint32_t to, float2 v, uint32_t to_barrier) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32"
      " [%0], {%1, %2}, [%3];\n"
      :
      : "r"(to), "f"(v.x), "f"(v.y), "r"(to_barrier)
      : "memory");
}

// Waits for the barrier's phase of this parity to complete, acquiring at cluster scope what the
// cluster's CTAs stored with it.
__device__ __forceinline__ void WaitParity(uint32_t barrier, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(barrier),
      "r"(parity)
      : "memory");
}

// Eight FP16 values (a 16-byte chunk) times `inv_scale`, as eight int8 or e4m3 bytes.
__device__ __forceinline__ uint2 QuantizeEight(uint4 halves, float inv_scale, bool e4m3) {
  const uint32_t h[4] = {halves.x, halves.y, halves.z, halves.w};
  float f[8];
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < 4; ++i) {
    const float2 p = regepi::FloatPair(h[i]);
    f[2 * i] = p.x * inv_scale;
    f[2 * i + 1] = p.y * inv_scale;
  }
  if (e4m3) {
    return make_uint2(regepi::E4m3Quad(f[0], f[1], f[2], f[3]),
                      regepi::E4m3Quad(f[4], f[5], f[6], f[7]));
  }
  return make_uint2(regepi::Int8Quad(f[0], f[1], f[2], f[3]),
                    regepi::Int8Quad(f[4], f[5], f[6], f[7]));
}

}  // namespace lnepi

// The epilogue operation (CUTLASS's DefaultEpilogue interface, as RegisterEpilogue), for the
// overlapped ping-pong kernel with row groups only: 128 x 128 tiles, N a multiple of 128.
struct LayerNormEpilogueArguments {
  const float* scale = nullptr;               // [n]
  const cutlass::half_t* bias = nullptr;      // [n] or null
  const cutlass::half_t* residual = nullptr;  // [m, n]
  cutlass::half_t* y = nullptr;               // [m, n]: the LayerNorm's output (may be residual)
  const float* gamma = nullptr;               // [n]
  const float* beta = nullptr;                // [n]
  float epsilon = 1e-5f;
  uint8_t* q = nullptr;  // [m, n] quantised copy of y, or null
  bool q_e4m3 = false;   // e4m3 (else int8)
  float q_inv_scale = 1.f;
};

template <class Element>
class LayerNormEpilogue : public RegisterEpilogueInterface<
                              LayerNormEpilogueArguments, cutlass::half_t,
                              std::conditional_t<std::is_same_v<Element, int8_t>, int32_t, float>,
                              lnepi::kSharedBytes> {
 public:
  static constexpr int kRows = 16;       // a warp's rows per 64-row block
  static constexpr int kRowBytes = 256;  // 128 FP16 columns
  static constexpr int kWarpBytes = kRows * kRowBytes;
  // Shared memory (lnepi::kSharedBytes): the 8 consumer warps' staging areas; the CTA's column
  // tile's scale, bias, gamma and beta (float32, 128 each); each consumer warpgroup's two exchange
  // buffers ([cluster CTA][128 rows] of float2: sum, sum of squared deviations) and their
  // barriers.
  static constexpr int kColumnsOffset = 8 * kWarpBytes;
  static constexpr int kExchangeOffset = kColumnsOffset + lnepi::kColumnBytes;
  static constexpr int kExchangeBytes = lnepi::kExchangeBytes;
  static constexpr int kBarrierOffset = kExchangeOffset + 4 * kExchangeBytes;
  static_assert(kBarrierOffset + 4 * 8 == lnepi::kSharedBytes);
  using typename LayerNormEpilogue::RegisterEpilogueInterface::Arguments;
  using typename LayerNormEpilogue::RegisterEpilogueInterface::Params;

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem, Arguments const& args) {
    const auto n = cute::get<1>(problem);
    return args.scale != nullptr && args.y != nullptr && args.residual != nullptr &&
           args.gamma != nullptr && args.beta != nullptr && n % lnepi::kRowTile == 0 &&
           n / lnepi::kRowTile <= lnepi::kMaxClusterCtas && args.epsilon >= 0.f;
  }

  CUTLASS_HOST_DEVICE explicit LayerNormEpilogue(Params const& params) : params_(params) {}

  CUTLASS_DEVICE bool is_source_needed() { return true; }

  // Called by every thread of the CTA before the kernel's first cluster barrier (OverlapPingPong):
  // the CTA's column tile's scale, bias, gamma and beta into shared memory (the tile stays the
  // same: CTA c of a cluster takes column tile c), and the exchange barriers made.
  template <class ProblemShape>
  CUTLASS_DEVICE void init_shared(ProblemShape const& problem, int thread_idx, char* smem) const {
    const int n_blocks = static_cast<int>(cute::get<1>(problem)) / lnepi::kRowTile;
    if (thread_idx < 128) {
      const int c = static_cast<int>(blockIdx.x) % n_blocks * lnepi::kRowTile + thread_idx;
      const float v[4] = {params_.scale[c],
                          params_.bias != nullptr ? static_cast<float>(params_.bias[c]) : 0.f,
                          params_.gamma[c], params_.beta[c]};
      float* columns = reinterpret_cast<float*>(smem + kColumnsOffset);
      CUTLASS_PRAGMA_UNROLL
      for (int what = 0; what < 4; ++what) columns[what * 128 + thread_idx] = v[what];
    }
    if (thread_idx == 0) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < 4; ++i) {
        cutlass::arch::ClusterBarrier::init(
            reinterpret_cast<uint64_t*>(smem + kBarrierOffset + 8 * i), 1);
      }
      cutlass::arch::fence_barrier_init();
    }
  }

  // Called by the kernel before this warpgroup's K loop of the tile (OverlapPingPong): the first
  // 64 rows of the tile's residual start on their way into each warp's staging area (cp.async), to
  // land while the tile's products are summed.
  template <class ProblemShapeMNKL, class BlockCoordMNKL>
  CUTLASS_DEVICE void prefetch(ProblemShapeMNKL problem, BlockCoordMNKL blk_coord, int thread_idx,
                               char* smem) {
    cutlass::arch::wait_on_dependent_grids();  // the residual may be the grid before's output
    const int warp = thread_idx / 32, lane = thread_idx % 32;
    const int consumer_warp = (static_cast<int>(threadIdx.x) / 128 - 1) * 4 + warp;
    StageRows(static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + consumer_warp * kWarpBytes,
              static_cast<int>(cute::get<0>(blk_coord)) * 128 + 16 * warp,
              static_cast<int>(cute::get<1>(blk_coord)) * 128,
              static_cast<int>(cute::get<0>(problem)), static_cast<int>(cute::get<1>(problem)),
              lane);
  }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine,
            class FrgLayout, class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem, BlockShapeMNK, BlockCoordMNKL blk_coord,
                                 cute::Tensor<FrgEngine, FrgLayout> const& acc_in, TiledMma,
                                 ResidueMNK, int thread_idx, char* smem) {
    using namespace cute;
    constexpr int kBlocks = size<1>(FrgLayout{});
    static_assert(size<0>(FrgLayout{}) == 64 && kBlocks == 2 && size<2>(FrgLayout{}) == 1,
                  "the wgmma m64n128 accumulator of a 128 x 128 tile: ((2, 2, 16), 2, 1)");
    // The sums replace the accumulators in place (float bits in INT8's int32 registers): the
    // tile's 128 values a thread fit no second copy.
    auto& acc = const_cast<cute::Tensor<FrgEngine, FrgLayout>&>(acc_in);
    const int m_total = static_cast<int>(get<0>(problem));
    const int n_total = static_cast<int>(get<1>(problem));
    const int m_blk = static_cast<int>(get<0>(blk_coord));
    const int n_blk = static_cast<int>(get<1>(blk_coord));
    const int m0 = m_blk * 128, n0 = n_blk * 128;
    const int n_blocks = n_total / 128;
    const int warp = thread_idx / 32, lane = thread_idx % 32;
    const int quad = lane % 4;
    const int group = static_cast<int>(threadIdx.x) / 128 - 1;  // consumer warpgroup 0 or 1
    const int consumer_warp = group * 4 + warp;
    const uint32_t shared = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    const uint32_t stage = shared + consumer_warp * kWarpBytes;
    const int mi = lane / 8;
    const int srow = 8 * (mi & 1) + lane % 8;  // this lane's stmatrix / ldmatrix row

    // This thread's 32 columns: n0 + 8 j + 2 quad (+ 1), their scale, bias, gamma and beta from
    // the CTA's copy (init_shared).
    const uint32_t columns = shared + static_cast<uint32_t>(kColumnsOffset);
    auto column_pair = [&](int what, int j) {  // what: 0 scale, 1 bias, 2 gamma, 3 beta
      return regepi::LdShared64(columns + what * 512 + 4 * (8 * j + 2 * quad));
    };

    // 1. v = acc · scale + bias + residual into the accumulators; the row sums (this thread's
    // rows: 64 block + 16 warp + lane / 4 + 8 half).
    float sum[kBlocks][2] = {}, dev[kBlocks][2] = {};
    CUTLASS_PRAGMA_UNROLL
    for (int block = 0; block < kBlocks; ++block) {
      if (block > 0) StageRows(stage, m0 + 64 * block + 16 * warp, n0, m_total, n_total, lane);
      CpAsyncWait<0>();
      __syncwarp();
      CUTLASS_PRAGMA_UNROLL
      for (int u = 0; u < 8; ++u) {
        const uint32_t maddr = regepi::StagedChunk(stage, srow, 2 * u + (mi >> 1), kRowBytes);
        uint32_t r[4];  // (half 0, 2u), (half 1, 2u), (half 0, 2u + 1), (half 1, 2u + 1)
        LdMatrixX4(r, maddr);
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < 4; ++i) {
          const int h = i % 2, j = 2 * u + i / 2;
          const float2 scale = column_pair(0, j);
          const float2 b = column_pair(1, j);
          const float2 res = regepi::FloatPair(r[i]);
          const float a0 = static_cast<float>(acc(4 * j + 2 * h, block, 0));
          const float a1 = static_cast<float>(acc(4 * j + 2 * h + 1, block, 0));
          const float v0 = fmaf(a0, scale.x, b.x) + res.x;
          const float v1 = fmaf(a1, scale.y, b.y) + res.y;
          Put(acc(4 * j + 2 * h, block, 0), v0);
          Put(acc(4 * j + 2 * h + 1, block, 0), v1);
          sum[block][h] += v0 + v1;
        }
      }
      __syncwarp();  // the staging area is the next block's
    }
    // 2. The tile's per-row sums (the 4 lanes of a quad hold a row's 128 columns), then the sums of
    // squared deviations from the tile's row means.
    CUTLASS_PRAGMA_UNROLL
    for (int block = 0; block < kBlocks; ++block) {
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        sum[block][h] += __shfl_xor_sync(0xffffffffu, sum[block][h], 1);
        sum[block][h] += __shfl_xor_sync(0xffffffffu, sum[block][h], 2);
        const float mean = sum[block][h] * (1.f / 128);
        float d2 = 0;
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < 16; ++j) {
          CUTLASS_PRAGMA_UNROLL
          for (int c = 0; c < 2; ++c) {
            const float d = Get(acc(4 * j + 2 * h + c, block, 0)) - mean;
            d2 = fmaf(d, d, d2);
          }
        }
        d2 += __shfl_xor_sync(0xffffffffu, d2, 1);
        d2 += __shfl_xor_sync(0xffffffffu, d2, 2);
        dev[block][h] = d2;
      }
    }
    // 3. Exchange with the cluster's other CTAs (the other column tiles of these rows): each
    // stores its rows' partial statistics into the warpgroup's exchange buffer of every CTA of the
    // cluster, its own included (st.async, which counts the bytes on that CTA's barrier), and
    // waits on its own barrier for all of them. Buffers and barriers alternate between the
    // warpgroup's tiles: a CTA stores its statistics of the warpgroup's next tile but one only
    // once every CTA has stored those of the next, after reading these.
    const int buffer = 2 * group + (tiles_ & 1);
    const uint32_t parity = static_cast<uint32_t>(tiles_ >> 1) & 1u;
    ++tiles_;
    const uint32_t exchange =
        shared + static_cast<uint32_t>(kExchangeOffset + buffer * kExchangeBytes);
    const uint32_t barrier = shared + static_cast<uint32_t>(kBarrierOffset + 8 * buffer);
    auto tile_row = [&](int block, int h) { return 64 * block + 16 * warp + lane / 4 + 8 * h; };
    if (thread_idx == 0) {  // the phase's one arrival, which then waits for the statistics' bytes
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(
          reinterpret_cast<uint64_t*>(smem + kBarrierOffset + 8 * buffer),
          static_cast<uint32_t>(n_blocks * 128 * 8));
    }
    if (quad == 0) {
      CUTLASS_PRAGMA_UNROLL
      for (int cta = 0; cta < lnepi::kMaxClusterCtas; ++cta) {
        if (cta < n_blocks) {
          const uint32_t to = cute::set_block_rank(exchange, static_cast<uint32_t>(cta));
          const uint32_t to_barrier = cute::set_block_rank(barrier, static_cast<uint32_t>(cta));
          CUTLASS_PRAGMA_UNROLL
          for (int block = 0; block < kBlocks; ++block) {
            CUTLASS_PRAGMA_UNROLL
            for (int h = 0; h < 2; ++h) {
              lnepi::StoreRemotePair(to + 8 * (n_blk * 128 + tile_row(block, h)),
                                     make_float2(sum[block][h], dev[block][h]), to_barrier);
            }
          }
        }
      }
    }
    lnepi::WaitParity(barrier, parity);
    // The rows' mean and 1 / standard deviation from the n_blocks partial statistics, once a row:
    // lane l of a warp takes the warp's row 16 (l / 16) + l % 16 (tile row 64 (l / 16) + 16 warp +
    // l % 16) and leaves (mean, 1 / std) in the warp's staging area, free between the passes.
    {
      const float inv_n = 1.f / static_cast<float>(n_total);
      const uint32_t row_stats = exchange + 8 * (64 * (lane / 16) + 16 * warp + lane % 16);
      float2 part[lnepi::kMaxClusterCtas];
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < lnepi::kMaxClusterCtas; ++t) {
        part[t] =
            t < n_blocks ? regepi::LdShared64(row_stats + 8 * 128 * t) : make_float2(0.f, 0.f);
      }
      float total = 0;
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < lnepi::kMaxClusterCtas; ++t) total += part[t].x;
      const float mu = total * inv_n;
      float m2 = 0;
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < lnepi::kMaxClusterCtas; ++t) {
        const float d = part[t].x * (1.f / 128) - mu;
        if (t < n_blocks) m2 += part[t].y + 128.f * d * d;
      }
      regepi::StShared64(stage + 8 * lane, make_float2(mu, rsqrtf(m2 * inv_n + params_.epsilon)));
    }
    __syncwarp();
    float mean[kBlocks][2], rstd[kBlocks][2];
    CUTLASS_PRAGMA_UNROLL
    for (int block = 0; block < kBlocks; ++block) {
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const float2 mr = regepi::LdShared64(stage + 8 * (16 * block + lane / 4 + 8 * h));
        mean[block][h] = mr.x;
        rstd[block][h] = mr.y;
      }
    }
    __syncwarp();  // the staging area is the second pass's

    // 4. y = (v - mean) · rstd · gamma + beta in FP16 through the staging area, and its quantised
    // copy from the same FP16 values, in row order.
    CUTLASS_PRAGMA_UNROLL
    for (int block = 0; block < kBlocks; ++block) {
      CUTLASS_PRAGMA_UNROLL
      for (int u = 0; u < 8; ++u) {
        const uint32_t maddr = regepi::StagedChunk(stage, srow, 2 * u + (mi >> 1), kRowBytes);
        uint32_t r[4];
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < 4; ++i) {
          const int h = i % 2, j = 2 * u + i / 2;
          const float2 g = column_pair(2, j);
          const float2 b = column_pair(3, j);
          const float s = rstd[block][h], mu = mean[block][h];
          const float y0 = fmaf((Get(acc(4 * j + 2 * h, block, 0)) - mu) * s, g.x, b.x);
          const float y1 = fmaf((Get(acc(4 * j + 2 * h + 1, block, 0)) - mu) * s, g.y, b.y);
          r[i] = PackPair<__half>(y0, y1);
        }
        regepi::StMatrixX4(maddr, r[0], r[1], r[2], r[3]);
      }
      __syncwarp();
      const int row0 = m0 + 64 * block + 16 * warp;
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < 8; ++t) {
        const int row = 2 * t + lane / 16, chunk = lane % 16;
        const uint4 w = regepi::LdShared128(regepi::StagedChunk(stage, row, chunk, kRowBytes));
        const int grow = row0 + row, gcol = n0 + 8 * chunk;
        if (grow < m_total) {
          const int64_t at = int64_t(grow) * n_total + gcol;
          *reinterpret_cast<uint4*>(params_.y + at) = w;
          if (params_.q != nullptr) {
            *reinterpret_cast<uint2*>(params_.q + at) =
                lnepi::QuantizeEight(w, params_.q_inv_scale, params_.q_e4m3);
          }
        }
      }
      __syncwarp();  // the staging area is the next block's
    }
  }

 private:
  // A warp's 16 rows (row0 + 0..15) of the residual's 128 columns from n0 into its staging area
  // (cp.async, zeros past the last row), in the swizzled layout ldmatrix reads.
  CUTLASS_DEVICE void StageRows(uint32_t stage, int row0, int n0, int m_total, int n_total,
                                int lane) const {
    CUTLASS_PRAGMA_UNROLL
    for (int t = 0; t < 8; ++t) {
      const int row = 2 * t + lane / 16, chunk = lane % 16;
      const bool valid = row0 + row < m_total;
      const cutlass::half_t* src =
          params_.residual + (valid ? int64_t(row0 + row) * n_total + n0 + 8 * chunk : 0);
      CpAsync16(regepi::StagedChunk(stage, row, chunk, kRowBytes), src, valid);
    }
    CpAsyncCommit();
  }
  // An accumulator register as float: INT8's hold int32 sums, then (Put) the float sums' bits.
  template <class T>
  CUTLASS_DEVICE static float Get(T const& a) {
    if constexpr (std::is_same_v<T, int32_t>) {
      return __int_as_float(a);
    } else {
      return a;
    }
  }
  template <class T>
  CUTLASS_DEVICE static void Put(T& a, float v) {
    if constexpr (std::is_same_v<T, int32_t>) {
      a = __float_as_int(v);
    } else {
      a = v;
    }
  }

  Params params_;
  int tiles_ = 0;  // the warpgroup's tiles so far: which exchange buffer and barrier phase
};

// The device adapter of a row-group kernel (OverlapPingPong<..., true>): the calls of CUTLASS's
// GemmUniversalAdapter that KernelCalls makes, launching clusters of N / 128 CTAs along x, as many
// as the device runs at once (cudaOccupancyMaxActiveClusters) and at most one per row tile.
template <class Kernel>
class RowGroupGemm {
 public:
  using Arguments = typename Kernel::Arguments;
  using Params = typename Kernel::Params;

  // Also false where the device runs no cluster of N / 128 such CTAs at once.
  static cutlass::Status can_implement(Arguments const& args) {
    const int n_blocks = cute::get<1>(args.problem_shape) / lnepi::kRowTile;
    return Kernel::can_implement(args) && MaxActiveClusters(n_blocks) > 0
               ? cutlass::Status::kSuccess
               : cutlass::Status::kErrorInvalidProblem;
  }
  static size_t get_workspace_size(Arguments const& args) {
    return Kernel::get_workspace_size(args);
  }
  cutlass::Status initialize(Arguments const& args, void* workspace, cudaStream_t stream) {
    const cutlass::Status st = Kernel::initialize_workspace(args, workspace, stream);
    if (st != cutlass::Status::kSuccess) return st;
    params_ = Kernel::to_underlying_arguments(args, workspace);
    return cutlass::Status::kSuccess;
  }
  cutlass::Status run(cudaStream_t stream, cutlass::CudaHostAdapter*, bool pdl) {
    const int m_blocks =
        (cute::get<0>(params_.problem_shape) + lnepi::kRowTile - 1) / lnepi::kRowTile;
    const int n_blocks = cute::get<1>(params_.problem_shape) / lnepi::kRowTile;
    const int clusters = MaxActiveClusters(n_blocks);
    if (clusters <= 0) return cutlass::Status::kErrorInternal;
    cudaLaunchConfig_t config = Config(std::min(clusters, m_blocks), n_blocks, stream);
    cudaLaunchAttribute attrs[2];
    attrs[0].id = cudaLaunchAttributeClusterDimension;
    attrs[0].val.clusterDim.x = static_cast<unsigned>(n_blocks);
    attrs[0].val.clusterDim.y = 1;
    attrs[0].val.clusterDim.z = 1;
    attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[1].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attrs;
    config.numAttrs = pdl ? 2 : 1;
    return cudaLaunchKernelEx(&config, cutlass::device_kernel<Kernel>, params_) == cudaSuccess
               ? cutlass::Status::kSuccess
               : cutlass::Status::kErrorInternal;
  }

  // Clusters of n_blocks CTAs the current device runs at once (0: none), asked once per device
  // and cluster size.
  static int MaxActiveClusters(int n_blocks) {
    constexpr int kDevices = 16;
    static std::atomic<int> known[kDevices][lnepi::kMaxClusterCtas + 1] = {};
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || n_blocks < 1 ||
        n_blocks > lnepi::kMaxClusterCtas) {
      return 0;
    }
    std::atomic<int>* slot = device < kDevices ? &known[device][n_blocks] : nullptr;
    if (slot != nullptr && slot->load() > 0) return slot->load();
    if (cudaFuncSetAttribute(cutlass::device_kernel<Kernel>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             Kernel::SharedStorageSize) != cudaSuccess) {
      return 0;
    }
    cudaLaunchConfig_t config = Config(1, n_blocks, nullptr);
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = static_cast<unsigned>(n_blocks);
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    config.attrs = &attr;
    config.numAttrs = 1;
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, cutlass::device_kernel<Kernel>, &config) !=
        cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    if (slot != nullptr) slot->store(clusters);
    return clusters;
  }

 private:
  static cudaLaunchConfig_t Config(int clusters, int n_blocks, cudaStream_t stream) {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>(clusters * n_blocks), 1, 1);
    config.blockDim = Kernel::get_block_shape();
    config.dynamicSmemBytes = Kernel::SharedStorageSize;
    config.stream = stream;
    return config;
  }
  Params params_{};
};

// A 128 x 128 ping-pong kernel with the LayerNorm epilogue, in row groups (KernelCalls, qgemm.cuh).
template <class Element, class MainSchedule>
struct LayerNormKernel {
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_128>;
  using Op = LayerNormEpilogue<Element>;
  using CollectiveEpilogue =
      cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<Op>;
  using Accumulator = typename Op::ElementAccumulator;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor, 16,
      Element, cutlass::layout::ColumnMajor, 16, Accumulator, TileShape,
      cute::Shape<cute::_1, cute::_1, cute::_1>,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Op::SharedStorage))>,
      MainSchedule>::CollectiveOp;
  using GemmKernel =
      OverlapPingPong<cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>,
                                                           CollectiveMainloop, CollectiveEpilogue>,
                      true>;
  using Gemm = RowGroupGemm<GemmKernel>;

  static typename Gemm::Arguments Arguments(const QGemmArgs& a, int sm_count) {
    using namespace cute;
    const int m = static_cast<int>(a.m), n = static_cast<int>(a.n), k = static_cast<int>(a.k);
    auto sa = cutlass::make_cute_packed_stride(typename GemmKernel::StrideA{}, make_shape(m, k, 1));
    auto sb = cutlass::make_cute_packed_stride(typename GemmKernel::StrideB{}, make_shape(n, k, 1));
    typename Op::Arguments epi;
    epi.scale = a.scale;
    epi.bias = static_cast<const cutlass::half_t*>(a.bias);
    epi.residual = static_cast<const cutlass::half_t*>(a.residual);
    epi.y = static_cast<cutlass::half_t*>(a.y);
    epi.gamma = a.ln.gamma;
    epi.beta = a.ln.beta;
    epi.epsilon = a.ln.epsilon;
    epi.q = static_cast<uint8_t*>(a.ln.q.y);
    epi.q_e4m3 = a.ln.q.type == QuantType::kFp8E4M3;
    epi.q_inv_scale = a.ln.q.inv_scale;
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {m, n, k, 1},
        {static_cast<const Element*>(a.x), sa, static_cast<const Element*>(a.w), sb},
        epi};
    args.hw_info.sm_count = sm_count;
    return args;
  }
};

// The LayerNorm epilogue's TileOps (INT8 and FP8).
inline TileOps LayerNormOps(QuantType t) {
  return t == QuantType::kInt8
             ? OpsOfKernel<LayerNormKernel<int8_t, Operand<int8_t>::PingPong>>()
             : OpsOfKernel<LayerNormKernel<cutlass::float_e4m3_t,
                                           Operand<cutlass::float_e4m3_t>::PingPong>>();
}

}  // namespace surge::engine::cuda::qgemm
