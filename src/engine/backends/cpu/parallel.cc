#include "engine/backends/cpu/parallel.h"

#include <oneapi/dnnl/dnnl_config.h>

#include <algorithm>
#include <thread>

#include "core/thread_pool.h"

#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP && defined(_OPENMP)
#include <omp.h>
#define SURGE_CPU_OMP 1
#else
#define SURGE_CPU_OMP 0
#endif

namespace surge::engine::cpu {
namespace {

int HardwareThreads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Per calling thread, as OpenMP's own setting is.
thread_local int tls_num_threads = 0;

}  // namespace

void SetNumThreads(int n) {
  tls_num_threads = n > 0 ? n : HardwareThreads();
#if SURGE_CPU_OMP
  omp_set_num_threads(tls_num_threads);
#endif
}

int NumThreads() { return tls_num_threads > 0 ? tls_num_threads : HardwareThreads(); }

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int threads = NumThreads();
  if (threads <= 1 || n <= grain) {
    fn(0, n);
    return;
  }
#if SURGE_CPU_OMP
  if (omp_in_parallel()) {
    fn(0, n);
    return;
  }
  // Static split into one contiguous range per thread, rounded to the grain: the kernels' work
  // items are uniform, and a static schedule lets each thread stream its own range.
  const int64_t chunks = (n + grain - 1) / grain;
  const int team = static_cast<int>(std::min<int64_t>(threads, chunks));
#pragma omp parallel num_threads(team)
  {
    const int t = omp_get_thread_num();
    const int nt = omp_get_num_threads();
    const int64_t c0 = chunks * t / nt, c1 = chunks * (t + 1) / nt;
    const int64_t b = c0 * grain, e = std::min(n, c1 * grain);
    if (b < e) fn(b, e);
  }
#else
  DefaultThreadPool().ParallelFor(n, grain, fn);
#endif
}

}  // namespace surge::engine::cpu
