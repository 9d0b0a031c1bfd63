// A fixed-size thread pool for data-parallel kernels. ParallelFor splits [0, n) into chunks run on
// the pool's workers plus the calling thread and returns when all are done. One ParallelFor at a
// time per pool (calls from several threads are serialised). Submit runs a task asynchronously.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace surge {

class ThreadPool {
 public:
  // num_threads counts the caller: a pool of 2 starts one worker. 0 → hardware concurrency.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n), in chunks of at least `grain`.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // serialises ParallelFor callers
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunk_ = 0;
  int64_t next_chunk_ = 0;
  int64_t num_chunks_ = 0;
  int active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

// The process-wide pool used by kernels (size from SURGE_NUM_THREADS or hardware concurrency).
ThreadPool& DefaultThreadPool();
// Recreates the default pool with `n` threads; call before running any engine.
void SetDefaultThreadCount(int n);

}  // namespace surge
