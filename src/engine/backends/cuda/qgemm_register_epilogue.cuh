// The quantised GEMM's epilogue from the accumulator registers, for 128 x 128 ping-pong tiles
// (qgemm.cuh): dequantise, bias, GELU or residual and the output conversion run on the
// warpgroup's accumulators in place; each warp then writes its own rows through a private 4 KB
// (FP16 out) or 2 KB (8-bit out) staging area in shared memory — stmatrix in the accumulator
// layout, 16-byte reads in row order, 16-byte global stores — so a tile's epilogue needs no
// warpgroup barrier, shared-memory fence, TMA store or wait on one, and no per-tile copy of the
// scale and bias into shared memory (each thread reads its 32 columns' values from L1). Sharing
// nothing with the other warpgroup, it can run while that one runs its own epilogue: the
// overlapped ping-pong kernel (qgemm_overlap_pingpong.cuh) is built on that.
//
// Layout (PTX wgmma, m64nNk): warp w of the warpgroup holds rows 16 w + l/4 and 16 w + l/4 + 8 of
// each 64-row block, columns 8 j + 2 (l%4) and + 1 for j = 0 .. N/8 - 1 (lane l); the fragment's
// value index is c + 2 h + 4 j (column pair, row half, column group), its second mode the 64-row
// block. Staging rows are XOR-swizzled in 16-byte chunks (chunk ^ row % 8): conflict-free for the
// stmatrix stores and the 16-byte reads alike.
#pragma once

#include <cuda_fp16.h>
#include <cutlass/fast_math.h>

#include <cstdint>
#include <cutlass/epilogue/collective/detail.hpp>
#include <type_traits>

#include "engine/backends/cuda/mma.cuh"
#include "engine/backends/cuda/qgemm.cuh"
#include "engine/backends/cuda/qgemm_overlap_pingpong.cuh"

namespace surge::engine::cuda::qgemm {
namespace regepi {

__device__ __forceinline__ void StMatrixX4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                           uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.x4.m8n8.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
__device__ __forceinline__ uint4 LdShared128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}
__device__ __forceinline__ void StShared128(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void StShared64(uint32_t addr, float2 v) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(v.x), "f"(v.y) : "memory");
}
__device__ __forceinline__ float2 LdShared64(uint32_t addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
  return v;
}
// The staging areas' layout: 16-byte chunk `chunk` of row `row` in rows of `row_bytes` bytes,
// the chunks swizzled by chunk ^ row % 8, so that ldmatrix / stmatrix (8 rows, one chunk each)
// and a row's 16-byte loads and stores touch distinct banks.
__device__ __forceinline__ uint32_t StagedChunk(uint32_t stage, int row, int chunk, int row_bytes) {
  return stage + static_cast<uint32_t>(row * row_bytes + ((chunk ^ (row & 7)) << 4));
}
__device__ __forceinline__ uint32_t Prmt(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}
__device__ __forceinline__ float2 FloatPair(uint32_t half_pair) {
  return __half22float2(*reinterpret_cast<const __half2*>(&half_pair));
}
// Two pairs of int8 (round to nearest even, saturate) in one register: a0 a1 low, b0 b1 high.
__device__ __forceinline__ uint32_t Int8Quad(float a0, float a1, float b0, float b1) {
  uint32_t hi, d;
  asm("cvt.pack.sat.s8.s32.b32 %0, %1, %2, 0;\n"
      : "=r"(hi)
      : "r"(__float2int_rn(b1)), "r"(__float2int_rn(b0)));
  asm("cvt.pack.sat.s8.s32.b32 %0, %1, %2, %3;\n"
      : "=r"(d)
      : "r"(__float2int_rn(a1)), "r"(__float2int_rn(a0)), "r"(hi));
  return d;
}
// The same for e4m3 (round to nearest even, saturating to ±448).
__device__ __forceinline__ uint32_t E4m3Quad(float a0, float a1, float b0, float b1) {
  uint16_t lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(a1), "f"(a0));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(b1), "f"(b0));
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// A warp's 16 rows x 128 FP16 columns of `src` ([m_total, n_total] row-major, from row0 and
// column n0; zeros past its edges) into its staging area (256-byte rows, 16-byte chunks swizzled
// by chunk ^ row % 8), read back in the accumulator layout with ldmatrix. Two batches of four
// 16-byte loads in flight: all eight spill at the accumulators' register count.
__device__ __forceinline__ void StageHalfRows(uint32_t stage, const cutlass::half_t* src, int row0,
                                              int n0, int m_total, int n_total, int lane) {
  constexpr int kRowBytes = 256;
  CUTLASS_PRAGMA_UNROLL
  for (int batch = 0; batch < 2; ++batch) {
    uint4 v[4];
    CUTLASS_PRAGMA_UNROLL
    for (int t = 0; t < 4; ++t) {
      const int row = 2 * (4 * batch + t) + lane / 16, chunk = lane % 16;
      const int grow = row0 + row, gcol = n0 + 8 * chunk;
      v[t] = make_uint4(0, 0, 0, 0);
      if (grow < m_total && gcol < n_total) {
        v[t] = *reinterpret_cast<const uint4*>(src + int64_t(grow) * n_total + gcol);
      }
    }
    CUTLASS_PRAGMA_UNROLL
    for (int t = 0; t < 4; ++t) {
      const int row = 2 * (4 * batch + t) + lane / 16, chunk = lane % 16;
      StShared128(StagedChunk(stage, row, chunk, kRowBytes), v[t]);
    }
  }
  __syncwarp();
}

}  // namespace regepi

// What CUTLASS's DefaultEpilogue interface asks of an epilogue operation that works on the
// accumulator registers through a staging area in shared memory and needs no workspace (the
// operation adds can_implement, is_source_needed and the call; Sm90TmaWarpSpecializedAdapter
// makes it a collective for the warp-specialised kernels).
template <class Args, class Source, class Accumulator, int kStagingBytes>
struct RegisterEpilogueInterface {
  using Arguments = Args;
  using Params = Args;
  using ElementOutput = std::remove_pointer_t<decltype(Args::y)>;
  using ElementD = ElementOutput;
  using ElementC = Source;
  using ElementAccumulator = Accumulator;
  using ElementCompute = float;
  using StrideC = cutlass::detail::TagToStrideC_t<cutlass::layout::RowMajor>;
  using StrideD = StrideC;
  using ThreadEpilogueOp = void;
  using EpilogueSchedule = cutlass::epilogue::NoSmemWarpSpecialized;
  using DispatchPolicy = EpilogueSchedule;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;

  struct SharedStorage {
    alignas(128) uint8_t staging[kStagingBytes];
  };
  using TensorStorage = SharedStorage;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args,
                                                  void*) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*,
                                              cudaStream_t, cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
};

template <class Out>
struct RegisterEpilogueArguments {
  const float* scale = nullptr;               // [n]
  const cutlass::half_t* bias = nullptr;      // [n] or null
  const cutlass::half_t* residual = nullptr;  // [m, n] (kBiasResidual)
  Out* y = nullptr;                           // [m, n]
  float out_inv_scale = 1.f;                  // quantised out
};

// The epilogue operation (CUTLASS's DefaultEpilogue interface; Sm90TmaWarpSpecializedAdapter makes
// it a collective for the warp-specialised kernels).
template <class Element, class TileShape, Epilogue kEpi>
class RegisterEpilogue
    : public RegisterEpilogueInterface<
          RegisterEpilogueArguments<
              std::conditional_t<kEpi == Epilogue::kBiasGeluQuantised, Element, cutlass::half_t>>,
          std::conditional_t<kEpi == Epilogue::kBiasResidual, cutlass::half_t, void>,
          std::conditional_t<std::is_same_v<Element, int8_t>, int32_t, float>,
          8 * 16 * (kEpi == Epilogue::kBiasGeluQuantised ? 128 : 256)> {
 public:
  static_assert(cute::size<0>(TileShape{}) == 128 && cute::size<1>(TileShape{}) == 128,
                "128 x 128 tiles");
  static constexpr bool kQuantisedOut = kEpi == Epilogue::kBiasGeluQuantised;
  static constexpr bool kResidual = kEpi == Epilogue::kBiasResidual;
  static constexpr int kRows = 16;                             // a warp's rows per 64-row block
  static constexpr int kRowBytes = kQuantisedOut ? 128 : 256;  // 128 columns
  static constexpr int kWarpBytes = kRows * kRowBytes;
  static constexpr int kConsumerWarps = 8;
  using typename RegisterEpilogue::RegisterEpilogueInterface::Arguments;
  using typename RegisterEpilogue::RegisterEpilogueInterface::Params;

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem, Arguments const& args) {
    const auto n = cute::get<1>(problem);
    return args.scale != nullptr && args.y != nullptr && n % 16 == 0 &&
           (!kResidual || args.residual != nullptr);
  }

  CUTLASS_HOST_DEVICE explicit RegisterEpilogue(Params const& params) : params_(params) {}

  CUTLASS_DEVICE bool is_source_needed() { return kResidual; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine,
            class FrgLayout, class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem, BlockShapeMNK, BlockCoordMNKL blk_coord,
                                 cute::Tensor<FrgEngine, FrgLayout> const& acc, TiledMma,
                                 ResidueMNK, int thread_idx, char* smem) {
    using namespace cute;
    // Ping-pong: one warpgroup a tile, two 64-row blocks (thread_idx counts the warpgroup's
    // threads).
    constexpr int kBlocks = size<1>(FrgLayout{});
    static_assert(size<0>(FrgLayout{}) == 64 && kBlocks == 2 && size<2>(FrgLayout{}) == 1,
                  "the wgmma m64n128 accumulator of a 128 x 128 tile: ((2, 2, 16), 2, 1)");
    const int m_total = static_cast<int>(get<0>(problem));
    const int n_total = static_cast<int>(get<1>(problem));
    const int m0 = static_cast<int>(get<0>(blk_coord)) * 128;
    const int n0 = static_cast<int>(get<1>(blk_coord)) * 128;
    const int warp = thread_idx / 32, lane = thread_idx % 32;
    const int quad = lane % 4;
    // The consumer warpgroups are the kernel's second and third (the first loads).
    const int consumer_warp = (static_cast<int>(threadIdx.x) / 128 - 1) * 4 + warp;
    const uint32_t stage = static_cast<uint32_t>(__cvta_generic_to_shared(smem)) +
                           static_cast<uint32_t>(consumer_warp * kWarpBytes);

    // This thread's 32 columns: n0 + 8 j + 2 quad (+ 1).
    // The bias stays in its FP16 pairs until used: the residual form has no registers to spare.
    float2 scale[16];
    uint32_t bias[16];
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < 16; ++j) {
      const int col = n0 + 8 * j + 2 * quad;
      const bool in = col < n_total;
      scale[j] = in ? __ldg(reinterpret_cast<const float2*>(params_.scale + col)) : float2{};
      bias[j] = params_.bias != nullptr && in
                    ? __ldg(reinterpret_cast<const unsigned int*>(params_.bias + col))
                    : 0u;
    }
    // The quantised GELU works on u = c z (ScaledGelu): scale and bias times c, once a tile.
    float2 gelu_bias[16];
    if constexpr (kQuantisedOut) {
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < 16; ++j) {
        scale[j] = make_float2(scale[j].x * kGeluC, scale[j].y * kGeluC);
        const float2 b = regepi::FloatPair(bias[j]);
        gelu_bias[j] = make_float2(b.x * kGeluC, b.y * kGeluC);
      }
    }
    const float out_scale = 0.5f * params_.out_inv_scale / kGeluC;
    // The residual may be the grid before's output: wait for it (programmatic dependent launch).
    if constexpr (kResidual) cutlass::arch::wait_on_dependent_grids();

    CUTLASS_PRAGMA_UNROLL
    for (int block = 0; block < kBlocks; ++block) {
      const int row0 = m0 + 64 * block + 16 * warp;  // this warp's first row
      // The residual rows, staged in the layout the output takes; each unit below reads its
      // part back in the accumulator layout (ldmatrix mirrors stmatrix) and overwrites it.
      if constexpr (kResidual) {
        regepi::StageHalfRows(stage, params_.residual, row0, n0, m_total, n_total, lane);
      }

      // Units of one stmatrix.x4 each: FP16 out, column groups 2 u and 2 u + 1 (a pair of
      // columns a register); 8-bit out, groups 4 u .. 4 u + 3 (two pairs a register, groups 2 k
      // and 2 k + 1 in the low and high halves). Matrix i of a unit: row half i % 2, its
      // (register) group 2 u + i / 2 (FP16) or k = 2 u + i / 2 (8-bit).
      constexpr int kUnits = kQuantisedOut ? 4 : 8;
      const int mi = lane / 8, mrow = lane % 8;
      const int srow = 8 * (mi & 1) + mrow;  // this lane's stmatrix row
      CUTLASS_PRAGMA_UNROLL
      for (int u = 0; u < kUnits; ++u) {
        const uint32_t maddr = regepi::StagedChunk(stage, srow, 2 * u + (mi >> 1), kRowBytes);
        uint32_t r[4];  // (half 0, 2u), (half 1, 2u), (half 0, 2u + 1), (half 1, 2u + 1)
        if constexpr (kResidual) LdMatrixX4(r, maddr);
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < 4; ++i) {
          const int h = i % 2;
          if constexpr (kQuantisedOut) {
            float v[4];
            CUTLASS_PRAGMA_UNROLL
            for (int g = 0; g < 2; ++g) {
              const int j = 2 * (2 * u + i / 2) + g;
              v[2 * g] = ScaledGelu(fmaf(static_cast<float>(acc(4 * j + 2 * h, block, 0)),
                                         scale[j].x, gelu_bias[j].x),
                                    out_scale);
              v[2 * g + 1] = ScaledGelu(fmaf(static_cast<float>(acc(4 * j + 2 * h + 1, block, 0)),
                                             scale[j].y, gelu_bias[j].y),
                                        out_scale);
            }
            r[i] = std::is_same_v<Element, int8_t> ? regepi::Int8Quad(v[0], v[1], v[2], v[3])
                                                   : regepi::E4m3Quad(v[0], v[1], v[2], v[3]);
          } else {
            const int j = 2 * u + i / 2;
            const float2 b = regepi::FloatPair(bias[j]);
            float v0 = fmaf(static_cast<float>(acc(4 * j + 2 * h, block, 0)), scale[j].x, b.x);
            float v1 = fmaf(static_cast<float>(acc(4 * j + 2 * h + 1, block, 0)), scale[j].y, b.y);
            if constexpr (kEpi == Epilogue::kBiasGelu) {
              cutlass::epilogue::thread::GELU_taylor<float> gelu;
              v0 = gelu(v0);
              v1 = gelu(v1);
            } else if constexpr (kResidual) {
              const float2 res = regepi::FloatPair(r[i]);
              v0 += res.x;
              v1 += res.y;
            }
            r[i] = PackPair<__half>(v0, v1);
          }
        }
        regepi::StMatrixX4(maddr, r[0], r[1], r[2], r[3]);
      }
      __syncwarp();

      // Read back in row order and store: 16-byte chunks, whole rows a warp.
      if constexpr (kQuantisedOut) {
        CUTLASS_PRAGMA_UNROLL
        for (int t = 0; t < 4; ++t) {
          const int row = 4 * t + lane / 8, chunk = lane % 8;
          const uint4 w = regepi::LdShared128(regepi::StagedChunk(stage, row, chunk, kRowBytes));
          // Word q holds the column pair q of group 2 chunk (low half) and of 2 chunk + 1 (high).
          const uint4 o =
              make_uint4(regepi::Prmt(w.x, w.y, 0x5410), regepi::Prmt(w.z, w.w, 0x5410),
                         regepi::Prmt(w.x, w.y, 0x7632), regepi::Prmt(w.z, w.w, 0x7632));
          const int grow = row0 + row, gcol = n0 + 16 * chunk;
          if (grow < m_total && gcol < n_total) {
            *reinterpret_cast<uint4*>(reinterpret_cast<uint8_t*>(params_.y) +
                                      int64_t(grow) * n_total + gcol) = o;
          }
        }
      } else {
        CUTLASS_PRAGMA_UNROLL
        for (int t = 0; t < 8; ++t) {
          const int row = 2 * t + lane / 16, chunk = lane % 16;
          const uint4 w = regepi::LdShared128(regepi::StagedChunk(stage, row, chunk, kRowBytes));
          const int grow = row0 + row, gcol = n0 + 8 * chunk;
          if (grow < m_total && gcol < n_total) {
            *reinterpret_cast<uint4*>(params_.y + int64_t(grow) * n_total + gcol) = w;
          }
        }
      }
      __syncwarp();  // the staging area is the next block's
    }
  }

 private:
  // GELU's tanh form on u = c z with c³ = 0.044715 · sqrt(2/π): tanh's argument
  // sqrt(2/π) (z + 0.044715 z³) is u (u² + a) with a = sqrt(2/π) / c, and GELU(z) · s is
  // (u + u tanh) · s / (2 c). Five operations a value where GeluTimes (qgemm.cuh) takes six:
  // FFN1's epilogue issues one instruction fewer per output. `s_half_over_c` = s / (2 c).
  static constexpr float kGeluC = 0.3292034911525734f;
  CUTLASS_DEVICE static float ScaledGelu(float u, float s_half_over_c) {
    constexpr float a = 2.423681954311584f;
    const float t = cutlass::fast_tanh(u * fmaf(u, u, a));
    return fmaf(u, t, u) * s_half_over_c;
  }

  Params params_;
};

// A 128 x 128 ping-pong kernel with the register epilogue and overlapped epilogues
// (qgemm_overlap_pingpong.cuh): its CUTLASS adapter and arguments (KernelCalls, qgemm.cuh).
template <class Element, class MainSchedule, Epilogue kEpi, class ClusterShape>
struct RegisterEpilogueKernel {
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_128>;
  using Op = RegisterEpilogue<Element, TileShape, kEpi>;
  using CollectiveEpilogue =
      cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<Op>;
  using Accumulator = typename Op::ElementAccumulator;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor, 16,
      Element, cutlass::layout::ColumnMajor, 16, Accumulator, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Op::SharedStorage))>,
      MainSchedule>::CollectiveOp;
  using GemmKernel =
      OverlapPingPong<cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>,
                                                           CollectiveMainloop, CollectiveEpilogue>>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

  static typename Gemm::Arguments Arguments(const QGemmArgs& a, int sm_count) {
    using namespace cute;
    const int m = static_cast<int>(a.m), n = static_cast<int>(a.n), k = static_cast<int>(a.k);
    auto sa = cutlass::make_cute_packed_stride(typename GemmKernel::StrideA{}, make_shape(m, k, 1));
    auto sb = cutlass::make_cute_packed_stride(typename GemmKernel::StrideB{}, make_shape(n, k, 1));
    typename Op::Arguments epi;
    epi.scale = a.scale;
    epi.bias = static_cast<const cutlass::half_t*>(a.bias);
    epi.residual = static_cast<const cutlass::half_t*>(a.residual);
    epi.y = static_cast<typename Op::ElementD*>(a.y);
    epi.out_inv_scale = a.out_inv_scale;
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {m, n, k, 1},
        {static_cast<const Element*>(a.x), sa, static_cast<const Element*>(a.w), sb},
        epi};
    args.hw_info.sm_count = sm_count;
    return args;
  }
};

// The tile unit's TileOps, clusters of ClusterShape.
template <class ClusterShape>
TileOps RegisterEpilogueOps(QuantType t, Epilogue e) {
  using Fp8 = cutlass::float_e4m3_t;
  using Int8Main = Operand<int8_t>::PingPong;
  using Fp8Main = Operand<Fp8>::PingPong;
  switch (e) {
#define SURGE_QGEMM_CASE(E)                                                               \
  case E:                                                                                 \
    return t == QuantType::kInt8                                                          \
               ? OpsOfKernel<RegisterEpilogueKernel<int8_t, Int8Main, E, ClusterShape>>() \
               : OpsOfKernel<RegisterEpilogueKernel<Fp8, Fp8Main, E, ClusterShape>>();
    SURGE_QGEMM_CASE(Epilogue::kBias)
    SURGE_QGEMM_CASE(Epilogue::kBiasResidual)
    SURGE_QGEMM_CASE(Epilogue::kBiasGeluQuantised)
#undef SURGE_QGEMM_CASE
    case Epilogue::kBiasGelu:  // FFN1 with an FP16 output: INT8 only, as the other units
      if (t == QuantType::kInt8) {
        return OpsOfKernel<
            RegisterEpilogueKernel<int8_t, Int8Main, Epilogue::kBiasGelu, ClusterShape>>();
      }
      return TileOps{};
    case Epilogue::kBiasResidualLayerNorm:  // the LayerNorm tile's only
      return TileOps{};
  }
  return TileOps{};
}

}  // namespace surge::engine::cuda::qgemm
