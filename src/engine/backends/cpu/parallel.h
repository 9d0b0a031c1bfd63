// Parallel loops for the CPU backend's own kernels, on the same threads oneDNN uses. Debian's
// oneDNN runs on OpenMP, so with two thread pools (OpenMP's team and core/ThreadPool) each would
// spin on the cores the other needs; instead both oneDNN and these loops use the OpenMP team.
// Builds whose oneDNN has another runtime fall back to core/ThreadPool.
//
// Waiting: libgomp reads OMP_WAIT_POLICY / GOMP_SPINCOUNT once, when it is loaded, so a library
// cannot change them. By default its idle threads spin between parallel regions; on a machine
// shared with other busy processes that spinning costs 2-5x CPU time per batch (measured: BERT-base
// 1x32 on 2 loaded cores, 455-680 ms of process CPU per batch spinning vs 65 ms with
// OMP_WAIT_POLICY=passive). Processes that share their cores should start with
// OMP_WAIT_POLICY=passive; a dedicated machine gains a little latency from the default.
#pragma once

#include <cstdint>
#include <functional>

namespace surge::engine::cpu {

// Threads the backend uses (0 → all cores); applies to these loops and to oneDNN primitives
// executed afterwards on the calling thread.
void SetNumThreads(int n);
int NumThreads();

// Calls fn(begin, end) on disjoint ranges covering [0, n), each at least `grain` long except
// maybe the last; returns when all are done. Nested calls run serially.
void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace surge::engine::cpu
