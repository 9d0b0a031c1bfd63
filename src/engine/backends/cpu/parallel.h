// Parallel loops for the CPU backend's own kernels, on the same threads oneDNN uses. Debian's
// oneDNN runs on OpenMP, so with two thread pools (OpenMP's team and core/ThreadPool) each would
// spin on the cores the other needs; instead both oneDNN and these loops use the OpenMP team.
// Builds whose oneDNN has another runtime fall back to core/ThreadPool.
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
