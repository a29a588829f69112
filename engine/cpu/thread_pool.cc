#include "engine/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "engine/memory/cpu_workspace_layout.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace pinfer {
namespace {

// The CPU's spin-wait hint: lets the sibling hyperthread run and saves power while polling.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

// Spins until pred() holds or kSpinNanos pass; returns whether pred() held.
template <typename Pred>
bool SpinFor(Pred pred) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point until = Clock::now() + std::chrono::nanoseconds(ThreadPool::kSpinNanos);
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (pred()) return true;
      CpuRelax();
    }
    if (Clock::now() >= until) return pred();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(ResolveThreads(n_threads)) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  job_.stop = true;
  generation_.fetch_add(1, std::memory_order_seq_cst);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::StaticRange(int64_t n, int64_t grain, int i, int t, int64_t* begin, int64_t* end) {
  const int64_t units = (n + grain - 1) / grain;
  *begin = std::min(n, units * i / t * grain);
  *end = std::min(n, units * (i + 1) / t * grain);
}

void ThreadPool::RunShare(int thread_index) {
  const RangeFn& fn = *job_.fn;
  const int64_t n = job_.n, grain = job_.grain;
  if (job_.mode == Mode::kStatic) {
    int64_t begin, end;
    StaticRange(n, grain, thread_index, n_threads_, &begin, &end);
    if (begin < end) fn(begin, end, thread_index);
    return;
  }
  for (;;) {
    const int64_t begin = next_.fetch_add(grain, std::memory_order_relaxed);
    if (begin >= n) return;
    fn(begin, std::min(n, begin + grain), thread_index);
  }
}

void ThreadPool::WorkerLoop(int index) {
  uint32_t seen = 0;
  const uint32_t n_workers = static_cast<uint32_t>(n_threads_ - 1);
  for (;;) {
    // Wait for the next generation: spin a while, then block. The sleeping count is raised
    // (seq_cst) before the blocking wait re-reads the generation, and the caller bumps the
    // generation (seq_cst) before it reads the count, so either the caller sees a sleeper and
    // notifies or this wait sees the new generation: no lost wake-up.
    if (!SpinFor([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      sleeping_workers_.fetch_add(1, std::memory_order_seq_cst);
      while (generation_.load(std::memory_order_seq_cst) == seen) {
        generation_.wait(seen, std::memory_order_seq_cst);
      }
      sleeping_workers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (job_.stop) return;
    RunShare(index);
    // The barrier: the last worker to finish wakes the caller if it went to sleep (the same
    // seq_cst pairing as above, on finished_ and caller_sleeping_).
    if (finished_.fetch_add(1, std::memory_order_seq_cst) + 1 == n_workers &&
        caller_sleeping_.load(std::memory_order_seq_cst) != 0) {
      finished_.notify_one();
    }
  }
}

void ThreadPool::Run(int64_t n, const RangeFn& fn, int64_t grain, Mode mode) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  job_.fn = &fn;
  job_.n = n;
  job_.grain = grain;
  job_.mode = mode;
  next_.store(0, std::memory_order_relaxed);
  finished_.store(0, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);  // publishes the job (release)
  if (sleeping_workers_.load(std::memory_order_seq_cst) != 0) generation_.notify_all();
  RunShare(0);
  const uint32_t n_workers = static_cast<uint32_t>(n_threads_ - 1);
  if (!SpinFor([&] { return finished_.load(std::memory_order_acquire) == n_workers; })) {
    caller_sleeping_.store(1, std::memory_order_seq_cst);
    for (uint32_t done; (done = finished_.load(std::memory_order_seq_cst)) != n_workers;) {
      finished_.wait(done, std::memory_order_seq_cst);
    }
    caller_sleeping_.store(0, std::memory_order_relaxed);
  }
  job_.fn = nullptr;
}

void ThreadPool::ParallelFor(int64_t n, const RangeFn& fn, int64_t grain) {
  Run(n, fn, std::max<int64_t>(1, grain), Mode::kStatic);
}

void ThreadPool::ParallelForDynamic(int64_t n, const RangeFn& fn, int64_t grain) {
  if (grain <= 0) grain = std::max<int64_t>(1, n / (4 * static_cast<int64_t>(n_threads_)));
  Run(n, fn, grain, Mode::kDynamic);
}

}  // namespace pinfer
