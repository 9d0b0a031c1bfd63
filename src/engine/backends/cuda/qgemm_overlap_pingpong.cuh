// A ping-pong GEMM kernel whose two consumer warpgroups take turns on the tensor cores only: each
// runs its tile's epilogue as soon as its K loop is done, while the other multiplies or runs its
// own epilogue.
//
// CUTLASS's ping-pong kernel orders the epilogues as well as the K loops (the two warpgroups share
// its TMA epilogue's shared memory), so where a tile's epilogue E takes longer than its K loop M
// (FFN1 at K = 768: E about 1.35 M, docs/perf.md) a pair of tiles takes 2 E and the tensor cores
// wait. With epilogues that need no shared state (the register epilogue of
// qgemm_register_epilogue.cuh: a private staging area per warp), nothing orders them, and a pair
// takes max(2 M, M + E).
//
// The kernel reuses everything of CUTLASS's ping-pong GemmUniversal (arguments, parameters,
// shared storage, grid, collectives) and replaces its device body: one producer warp loading the
// mainloop's tiles, the static persistent tile scheduler, two consumer warpgroups ordered by a
// one-stage sequence barrier around their K loops.
//
// With kRowGroups it takes its own tile order instead (RowGroupScheduler): launched in clusters of
// N / 128 CTAs (RowGroupGemm, qgemm_layer_norm_epilogue.cuh), CTA c of a cluster takes column tile
// c of the cluster's row tiles, so that a row tile's column tiles run at the same time on CTAs
// the hardware schedules together, and the LayerNorm epilogue can exchange its rows' statistics
// among them. The mainloop is CUTLASS's for one CTA (each CTA loads the row tile's A itself:
// multicasting it across the cluster measured no faster, docs/perf.md), its pipeline made as for
// a cluster of N / 128 along M, so that every CTA's consumers release each stage in all of them:
// the stage-release arrivals of a one-CTA pipeline would go to the cluster's first CTA.
#pragma once

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include <cute/tensor.hpp>
#include <cutlass/pipeline/pipeline.hpp>

namespace surge::engine::cuda::qgemm {

// The tiles of one CTA in a grid of clusters of `n_blocks` CTAs along x (one per 128-column tile;
// as many clusters as run at once, at most one a row tile: RowGroupGemm): CTA c of cluster g takes
// column tile c of row tiles g, g + clusters, g + 2 clusters, ... The CUTLASS static scheduler's
// interface, as OverlapPingPong uses it.
class RowGroupScheduler {
 public:
  struct Work {
    int32_t M_idx = 0, N_idx = 0, L_idx = 0;
    bool valid = false;
    CUTLASS_DEVICE bool is_valid() const { return valid; }
  };
  CUTLASS_DEVICE RowGroupScheduler(int m_blocks, int n_blocks)
      : m_blocks_(m_blocks),
        groups_(static_cast<int>(gridDim.x) / n_blocks),
        n_(static_cast<int>(blockIdx.x) % n_blocks),
        m_(static_cast<int>(blockIdx.x) / n_blocks) {}
  template <class ClusterShape>
  CUTLASS_DEVICE Work initial_work_tile_info(ClusterShape) const {
    return get_current_work();
  }
  CUTLASS_DEVICE void advance_to_next_work(int count = 1) { m_ += count * groups_; }
  CUTLASS_DEVICE Work get_current_work() const { return Work{m_, n_, 0, m_ < m_blocks_}; }
  CUTLASS_DEVICE bool is_last_tile(Work const&, int count = 1) const {
    return m_ + count * groups_ >= m_blocks_;
  }

 private:
  int m_blocks_, groups_, n_, m_;
};

template <class Base, bool kRowGroups = false>
class OverlapPingPong : public Base {
 public:
  using typename Base::Params;
  using typename Base::SharedStorage;

  CUTLASS_DEVICE void operator()(Params const& params, char* smem_buf) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using namespace cute;
    using CollectiveMainloop = typename Base::CollectiveMainloop;
    using CollectiveEpilogue = typename Base::CollectiveEpilogue;
    using TileScheduler = typename Base::TileScheduler;
    using ClusterShape = typename Base::ClusterShape;
    using TileShape = typename Base::TileShape;
    using TiledMma = typename Base::TiledMma;
    using MainloopPipeline = typename CollectiveMainloop::MainloopPipeline;
    using PipelineState = typename CollectiveMainloop::PipelineState;
    using MmaOrder = cutlass::OrderedSequenceBarrier<1, 2>;
    static_assert(!Base::IsSchedDynamicPersistent && !Base::IsMainloopAuxiliaryLoadNeeded,
                  "the static persistent scheduler and two-operand mainloops only");
    constexpr int kConsumers = 2, kWarpGroupThreads = 128;

    SharedStorage& shared = *reinterpret_cast<SharedStorage*>(smem_buf);
    static_assert(
        sizeof(typename MmaOrder::SharedStorage) <= sizeof(shared.pipelines.math_wg_order),
        "the K-loop order barrier lives in the ping-pong kernel's order-barrier storage");
    const int thread_idx = static_cast<int>(threadIdx.x);
    const int lane_idx = cutlass::canonical_lane_idx();
    const int warp_idx = cutlass::canonical_warp_idx_sync();
    const int warp_group = cutlass::canonical_warp_group_idx();  // 0 loads, 1 and 2 multiply
    const int group_thread = thread_idx % kWarpGroupThreads;
    const bool producer_warp = warp_group == 0 && warp_idx == 0;
    const int lane_predicate = cute::elect_one_sync();
    const uint32_t block_rank_in_cluster = cute::block_rank_in_cluster();

    if (warp_idx == 0 && lane_predicate) {
      CollectiveMainloop::prefetch_tma_descriptors(params.mainloop);
    }

    typename MainloopPipeline::Params pipe;
    if (producer_warp) pipe.role = MainloopPipeline::ThreadCategory::Producer;
    if (warp_group != 0) pipe.role = MainloopPipeline::ThreadCategory::Consumer;
    pipe.is_leader = group_thread == 0;
    pipe.num_consumers = kWarpGroupThreads;
    pipe.num_producers = Base::NumProducerThreads;
    pipe.transaction_bytes = params.mainloop.tma_transaction_bytes;
    const int n_blocks = static_cast<int>(cute::get<1>(params.problem_shape)) / 128;
    auto pipeline_cluster = [&] {
      if constexpr (kRowGroups) {
        return make_shape(n_blocks, 1, 1);
      } else {
        return ClusterShape{};
      }
    };
    MainloopPipeline mainloop_pipeline(shared.pipelines.mainloop, pipe, pipeline_cluster());

    typename MmaOrder::Params order_params;
    order_params.group_id = static_cast<uint32_t>(warp_group > 0 ? warp_group - 1 : 0);
    order_params.group_size = kWarpGroupThreads;
    MmaOrder mma_order(
        *reinterpret_cast<typename MmaOrder::SharedStorage*>(&shared.pipelines.math_wg_order),
        order_params);

    CollectiveEpilogue epilogue(params.epilogue, shared.tensors.epilogue);
    // An epilogue with shared state of its own sets it up here (LayerNormEpilogue).
    constexpr bool kEpilogueInit = requires {
      epilogue.init_shared(params.problem_shape, thread_idx, smem_buf);
    };
    if constexpr (kEpilogueInit) {
      epilogue.init_shared(params.problem_shape, thread_idx,
                           reinterpret_cast<char*>(&shared.tensors.epilogue));
    }

    // The barriers' initialisation visible to every thread (and every CTA of the cluster), and
    // what the epilogue stored (a releasing arrival).
    if constexpr (kEpilogueInit) {
      static_assert(kRowGroups, "an epilogue's shared state is set up in row-group kernels only");
      cute::cluster_arrive();
      cute::cluster_wait();
    } else if constexpr (kRowGroups || size(ClusterShape{}) > 1) {
      cute::cluster_arrive_relaxed();
      cute::cluster_wait();
    } else {
      __syncthreads();
    }

    auto problem = append<4>(params.problem_shape, Int<1>{});
    TiledMma tiled_mma;
    auto blk_shape = TileShape{};
    CollectiveMainloop mainloop;
    auto load_inputs = mainloop.load_init(problem, params.mainloop);
    Tensor gA_mkl = get<0>(load_inputs);
    Tensor gB_nkl = get<1>(load_inputs);
    auto k_tile_count = size<3>(gA_mkl);

    auto make_scheduler = [&] {
      if constexpr (kRowGroups) {
        return RowGroupScheduler((cute::get<0>(params.problem_shape) + 127) / 128, n_blocks);
      } else {
        return TileScheduler{params.scheduler};
      }
    };
    auto scheduler = make_scheduler();
    PipelineState read_state;
    if (warp_group == 2) {  // the second consumer starts at the CTA's second tile
      scheduler.advance_to_next_work();
      read_state.advance(k_tile_count);
    }
    auto work = scheduler.initial_work_tile_info(ClusterShape{});
    auto block_coord = [&](auto const& w) {
      return make_coord(idx2crd(w.M_idx, shape<2>(gA_mkl)), idx2crd(w.N_idx, shape<2>(gB_nkl)), _,
                        idx2crd(w.L_idx, shape<4>(gB_nkl)));
    };

    if (warp_group == 0) {
      cutlass::arch::warpgroup_reg_dealloc<Base::LoadRegisterRequirement>();
      if (!producer_warp) return;
      cutlass::arch::wait_on_dependent_grids();  // A is the previous kernel's output
      PipelineState write_state = cutlass::make_producer_start_state<MainloopPipeline>();
      while (work.is_valid()) {
        auto k_tile_iter = cute::make_coord_iterator(shape<3>(gA_mkl));
        mainloop.load(params.mainloop, mainloop_pipeline, write_state, load_inputs,
                      block_coord(work), k_tile_iter, k_tile_count, lane_idx,
                      kRowGroups ? 0u : block_rank_in_cluster, shared.tensors.mainloop);
        write_state.advance(k_tile_count);
        scheduler.advance_to_next_work();
        work = scheduler.get_current_work();
      }
      mainloop.load_tail(mainloop_pipeline, write_state);
      return;
    }

    cutlass::arch::warpgroup_reg_alloc<Base::MmaRegisterRequirement>();
    if (!work.is_valid()) {
      cutlass::arch::launch_dependent_grids();
      return;
    }
    while (work.is_valid()) {
      const auto coord = block_coord(work);
      Tensor accumulators = partition_fragment_C(tiled_mma, take<0, 2>(blk_shape));
      // An epilogue that reads its source itself may start fetching it now (LayerNormEpilogue).
      if constexpr (requires { epilogue.prefetch(problem, coord, group_thread, smem_buf); }) {
        epilogue.prefetch(problem, coord, group_thread,
                          reinterpret_cast<char*>(&shared.tensors.epilogue));
      }
      mma_order.wait();  // the other warpgroup's K loop issued
      mainloop.mma(mainloop_pipeline, read_state, accumulators, k_tile_count, group_thread,
                   shared.tensors.mainloop, params.mainloop);
      mma_order.arrive();
      mainloop.mma_tail(mainloop_pipeline, read_state, k_tile_count);
      read_state.advance(k_tile_count * kConsumers);
      if (scheduler.is_last_tile(work, kConsumers)) cutlass::arch::launch_dependent_grids();
      // No turn for the epilogue: it shares nothing with the other warpgroup's.
      epilogue(problem, blk_shape, coord, accumulators, tiled_mma, make_tuple(0, 0, Int<0>{}),
               group_thread, reinterpret_cast<char*>(&shared.tensors.epilogue));
      scheduler.advance_to_next_work(kConsumers);
      work = scheduler.get_current_work();
    }
#endif
  }
};

}  // namespace surge::engine::cuda::qgemm
