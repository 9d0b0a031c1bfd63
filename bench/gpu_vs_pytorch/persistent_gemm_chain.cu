// The persistent GEMM-chain kernel of persistent_gemm_chain.h.
#include <cooperative_groups.h>

#include <algorithm>

#include "engine/backends/cuda/device_math.cuh"
#include "engine/backends/cuda/mma.cuh"
#include "persistent_gemm_chain.h"

namespace surge::engine::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;  // 8 warps x 16 rows
// Activation k-blocks (columns streamed per stage) and ring depth: 32 x 6 or 64 x 4.
template <int KB>
constexpr int kStagesOf = KB == 32 ? 6 : 4;
template <int KB>
constexpr int kALdOf = KB + 8;      // padded row (elements): conflict-free ldmatrix
constexpr int kMaxTile = 192;       // output columns a cluster may own per GEMM
constexpr int kBarrierBytes = 128;  // two mbarriers at the start of shared memory
static_assert(kThreads / 32 * 16 == kChainRows);

struct Params {
  const ChainPhase* phases = nullptr;
  int num_phases = 0;
  unsigned* barrier = nullptr;
  int cs = 1;          // CTAs per cluster (K split)
  int clusters = 1;    // output-column slices
  size_t w_bytes = 0;  // one weight buffer
  ChainWork work = ChainWork::kFull;
  bool stagger = false;       // ChainConfig::stagger
  bool late_weights = false;  // ChainConfig::late_weights
  // Optional: thread 0 of every CTA writes, per phase, the SM clock at kChainMarks points.
  long long* marks = nullptr;
};

__device__ __forceinline__ void Mark(const Params& p, int phase, int point) {
  if (p.marks && threadIdx.x == 0) {
    p.marks[(static_cast<int64_t>(blockIdx.x) * p.num_phases + phase) * kChainMarks + point] =
        clock64();
  }
}

__device__ __forceinline__ void MbarInit(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void MbarExpectTx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void MbarWait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void BulkCopy(uint32_t dst, const void* src, uint32_t bytes,
                                         uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

// All CTAs of the grid: every write before it is visible to every read after it.
__device__ __forceinline__ void GridBarrier(unsigned* bar, unsigned target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(bar, 1u);
    unsigned v = 0;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(bar) : "memory");
    } while (v < target);
  }
  __syncthreads();
}

// Warp 0 copies this CTA's share of `ph`'s weight ([tile rows of N] x [k share]) into `dst`.
__device__ __forceinline__ void IssueWeights(const ChainPhase& ph, const Params& p, uint32_t dst,
                                             uint32_t bar, int cluster, int rank) {
  const int tile = ph.n / p.clusters, kc = ph.k / p.cs;
  const int lane = threadIdx.x & 31;
  // The buffer was last read by ldmatrix (generic proxy) before the barrier that ended its GEMM.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  if (ph.w_tiled) {
    if (lane == 0) {
      const uint32_t bytes = static_cast<uint32_t>(tile * (kc + 8) * 2);
      MbarExpectTx(bar, bytes);
      BulkCopy(dst, ph.w_tiled + static_cast<int64_t>(cluster * p.cs + rank) * tile * (kc + 8),
               bytes, bar);
    }
    return;
  }
  if (lane == 0) MbarExpectTx(bar, static_cast<uint32_t>(tile * kc * 2));
  __syncwarp();
  const __half* src = ph.w + static_cast<int64_t>(cluster) * tile * ph.k + rank * kc;
  for (int r = lane; r < tile; r += 32) {
    BulkCopy(dst + r * (kc + 8) * 2, src + static_cast<int64_t>(r) * ph.k, kc * 2, bar);
  }
}

template <int KB>
__device__ __forceinline__ void LoadA(uint32_t dst, const __half* a, int k, int col0) {
  // 128 rows x KB columns in 16-byte chunks.
  constexpr int kChunks = KB / 8;
#pragma unroll
  for (int it = 0; it < kChainRows * kChunks / kThreads; ++it) {
    const int i = threadIdx.x + it * kThreads;
    const int r = i / kChunks, c = (i % kChunks) * 8;
    CpAsync16(dst + (r * kALdOf<KB> + c) * 2, a + static_cast<int64_t>(r) * k + col0 + c, true);
  }
}

template <int KB>
__global__ void __launch_bounds__(kThreads, 1) PersistentGemmChain(Params p) {
  constexpr int kKBlock = KB, kStages = kStagesOf<KB>, kALd = kALdOf<KB>;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t wbar[2] = {base, base + 8};
  const uint32_t wbuf[2] = {base + kBarrierBytes,
                            base + kBarrierBytes + static_cast<uint32_t>(p.w_bytes)};
  const uint32_t ring = wbuf[1] + static_cast<uint32_t>(p.w_bytes);
  float* red = reinterpret_cast<float*>(smem + kBarrierBytes + 2 * p.w_bytes);

  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int cl = blockIdx.x / p.cs;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int a_row = lane & 15, a_col = (lane >> 4) * 8;
  const int kb_row = (lane & 7) + ((lane >> 4) << 3), kb_col = ((lane >> 3) & 1) * 8;

  if (threadIdx.x == 0) {
    MbarInit(wbar[0], 1);
    MbarInit(wbar[1], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const bool work = p.work != ChainWork::kBarriersOnly;
  const bool mma = p.work != ChainWork::kNoMma;
  const bool epilogue = p.work != ChainWork::kNoEpilogue;
  if (work && warp == 0) IssueWeights(p.phases[0], p, wbuf[0], wbar[0], cl, rank);

  for (int ph_i = 0; ph_i < p.num_phases; ++ph_i) {
    Mark(p, ph_i, 0);
    if (work) {
      const ChainPhase ph = p.phases[ph_i];  // in registers: stores below would force reloads
      const int tile = ph.n / p.clusters, kc = ph.k / p.cs, wld = kc + 8;
      const int n0 = cl * tile, k0 = rank * kc, nkb = kc / kKBlock;
      const int ntiles8 = tile / 8;
      // The k-block the kb-th step of this cluster reads (ChainConfig::stagger).
      const int shift = p.stagger ? cl % nkb : 0;
      auto kblock_of = [&](int kb) { return kb + shift < nkb ? kb + shift : kb + shift - nkb; };
      // The next GEMM's weights go to the buffer the previous GEMM read (it finished before the
      // last grid barrier).
      auto issue_next_weights = [&] {
        if (ph_i + 1 < p.num_phases && warp == 0) {
          const int nb = (ph_i + 1) & 1;
          IssueWeights(p.phases[ph_i + 1], p, wbuf[nb], wbar[nb], cl, rank);
        }
      };
      if (!p.late_weights) issue_next_weights();
      // Activation ring: stages 0..kStages-2 first, one group per k-block (empty past the end).
      for (int s = 0; s < kStages - 1; ++s) {
        if (s < nkb) {
          LoadA<KB>(ring + s * kChainRows * kALd * 2, ph.a, ph.k, k0 + kblock_of(s) * kKBlock);
        }
        CpAsyncCommit();
      }
      float acc[kMaxTile / 8][4];
#pragma unroll
      for (int i = 0; i < kMaxTile / 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
      MbarWait(wbar[ph_i & 1], (ph_i >> 1) & 1);
      Mark(p, ph_i, 1);
      const uint32_t wb = wbuf[ph_i & 1];
      for (int kb = 0; kb < nkb; ++kb) {
        CpAsyncWait<kStages - 2>();
        __syncthreads();
        const int next = kb + kStages - 1;
        if (next < nkb) {
          LoadA<KB>(ring + (next % kStages) * kChainRows * kALd * 2, ph.a, ph.k,
                    k0 + kblock_of(next) * kKBlock);
        }
        CpAsyncCommit();
        const uint32_t as = ring + (kb % kStages) * kChainRows * kALd * 2;
        const int wcol = kblock_of(kb) * kKBlock;
#pragma unroll
        for (int kk = 0; kk < kKBlock / 16; ++kk) {
          uint32_t af[4];
          LdMatrixX4(af, as + ((warp * 16 + a_row) * kALd + kk * 16 + a_col) * 2);
#pragma unroll
          for (int np = 0; np < kMaxTile / 16; ++np) {
            if (mma && np * 2 < ntiles8) {
              uint32_t bf[4];
              LdMatrixX4(bf, wb + ((np * 16 + kb_row) * wld + wcol + kk * 16 + kb_col) * 2);
              Mma16816<__half>(acc[2 * np], af, bf[0], bf[1]);
              Mma16816<__half>(acc[2 * np + 1], af, bf[2], bf[3]);
            }
          }
        }
      }
      CpAsyncWait<0>();
      Mark(p, ph_i, 2);
      if (p.late_weights) issue_next_weights();
      __syncthreads();  // the ring is read no more: partial sums go over it
      const int rld = tile + 4;
#pragma unroll
      for (int i = 0; i < kMaxTile / 8; ++i) {
        if (i < ntiles8) {
          const int row = warp * 16 + g, col = i * 8 + 2 * t;
          *reinterpret_cast<float2*>(red + row * rld + col) = make_float2(acc[i][0], acc[i][1]);
          *reinterpret_cast<float2*>(red + (row + 8) * rld + col) =
              make_float2(acc[i][2], acc[i][3]);
        }
      }
      cluster.sync();
      Mark(p, ph_i, 3);
      // This CTA finishes rows [rank * 128/cs, +128/cs): the cluster's partial sums added.
      const int rows = kChainRows / p.cs, r0 = rank * rows, quads = tile / 4;
      for (int idx = threadIdx.x; epilogue && idx < rows * quads; idx += kThreads) {
        const int row = r0 + idx / quads, c = (idx % quads) * 4;
        float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int q = 0; q < p.cs; ++q) {
          const float4 v =
              *reinterpret_cast<const float4*>(cluster.map_shared_rank(red, q) + row * rld + c);
          s.x += v.x;
          s.y += v.y;
          s.z += v.z;
          s.w += v.w;
        }
        const int col = n0 + c;
        const __half2* b2 = reinterpret_cast<const __half2*>(ph.bias + col);
        float v[4] = {s.x + __low2float(b2[0]), s.y + __high2float(b2[0]), s.z + __low2float(b2[1]),
                      s.w + __high2float(b2[1])};
        if (ph.gelu) {
#pragma unroll
          for (int e = 0; e < 4; ++e) v[e] = GeluTanh(v[e]);
        }
        const int64_t at = static_cast<int64_t>(row) * ph.n + col;
        if (ph.residual) {
          const __half2* r2 = reinterpret_cast<const __half2*>(ph.residual + at);
          v[0] += __low2float(r2[0]);
          v[1] += __high2float(r2[0]);
          v[2] += __low2float(r2[1]);
          v[3] += __high2float(r2[1]);
        }
        __half2 o[2] = {__floats2half2_rn(v[0], v[1]), __floats2half2_rn(v[2], v[3])};
        *reinterpret_cast<uint2*>(ph.out + at) = *reinterpret_cast<const uint2*>(o);
      }
    }
    Mark(p, ph_i, 4);
    GridBarrier(p.barrier, (ph_i + 1) * gridDim.x);
    Mark(p, ph_i, 5);
  }
}

}  // namespace

bool PlanChain(const std::vector<ChainPhase>& phases, int cs, int kblock, int sm_count,
               ChainConfig* config, std::string* why) {
  if (kblock != 32 && kblock != 64) {
    *why = "the k-block must be 32 or 64";
    return false;
  }
  if (cs < 1 || kChainRows % cs != 0) {
    *why = "the cluster size must divide 128";
    return false;
  }
  for (const ChainPhase& ph : phases) {
    if (ph.k % (cs * kblock) != 0) {
      *why = "a K is not a multiple of the k-block x the cluster size";
      return false;
    }
  }
  int clusters = 0;
  for (int nc = sm_count / cs; nc >= 1 && clusters == 0; --nc) {
    bool fits = true;
    for (const ChainPhase& ph : phases) {
      const int tile = ph.n / nc;
      fits = fits && ph.n % nc == 0 && tile % 16 == 0 && tile <= kMaxTile;
    }
    if (fits) clusters = nc;
  }
  if (clusters == 0) {
    *why = "no cluster count divides every GEMM's columns into slices of 16 to 192";
    return false;
  }
  size_t w_bytes = 0, red_bytes = 0;
  for (const ChainPhase& ph : phases) {
    const int tile = ph.n / clusters, kc = ph.k / cs;
    w_bytes = std::max(w_bytes, size_t(tile) * (kc + 8) * 2);
    red_bytes = std::max(red_bytes, size_t(kChainRows) * (tile + 4) * 4);
  }
  w_bytes = (w_bytes + 127) / 128 * 128;
  const size_t ring_bytes = kblock == 32 ? size_t{kStagesOf<32>} * kChainRows * kALdOf<32> * 2
                                         : size_t{kStagesOf<64>} * kChainRows * kALdOf<64> * 2;
  config->cs = cs;
  config->kblock = kblock;
  config->clusters = clusters;
  config->w_bytes = w_bytes;
  config->smem_bytes = kBarrierBytes + 2 * w_bytes + std::max(ring_bytes, red_bytes);
  return true;
}

std::vector<uint16_t> TileChainWeight(const std::vector<uint16_t>& w, int n, int k,
                                      const ChainConfig& config) {
  const int tile = n / config.clusters, kc = k / config.cs;
  std::vector<uint16_t> out(size_t(config.clusters) * config.cs * tile * (kc + 8), 0);
  for (int c = 0; c < config.clusters; ++c) {
    for (int r = 0; r < config.cs; ++r) {
      uint16_t* dst = out.data() + (size_t(c) * config.cs + r) * tile * (kc + 8);
      for (int row = 0; row < tile; ++row) {
        const uint16_t* src = w.data() + size_t(c * tile + row) * k + size_t(r) * kc;
        std::copy(src, src + kc, dst + size_t(row) * (kc + 8));
      }
    }
  }
  return out;
}

namespace {

cudaLaunchConfig_t LaunchConfigOf(const ChainConfig& c, cudaStream_t stream,
                                  cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t lc{};
  lc.gridDim = dim3(c.clusters * c.cs);
  lc.blockDim = dim3(kThreads);
  lc.dynamicSmemBytes = c.smem_bytes;
  lc.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = c.cs;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  lc.attrs = attr;
  lc.numAttrs = 1;
  return lc;
}

using KernelFn = void (*)(Params);
KernelFn KernelOf(const ChainConfig& c) {
  return c.kblock == 64 ? PersistentGemmChain<64> : PersistentGemmChain<32>;
}

cudaError_t SetSmem(const ChainConfig& c) {
  return cudaFuncSetAttribute(KernelOf(c), cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(c.smem_bytes));
}

}  // namespace

cudaError_t ChainMaxActiveClusters(const ChainConfig& config, int* clusters) {
  if (cudaError_t e = SetSmem(config); e != cudaSuccess) return e;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t lc = LaunchConfigOf(config, nullptr, &attr);
  return cudaOccupancyMaxActiveClusters(clusters, KernelOf(config), &lc);
}

cudaError_t LaunchChain(const ChainConfig& config, const ChainPhase* phases, int num_phases,
                        unsigned* barrier, ChainWork work, cudaStream_t stream, long long* marks) {
  if (cudaError_t e = SetSmem(config); e != cudaSuccess) return e;
  if (cudaError_t e = cudaMemsetAsync(barrier, 0, sizeof(unsigned), stream); e != cudaSuccess) {
    return e;
  }
  Params p;
  p.phases = phases;
  p.num_phases = num_phases;
  p.barrier = barrier;
  p.cs = config.cs;
  p.clusters = config.clusters;
  p.w_bytes = config.w_bytes;
  p.work = work;
  p.stagger = config.stagger;
  p.late_weights = config.late_weights;
  p.marks = marks;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t lc = LaunchConfigOf(config, stream, &attr);
  return cudaLaunchKernelEx(&lc, KernelOf(config), p);
}

}  // namespace surge::engine::cuda
