// ThreadPool (engine/cpu/thread_pool.h): every item exactly once, the static split's ranges,
// the thread indices, and the ordering contract, over thousands of random back-to-back
// operations in both modes, with pauses that send the workers (and the caller at the barrier)
// past the spin into the blocking wait. Plain (non-atomic) writes throughout, so a build with
// -fsanitize=thread also checks the happens-before edges the contract promises.
#include "engine/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

namespace pinfer {
namespace {

struct Call {
  int64_t begin, end;
  int thread;
};

// One operation's record: calls per thread, each thread's list in its own vector (only that
// thread writes it).
struct Record {
  explicit Record(int threads) : calls(static_cast<size_t>(threads)) {}
  std::vector<std::vector<Call>> calls;
};

void CheckOperation(ThreadPool& pool, std::mt19937& rng, bool dynamic, int64_t n, int64_t grain,
                    int op) {
  // Items the caller sets before the operation; fn copies them (checks caller -> fn ordering)
  // and counts its visits (checks exactly once and fn -> caller ordering).
  std::vector<int64_t> input(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) input[static_cast<size_t>(i)] = i * 7 + op;
  std::vector<int64_t> copied(input.size(), -1);
  std::vector<int> visits(input.size(), 0);
  Record record(pool.size());
  const bool slow_thread = rng() % 16 == 0;  // one thread sleeps: the caller blocks at the barrier
  const int slow = static_cast<int>(rng() % static_cast<unsigned>(pool.size()));
  auto fn = [&](int64_t begin, int64_t end, int thread) {
    ASSERT_GE(thread, 0);
    ASSERT_LT(thread, pool.size());
    record.calls[static_cast<size_t>(thread)].push_back({begin, end, thread});
    if (slow_thread && thread == slow) std::this_thread::sleep_for(std::chrono::microseconds(200));
    for (int64_t i = begin; i < end; ++i) {
      copied[static_cast<size_t>(i)] = input[static_cast<size_t>(i)];
      ++visits[static_cast<size_t>(i)];
    }
  };
  if (dynamic) {
    pool.ParallelForDynamic(n, fn, grain);
  } else {
    pool.ParallelFor(n, fn, grain);
  }
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(visits[static_cast<size_t>(i)], 1) << "item " << i << " of " << n << ", op " << op;
    ASSERT_EQ(copied[static_cast<size_t>(i)], input[static_cast<size_t>(i)]) << "item " << i;
  }
  int64_t calls = 0;
  for (int t = 0; t < pool.size(); ++t) {
    for (const Call& c : record.calls[static_cast<size_t>(t)]) {
      ASSERT_LT(c.begin, c.end);
      ASSERT_EQ(c.thread, t);
      ++calls;
    }
  }
  if (n <= 0) {
    EXPECT_EQ(calls, 0);
    return;
  }
  const int64_t g = grain <= 0 ? 1 : grain;
  if (pool.size() == 1 || (grain > 0 && n <= grain) || (!dynamic && n <= g)) {
    // Run inline by the caller, one call.
    ASSERT_EQ(record.calls[0].size(), 1u);
    EXPECT_EQ(record.calls[0][0].begin, 0);
    EXPECT_EQ(record.calls[0][0].end, n);
    return;
  }
  if (!dynamic) {
    // Exactly the even split: thread t has one call with its range, or none when it is empty.
    for (int t = 0; t < pool.size(); ++t) {
      int64_t b, e;
      ThreadPool::StaticRange(n, g, t, pool.size(), &b, &e);
      const std::vector<Call>& got = record.calls[static_cast<size_t>(t)];
      if (b == e) {
        EXPECT_TRUE(got.empty()) << "thread " << t;
      } else {
        ASSERT_EQ(got.size(), 1u) << "thread " << t;
        EXPECT_EQ(got[0].begin, b);
        EXPECT_EQ(got[0].end, e);
        EXPECT_EQ(b % g, 0);
      }
    }
  } else if (grain > 0) {  // chunks of the grain, the last one short
    for (const std::vector<Call>& list : record.calls) {
      for (const Call& c : list) {
        EXPECT_EQ(c.begin % grain, 0);
        EXPECT_EQ(c.end, std::min(n, c.begin + grain));
      }
    }
  }
}

TEST(ThreadPoolTest, RandomOperationsEveryItemOnce) {
  std::mt19937 rng(20261203);
  for (int threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.size(), threads);
    for (int op = 0; op < 1500; ++op) {
      const int shape = static_cast<int>(rng() % 4);
      // Mostly small n (n < threads, single grains), some large.
      const int64_t n = shape == 0   ? static_cast<int64_t>(rng() % 9)
                        : shape == 1 ? static_cast<int64_t>(rng() % 100)
                                     : static_cast<int64_t>(rng() % 5000);
      const int64_t grain = rng() % 3 == 0 ? 0 : static_cast<int64_t>(rng() % 64) + 1;
      const bool dynamic = rng() % 2 == 0;
      CheckOperation(pool, rng, dynamic, n, grain, op);
      if (::testing::Test::HasFatalFailure()) return;
      // Now and then a pause past the spin: the workers block and must be woken.
      if (rng() % 64 == 0) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(3 * ThreadPool::kSpinNanos));
      }
    }
  }
}

TEST(ThreadPoolTest, StaticRangeIsEvenAndCoversAll) {
  for (int64_t n : {0, 1, 5, 63, 64, 65, 1000, 11008}) {
    for (int64_t grain : {1, 8, 32}) {
      for (int t : {1, 2, 3, 5, 16}) {
        int64_t prev_end = 0;
        const int64_t units = (n + grain - 1) / grain;
        for (int i = 0; i < t; ++i) {
          int64_t b, e;
          ThreadPool::StaticRange(n, grain, i, t, &b, &e);
          EXPECT_EQ(b, prev_end);
          EXPECT_LE(b, e);
          // Units per thread differ by one at most.
          const int64_t u = (std::min(n, e) - b + grain - 1) / grain;
          EXPECT_GE(u, units / t - (e == n ? 1 : 0));
          EXPECT_LE(u, units / t + 1);
          prev_end = e;
        }
        EXPECT_EQ(prev_end, n);
      }
    }
  }
}

TEST(ThreadPoolTest, FewerItemsThanThreadsCallsOnlyThoseThreads) {
  ThreadPool pool(6);
  std::vector<int> calls(6, 0);
  pool.ParallelFor(3, [&](int64_t begin, int64_t end, int thread) {
    EXPECT_EQ(end - begin, 1);
    ++calls[static_cast<size_t>(thread)];
  });
  EXPECT_EQ(calls[0] + calls[1] + calls[2] + calls[3] + calls[4] + calls[5], 3);
  // u = 3 units over 6 threads: [3i/6, 3(i+1)/6) is non-empty for i = 1, 3, 5.
  EXPECT_EQ(calls[1], 1);
  EXPECT_EQ(calls[3], 1);
  EXPECT_EQ(calls[5], 1);
}

TEST(ThreadPoolTest, OversubscribedPoolAfterLongIdle) {
  // More threads than the machine has cores, idle long enough that every worker blocks.
  ThreadPool pool(3 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  for (int round = 0; round < 5; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<int64_t> sums(static_cast<size_t>(pool.size()), 0);
    pool.ParallelFor(100000, [&](int64_t begin, int64_t end, int thread) {
      for (int64_t i = begin; i < end; ++i) sums[static_cast<size_t>(thread)] += i;
    });
    int64_t total = 0;
    for (int64_t s : sums) total += s;
    EXPECT_EQ(total, int64_t{100000} * 99999 / 2);
  }
}

TEST(ThreadPoolTest, DestroyedWhileWorkersSleepOrSpin) {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(1 + i % 4);
    int64_t count = 0;
    pool.ParallelFor(1, [&](int64_t, int64_t, int) { ++count; });
    EXPECT_EQ(count, 1);
    if (i % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace
}  // namespace pinfer
