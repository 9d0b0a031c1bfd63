#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>

namespace surge {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0)
    num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = num_threads;
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::WorkerLoop(int) {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    while (next_chunk_ < num_chunks_) {
      int64_t c = next_chunk_++;
      const auto* job = job_;
      int64_t b = c * job_chunk_, e = std::min(job_n_, b + job_chunk_);
      ++active_;
      lock.unlock();
      (*job)(b, e);
      lock.lock();
      --active_;
    }
    if (active_ == 0) done_cv_.notify_all();
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (num_threads_ == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  int64_t max_chunks = static_cast<int64_t>(num_threads_) * 4;
  int64_t chunk = std::max(grain, (n + max_chunks - 1) / max_chunks);
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  next_chunk_ = 0;
  num_chunks_ = (n + chunk - 1) / chunk;
  ++generation_;
  cv_.notify_all();
  while (next_chunk_ < num_chunks_) {
    int64_t c = next_chunk_++;
    int64_t b = c * chunk, e = std::min(n, b + chunk);
    ++active_;
    lock.unlock();
    fn(b, e);
    lock.lock();
    --active_;
  }
  done_cv_.wait(lock, [&] { return active_ == 0 && next_chunk_ >= num_chunks_; });
  job_ = nullptr;
}

namespace {
std::unique_ptr<ThreadPool>& DefaultPoolSlot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
std::mutex& DefaultPoolMutex() {
  static std::mutex mu;
  return mu;
}
}  // namespace

ThreadPool& DefaultThreadPool() {
  std::lock_guard<std::mutex> lock(DefaultPoolMutex());
  auto& slot = DefaultPoolSlot();
  if (!slot) {
    int n = 0;
    if (const char* env = std::getenv("SURGE_NUM_THREADS")) n = std::atoi(env);
    slot = std::make_unique<ThreadPool>(n);
  }
  return *slot;
}

void SetDefaultThreadCount(int n) {
  std::lock_guard<std::mutex> lock(DefaultPoolMutex());
  DefaultPoolSlot() = std::make_unique<ThreadPool>(n);
}

}  // namespace surge
