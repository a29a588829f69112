// A fixed pool of worker threads for the data-parallel loops of the forward pass.
//
// Workers are started once and live as long as the pool. Between operations they wait on an
// atomic generation counter: they spin on it for a bounded time (kSpinNanos, with the CPU's
// pause hint), then block in std::atomic::wait (a futex on Linux), so an idle pool, or one on
// an oversubscribed machine, does not hold a core. An operation bumps the generation (and wakes
// sleepers only when some are asleep), the caller runs its own share as thread 0, and waits at
// one barrier: an atomic count of the workers that finished, on which it spins for the same
// bounded time before blocking the same way.
//
// Contract:
//  - Ordering: every write the caller made before ParallelFor* happens-before every call of fn;
//    every write made by any call of fn happens-before ParallelFor* returns (release/acquire on
//    the generation and on the finished count). Calls of fn on different threads run
//    concurrently; they must not write the same memory.
//  - Each item of [0, n) is passed to exactly one call of fn, once. fn(begin, end, thread)
//    sees begin < end; thread < size() names the calling thread for the duration of the
//    operation (per-thread scratch, cpu_workspace.h); thread 0 is the caller.
//  - Not reentrant, not thread-safe: one operation at a time, started by one thread; fn must not
//    call into the same pool, and must not throw.
//  - n <= 0 returns at once; when the work is a single grain (or the pool has one thread) the
//    caller runs fn(0, n, 0) itself and no worker is woken. With fewer grains than threads the
//    threads past the last grain get no call.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace pinfer {

class ThreadPool {
 public:
  // fn(begin, end, thread_index): processes items [begin, end); thread_index < size().
  using RangeFn = std::function<void(int64_t begin, int64_t end, int thread_index)>;

  // How long a worker (or the caller at the barrier) spins before blocking, in nanoseconds:
  // longer than the serial work between two operations of a decode step, far shorter than a
  // scheduler time slice.
  static constexpr int64_t kSpinNanos = 50'000;

  // n_threads counts the calling thread; 0 means the machine's hardware threads.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Even static split: with u = ceil(n / grain) units of `grain` items (0 means 1), thread i
  // gets units [u*i/T, u*(i+1)/T) of T = size(), as one call of fn (the last range ends at n).
  // For items of equal cost (matrix rows, row groups, tokens of element-wise work).
  void ParallelFor(int64_t n, const RangeFn& fn, int64_t grain = 0);

  // Dynamic chunks: threads take chunks of `grain` items (0: about 4 chunks per thread) from a
  // shared counter until none are left, fn called once per chunk. For items of uneven cost
  // (attention over sequences of different lengths) or threads of uneven speed.
  void ParallelForDynamic(int64_t n, const RangeFn& fn, int64_t grain = 0);

  // The even split's range of thread i of t over n items in units of grain (for callers that
  // split work of their own: a static ParallelFor over size() items, one per thread).
  static void StaticRange(int64_t n, int64_t grain, int i, int t, int64_t* begin, int64_t* end);

 private:
  enum class Mode : uint8_t { kStatic, kDynamic };
  void Run(int64_t n, const RangeFn& fn, int64_t grain, Mode mode);
  void WorkerLoop(int index);
  void RunShare(int thread_index);

  const int n_threads_;
  std::vector<std::thread> workers_;

  // The operation in flight: written by the caller before the generation bump, read by the
  // workers after they see it (read-only while the operation runs).
  struct alignas(64) Job {
    const RangeFn* fn = nullptr;
    int64_t n = 0, grain = 1;
    Mode mode = Mode::kStatic;
    bool stop = false;
  } job_;
  // Each counter on its own cache line: the workers poll generation_, bump finished_, and (in
  // the dynamic mode) take chunks from next_; none of them shares a line with another.
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int32_t> sleeping_workers_{0};  // workers blocked on generation_
  alignas(64) std::atomic<uint32_t> finished_{0};         // workers done with this operation
  alignas(64) std::atomic<uint32_t> caller_sleeping_{0};  // the caller blocked on finished_
  alignas(64) std::atomic<int64_t> next_{0};              // the dynamic mode's next item
};

}  // namespace pinfer
