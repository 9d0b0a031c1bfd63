// The quantised GEMM kernels of qgemm_kernels.h, as templates: one instantiation per operand type,
// tile configuration and epilogue. Each tile configuration is compiled in its own translation
// unit (qgemm_tile*_kernels.cu) so the build runs them in parallel.
#pragma once

#include <cutlass/cutlass.h>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/functional.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>

#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>
#include <type_traits>

#include "engine/backends/cuda/launch.cuh"
#include "engine/backends/cuda/qgemm_kernels.h"

namespace surge::engine::cuda::qgemm {

// The epilogues a quantised BERT-class Linear needs: QKV (bias), FFN1 (bias + GELU, FP16 or the
// next layer's quantised input), attention projection and FFN2 (bias + residual, or bias +
// residual and the LayerNorm after it: qgemm_layer_norm_epilogue.cuh).
enum class Epilogue { kBias, kBiasGelu, kBiasResidual, kBiasGeluQuantised, kBiasResidualLayerNorm };

// Which epilogue runs `a` (false: none here does).
inline bool EpilogueOf(const QGemmArgs& a, Epilogue* e) {
  const bool gelu = a.activation == Activation::kGelu || a.activation == Activation::kGeluTanh;
  if (a.activation != Activation::kNone && !gelu) return false;
  if (a.ln.gamma != nullptr) {
    if (gelu || a.q_out || a.residual == nullptr || a.half) return false;
    *e = Epilogue::kBiasResidualLayerNorm;
    return true;
  }
  if (a.q_out) {
    if (!gelu || a.residual != nullptr) return false;
    *e = Epilogue::kBiasGeluQuantised;
  } else if (a.residual != nullptr) {
    if (gelu) return false;
    *e = Epilogue::kBiasResidual;
  } else {
    *e = gelu ? Epilogue::kBiasGelu : Epilogue::kBias;
  }
  return true;
}

using namespace cute;
namespace fusion = cutlass::epilogue::fusion;
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;

// Operand types: INT8 accumulates in INT32; FP8 e4m3 in FP32 with the tensor cores' own
// accumulator over the whole K loop (fast accumulation, as the cuBLASLt FP8 path by default).
template <class Element>
struct Operand;
template <>
struct Operand<int8_t> {
  using Accumulator = int32_t;
  using Cooperative = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using PingPong = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
};
template <>
struct Operand<cutlass::half_t> {
  using Accumulator = float;
  using Cooperative = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using PingPong = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
};
template <>
struct Operand<cutlass::float_e4m3_t> {
  using Accumulator = float;
  using Cooperative = cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum;
  using PingPong = cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum;
};

// GELU (the tanh form of cutlass::epilogue::thread::GELU_taylor, the same operations) times a
// scale, with GELU's closing 0.5 folded into the scale: v · (0.5 s) rounds to the same float as
// (0.5 v) · s (halving is exact), one multiply fewer per output of FFN1's epilogue, whose
// instructions one warp per scheduler issues while the other warpgroup multiplies.
template <class T>
struct GeluTimes {
  template <int N>
  CUTLASS_DEVICE cutlass::Array<float, N> operator()(cutlass::Array<float, N> const& z,
                                                     cutlass::Array<float, N> const& s) const {
    constexpr float k0 = 0.7978845608028654f;
    constexpr float k1 = k0 * 0.044715f;
    cutlass::Array<float, N> out;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) {
      const float v1 = fmaf(k1 * z[i], z[i], k0);
      const float t = cutlass::fast_tanh(z[i] * v1);
      out[i] = fmaf(z[i], t, z[i]) * (0.5f * s[i]);
    }
    return out;
  }
};

template <class TileShape, class Element, Epilogue kEpi>
struct Fusion {
  using Scale = fusion::Sm90RowBroadcast<0, TileShape, float, float>;
  using Bias = fusion::Sm90RowBroadcast<0, TileShape, cutlass::half_t, float>;
  // FP16 operands: the accumulator plus the bias (nothing to dequantise).
  static constexpr bool kHalf = std::is_same_v<Element, cutlass::half_t>;
  template <class Out>
  using Dequant = std::conditional_t<
      kHalf,
      fusion::Sm90EVT<fusion::Sm90Compute<cutlass::plus, Out, float, kRound>, fusion::Sm90AccFetch,
                      Bias>,
      fusion::Sm90EVT<fusion::Sm90Compute<cutlass::homogeneous_multiply_add, Out, float, kRound>,
                      Scale, fusion::Sm90AccFetch, Bias>>;
  // The tanh form with the hardware tanh (tanh.approx), as cuBLASLt's GELU epilogue: the erf form
  // (erff) took longer than the tile's whole K loop on FFN1 (K = 768).
  template <class Out, class Child>
  using Gelu = fusion::Sm90EVT<
      fusion::Sm90Compute<cutlass::epilogue::thread::GELU_taylor, Out, float, kRound>, Child>;

  static constexpr bool kQuantisedOut = kEpi == Epilogue::kBiasGeluQuantised;
  static constexpr bool kResidual = kEpi == Epilogue::kBiasResidual;
  using ElementD = std::conditional_t<kQuantisedOut, Element, cutlass::half_t>;
  using ElementC = std::conditional_t<kResidual, cutlass::half_t, void>;

  using Evt = std::conditional_t<
      kEpi == Epilogue::kBias, Dequant<cutlass::half_t>,
      std::conditional_t<
          kEpi == Epilogue::kBiasGelu, Gelu<cutlass::half_t, Dequant<float>>,
          std::conditional_t<
              kEpi == Epilogue::kBiasResidual,
              fusion::Sm90EVT<fusion::Sm90Compute<cutlass::plus, cutlass::half_t, float, kRound>,
                              Dequant<float>, fusion::Sm90SrcFetch<cutlass::half_t>>,
              fusion::Sm90EVT<fusion::Sm90Compute<GeluTimes, Element, float, kRound>,
                              Dequant<float>, fusion::Sm90ScalarBroadcast<float>>>>>;

  template <class Out>
  static typename Dequant<Out>::Arguments DequantArgs(const QGemmArgs& a) {
    const auto* bias = static_cast<const cutlass::half_t*>(a.bias);
    if constexpr (kHalf) {
      return {{}, {bias}, {}};
    } else {
      return {{a.scale}, {}, {bias}, {}};
    }
  }

  static typename Evt::Arguments Args(const QGemmArgs& a) {
    if constexpr (kEpi == Epilogue::kBias) {
      return DequantArgs<cutlass::half_t>(a);
    } else if constexpr (kEpi == Epilogue::kBiasGelu) {
      return {DequantArgs<float>(a), {}};
    } else if constexpr (kEpi == Epilogue::kBiasResidual) {
      return {DequantArgs<float>(a), {}, {}};
    } else {
      return {DequantArgs<float>(a), {{a.out_inv_scale}}, {}};
    }
  }
};

template <class TileShape, class ClusterShape, class Element, class MainSchedule, class EpiSchedule,
          class EpiTile, Epilogue kEpi>
struct Kernel {
  using F = Fusion<TileShape, Element, kEpi>;
  using ElementD = typename F::ElementD;
  using ElementC = typename F::ElementC;
  static constexpr int kAlignD = 16 / sizeof(ElementD);
  static constexpr int kAlignAB = 16 / sizeof(Element);

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape, EpiTile,
      typename Operand<Element>::Accumulator, float, ElementC, cutlass::layout::RowMajor, kAlignD,
      ElementD, cutlass::layout::RowMajor, kAlignD, EpiSchedule, typename F::Evt>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor,
      kAlignAB, Element, cutlass::layout::ColumnMajor, kAlignAB,
      typename Operand<Element>::Accumulator, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainSchedule>::CollectiveOp;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>,
                                                          CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

  static typename Gemm::Arguments Arguments(const QGemmArgs& a, int sm_count) {
    const int m = static_cast<int>(a.m), n = static_cast<int>(a.n), k = static_cast<int>(a.k);
    auto sa = cutlass::make_cute_packed_stride(typename GemmKernel::StrideA{}, make_shape(m, k, 1));
    auto sb = cutlass::make_cute_packed_stride(typename GemmKernel::StrideB{}, make_shape(n, k, 1));
    auto sc = cutlass::make_cute_packed_stride(typename GemmKernel::StrideC{}, make_shape(m, n, 1));
    auto sd = cutlass::make_cute_packed_stride(typename GemmKernel::StrideD{}, make_shape(m, n, 1));
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {m, n, k, 1},
        {static_cast<const Element*>(a.x), sa, static_cast<const Element*>(a.w), sb},
        {F::Args(a), nullptr, sc, static_cast<ElementD*>(a.y), sd}};
    if constexpr (F::kResidual) {
      args.epilogue.ptr_C = static_cast<const cutlass::half_t*>(a.residual);
    }
    args.hw_info.sm_count = sm_count;
    return args;
  }
};

// What a tile translation unit offers: the three calls of the kernel convention for one operand
// type and epilogue (all null where not instantiated).
struct TileOps {
  bool (*can_implement)(const QGemmArgs&, int sm_count) = nullptr;
  size_t (*workspace_size)(const QGemmArgs&, int sm_count) = nullptr;
  cudaError_t (*run)(const QGemmArgs&, int sm_count, void*, cudaStream_t) = nullptr;
};

// The three calls of the kernel convention for a kernel type K: K::Gemm, a CUTLASS device adapter,
// and K::Arguments(a, sm_count), its arguments for one call.
template <class K>
struct KernelCalls {
  static bool CanImplement(const QGemmArgs& a, int sm_count) {
    return K::Gemm::can_implement(K::Arguments(a, sm_count)) == cutlass::Status::kSuccess;
  }
  static size_t WorkspaceSize(const QGemmArgs& a, int sm_count) {
    return K::Gemm::get_workspace_size(K::Arguments(a, sm_count));
  }
  static cudaError_t Run(const QGemmArgs& a, int sm_count, void* workspace, cudaStream_t stream) {
    typename K::Gemm gemm;
    const auto args = K::Arguments(a, sm_count);
    if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) {
      return cudaErrorInvalidValue;
    }
    if (gemm.run(stream, nullptr, PdlEnabled()) != cutlass::Status::kSuccess) {
      const cudaError_t e = cudaGetLastError();
      return e != cudaSuccess ? e : cudaErrorLaunchFailure;
    }
    return cudaSuccess;
  }
};

template <class K>
TileOps OpsOfKernel() {
  using C = KernelCalls<K>;
  return TileOps{&C::CanImplement, &C::WorkspaceSize, &C::Run};
}

template <class TileShape, class ClusterShape, class Element, class MainSchedule, class EpiSchedule,
          class EpiTile, Epilogue E>
TileOps OpsOf() {
  return OpsOfKernel<
      Kernel<TileShape, ClusterShape, Element, MainSchedule, EpiSchedule, EpiTile, E>>();
}

// `cooperative`: the cooperative schedule (else ping-pong) for both operand types; `EpiTile` the
// epilogue's subtile (CUTLASS's automatic choice by default).
template <class TileShape, class ClusterShape, bool kCooperative, class EpiSchedule,
          class EpiTile = cutlass::epilogue::collective::EpilogueTileAuto>
TileOps OpsFor(QuantType t, Epilogue e) {
  using Fp8 = cutlass::float_e4m3_t;
  using Int8Main =
      std::conditional_t<kCooperative, Operand<int8_t>::Cooperative, Operand<int8_t>::PingPong>;
  using Fp8Main =
      std::conditional_t<kCooperative, Operand<Fp8>::Cooperative, Operand<Fp8>::PingPong>;
  switch (e) {
#define SURGE_QGEMM_CASE(E)                                                                  \
  case E:                                                                                    \
    return t == QuantType::kInt8                                                             \
               ? OpsOf<TileShape, ClusterShape, int8_t, Int8Main, EpiSchedule, EpiTile, E>() \
               : OpsOf<TileShape, ClusterShape, Fp8, Fp8Main, EpiSchedule, EpiTile, E>();
    SURGE_QGEMM_CASE(Epilogue::kBias)
    SURGE_QGEMM_CASE(Epilogue::kBiasResidual)
    SURGE_QGEMM_CASE(Epilogue::kBiasGeluQuantised)
#undef SURGE_QGEMM_CASE
    case Epilogue::kBiasGelu:
      if (t == QuantType::kInt8) {
        return OpsOf<TileShape, ClusterShape, int8_t, Int8Main, EpiSchedule, EpiTile,
                     Epilogue::kBiasGelu>();
      }
      return TileOps{};
    case Epilogue::kBiasResidualLayerNorm:  // the LayerNorm tile's only
      return TileOps{};
  }
  return TileOps{};
}

// FP16 operands (QGemmArgs::half): the FP16 epilogues (bias, bias + GELU, bias + residual).
template <class TileShape, class EpiTile = cutlass::epilogue::collective::EpilogueTileAuto>
TileOps OpsForHalf(Epilogue e) {
  using H = cutlass::half_t;
  using Main = Operand<H>::PingPong;
  using One = Shape<_1, _1, _1>;
  using Epi = cutlass::epilogue::TmaWarpSpecialized;
  switch (e) {
    case Epilogue::kBias:
      return OpsOf<TileShape, One, H, Main, Epi, EpiTile, Epilogue::kBias>();
    case Epilogue::kBiasGelu:
      return OpsOf<TileShape, One, H, Main, Epi, EpiTile, Epilogue::kBiasGelu>();
    case Epilogue::kBiasResidual:
      return OpsOf<TileShape, One, H, Main, Epi, EpiTile, Epilogue::kBiasResidual>();
    case Epilogue::kBiasGeluQuantised:
    case Epilogue::kBiasResidualLayerNorm:
      return TileOps{};
  }
  return TileOps{};
}

// Defined by the tile translation units.
// Cooperative: the two consumer warpgroups share a tile. Ping-pong: they alternate tiles, so one
// runs its epilogue while the other multiplies (pays on short K, where the epilogue weighs).
// The 128 x 128 ping-pong units store their epilogue in 64 x 128 subtiles (EpiTile), two a tile
// rather than the four (8-bit out) or eight (FP16 out) of CUTLASS's automatic choice: fewer
// shared-memory fences, barriers and TMA stores per tile (docs/perf.md, 2026-12-06).
TileOps Tile128x128(QuantType t, Epilogue e);          // 128 x 128 x 128, cooperative
TileOps Tile64x128(QuantType t, Epilogue e);           // 64 x 128 x 128, ping-pong (few rows)
TileOps Tile64x128Half(Epilogue e);                    // FP16: 64 x 128 x 64, ping-pong
TileOps Tile128x128PingPong(QuantType t, Epilogue e);  // 128 x 128 x 128, ping-pong
TileOps Tile128x128PingPongHalf(Epilogue e);           // FP16: 128 x 128 x 64, ping-pong
// 128 x 128 x 128, ping-pong, clusters of two CTAs along M sharing the weight tile (TMA multicast).
TileOps Tile128x128PingPongCluster2(QuantType t, Epilogue e);
// 128 x 128 x 128, ping-pong, clusters of two CTAs along M, the epilogue from the accumulator
// registers (qgemm_register_epilogue.cuh) run by each warpgroup without waiting for the other's
// (qgemm_overlap_pingpong.cuh).
TileOps Tile128x128PingPongCluster2Overlap(QuantType t, Epilogue e);
// 128 x 128 x 128, ping-pong with overlapped register epilogues, in clusters of N / 128 CTAs
// along N: the residual Linear with the LayerNorm after it (kBiasResidualLayerNorm only).
TileOps Tile128x128LayerNorm(QuantType t, Epilogue e);

}  // namespace surge::engine::cuda::qgemm
