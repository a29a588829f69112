// A fixed pool of worker threads for data-parallel loops in the forward pass.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pinfer {

class ThreadPool {
 public:
  // fn(begin, end, thread_index): processes items [begin, end); thread_index < size().
  using RangeFn = std::function<void(int64_t begin, int64_t end, int thread_index)>;

  // n_threads counts the calling thread; 0 means the machine's hardware threads.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn over [0, n) in chunks of `grain` items (0: about 4 chunks per thread), on all
  // threads including the caller; returns when every item is done. Not reentrant.
  void ParallelFor(int64_t n, const RangeFn& fn, int64_t grain = 0);

 private:
  void WorkerLoop(int index);
  void RunChunks(int thread_index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  int active_ = 0;
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0, grain_ = 1;
  std::atomic<int64_t> next_{0};
};

}  // namespace pinfer
