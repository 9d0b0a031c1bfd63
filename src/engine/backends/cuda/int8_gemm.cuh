// The INT8 GEMM kernels of int8_gemm_kernels.h, as templates: one instantiation per tile
// configuration and epilogue. Each tile configuration is compiled in its own translation unit
// (int8_gemm_tile*_kernels.cu) so the build runs them in parallel.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/functional.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include <type_traits>

#include "engine/backends/cuda/int8_gemm_kernels.h"
#include "engine/backends/cuda/launch.cuh"

namespace surge::engine::cuda::int8_gemm {

// The epilogues a quantised BERT-class Linear needs: QKV (bias), FFN1 (bias + GELU, FP16 or the
// next layer's INT8 input), attention projection and FFN2 (bias + residual).
enum class Epilogue { kBias, kBiasGelu, kBiasResidual, kBiasGeluInt8 };

// Which epilogue runs `a` (false: none here does).
inline bool EpilogueOf(const Int8GemmArgs& a, Epilogue* e) {
  const bool gelu = a.activation == Activation::kGelu || a.activation == Activation::kGeluTanh;
  if (a.activation != Activation::kNone && !gelu) return false;
  if (a.int8_out) {
    if (!gelu || a.residual != nullptr) return false;
    *e = Epilogue::kBiasGeluInt8;
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

template <class TileShape, Epilogue kEpi>
struct Fusion {
  using Scale = fusion::Sm90RowBroadcast<0, TileShape, float, float>;
  using Bias = fusion::Sm90RowBroadcast<0, TileShape, cutlass::half_t, float>;
  template <class Out>
  using Dequant = fusion::Sm90EVT<fusion::Sm90Compute<cutlass::homogeneous_multiply_add, Out,
                                                      float, kRound>,
                                  Scale, fusion::Sm90AccFetch, Bias>;
  // The tanh form with the hardware tanh (tanh.approx), as cuBLASLt's GELU epilogue: the erf form
  // (erff) took longer than the tile's whole K loop on FFN1 (K = 768).
  template <class Out, class Child>
  using Gelu = fusion::Sm90EVT<
      fusion::Sm90Compute<cutlass::epilogue::thread::GELU_taylor, Out, float, kRound>, Child>;

  static constexpr bool kInt8Out = kEpi == Epilogue::kBiasGeluInt8;
  static constexpr bool kResidual = kEpi == Epilogue::kBiasResidual;
  using ElementD = std::conditional_t<kInt8Out, int8_t, cutlass::half_t>;
  using ElementC = std::conditional_t<kResidual, cutlass::half_t, void>;

  using Evt = std::conditional_t<
      kEpi == Epilogue::kBias, Dequant<cutlass::half_t>,
      std::conditional_t<
          kEpi == Epilogue::kBiasGelu, Gelu<cutlass::half_t, Dequant<float>>,
          std::conditional_t<
              kEpi == Epilogue::kBiasResidual,
              fusion::Sm90EVT<fusion::Sm90Compute<cutlass::plus, cutlass::half_t, float, kRound>,
                              Dequant<float>, fusion::Sm90SrcFetch<cutlass::half_t>>,
              fusion::Sm90EVT<fusion::Sm90Compute<cutlass::multiplies, int8_t, float, kRound>,
                              Gelu<float, Dequant<float>>, fusion::Sm90ScalarBroadcast<float>>>>>;

  static typename Evt::Arguments Args(const Int8GemmArgs& a) {
    using DequantArgs = typename Dequant<float>::Arguments;
    const auto* bias = static_cast<const cutlass::half_t*>(a.bias);
    if constexpr (kEpi == Epilogue::kBias) {
      return {{a.scale}, {}, {bias}, {}};
    } else if constexpr (kEpi == Epilogue::kBiasGelu) {
      return {DequantArgs{{a.scale}, {}, {bias}, {}}, {}};
    } else if constexpr (kEpi == Epilogue::kBiasResidual) {
      return {DequantArgs{{a.scale}, {}, {bias}, {}}, {}, {}};
    } else {
      typename Gelu<float, Dequant<float>>::Arguments gelu{DequantArgs{{a.scale}, {}, {bias}, {}},
                                                           {}};
      return {gelu, {{a.out_inv_scale}}, {}};
    }
  }
};

template <class TileShape, class ClusterShape, class MainSchedule, class EpiSchedule,
          Epilogue kEpi>
struct Kernel {
  using F = Fusion<TileShape, kEpi>;
  using ElementD = typename F::ElementD;
  using ElementC = typename F::ElementC;
  static constexpr int kAlignD = 16 / sizeof(ElementD);

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, int32_t, float, ElementC,
      cutlass::layout::RowMajor, kAlignD, ElementD, cutlass::layout::RowMajor, kAlignD,
      EpiSchedule, typename F::Evt>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, int8_t, cutlass::layout::RowMajor, 16,
      int8_t, cutlass::layout::ColumnMajor, 16, int32_t, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainSchedule>::CollectiveOp;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>,
                                                          CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

  static typename Gemm::Arguments Arguments(const Int8GemmArgs& a, int sm_count) {
    const int m = static_cast<int>(a.m), n = static_cast<int>(a.n), k = static_cast<int>(a.k);
    auto sa = cutlass::make_cute_packed_stride(typename GemmKernel::StrideA{}, make_shape(m, k, 1));
    auto sb = cutlass::make_cute_packed_stride(typename GemmKernel::StrideB{}, make_shape(n, k, 1));
    auto sc = cutlass::make_cute_packed_stride(typename GemmKernel::StrideC{}, make_shape(m, n, 1));
    auto sd = cutlass::make_cute_packed_stride(typename GemmKernel::StrideD{}, make_shape(m, n, 1));
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {m, n, k, 1},
        {static_cast<const int8_t*>(a.x), sa, static_cast<const int8_t*>(a.w), sb},
        {F::Args(a), nullptr, sc, static_cast<ElementD*>(a.y), sd}};
    if constexpr (F::kResidual) {
      args.epilogue.ptr_C = static_cast<const cutlass::half_t*>(a.residual);
    }
    args.hw_info.sm_count = sm_count;
    return args;
  }

  static bool CanImplement(const Int8GemmArgs& a, int sm_count) {
    return Gemm::can_implement(Arguments(a, sm_count)) == cutlass::Status::kSuccess;
  }
  static size_t WorkspaceSize(const Int8GemmArgs& a, int sm_count) {
    return Gemm::get_workspace_size(Arguments(a, sm_count));
  }
  static cudaError_t Run(const Int8GemmArgs& a, int sm_count, void* workspace,
                         cudaStream_t stream) {
    Gemm gemm;
    const auto args = Arguments(a, sm_count);
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

// What a tile translation unit offers: the three calls of the kernel convention for `epi`.
struct TileOps {
  bool (*can_implement)(const Int8GemmArgs&, int sm_count);
  size_t (*workspace_size)(const Int8GemmArgs&, int sm_count);
  cudaError_t (*run)(const Int8GemmArgs&, int sm_count, void*, cudaStream_t);
};

template <class TileShape, class ClusterShape, class MainSchedule, class EpiSchedule>
TileOps OpsFor(Epilogue e) {
  switch (e) {
#define SURGE_INT8_GEMM_CASE(E)                                                     \
  case E: {                                                                         \
    using K = Kernel<TileShape, ClusterShape, MainSchedule, EpiSchedule, E>;        \
    return TileOps{&K::CanImplement, &K::WorkspaceSize, &K::Run};                   \
  }
    SURGE_INT8_GEMM_CASE(Epilogue::kBias)
    SURGE_INT8_GEMM_CASE(Epilogue::kBiasGelu)
    SURGE_INT8_GEMM_CASE(Epilogue::kBiasResidual)
    SURGE_INT8_GEMM_CASE(Epilogue::kBiasGeluInt8)
#undef SURGE_INT8_GEMM_CASE
  }
  return TileOps{};
}

// Defined by the tile translation units.
// Cooperative: the two consumer warpgroups share a tile. Ping-pong: they alternate tiles, so one
// runs its epilogue while the other multiplies (pays on short K, where the epilogue weighs).
TileOps Tile128x128(Epilogue e);         // 128 x 128 x 128, cooperative
TileOps Tile64x128(Epilogue e);          // 64 x 128 x 128, ping-pong (more tiles for few rows)
TileOps Tile128x128PingPong(Epilogue e);  // 128 x 128 x 128, ping-pong
// 128 x 128 x 128, ping-pong, clusters of two CTAs along M sharing the weight tile (TMA multicast).
TileOps Tile128x128PingPongCluster2(Epilogue e);

}  // namespace surge::engine::cuda::int8_gemm
