#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "engine/backend/cpu/thread_pool.h"

namespace minfer {
namespace {

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> bad_thread{0};
      pool.run(n, [&](int64_t task, int thread) {
        hits[static_cast<size_t>(task)].fetch_add(1);
        if (thread < 0 || thread >= threads) bad_thread = 1;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << threads << " " << n;
      EXPECT_EQ(bad_thread.load(), 0);
    }
  }
}

TEST(ThreadPool, ManyShortJobsInARowSeeEachOthersWrites) {
  // The decode pattern: thousands of tiny jobs, each reading what the last
  // one wrote. Double-buffered: job r writes b[i] = a[(i + 1) % n] + 1 from the
  // other buffer, so after R jobs every element is exactly R.
  ThreadPool pool(3);
  constexpr int kN = 64, kRounds = 1000;
  std::vector<int64_t> a(kN, 0), b(kN, 0);
  for (int round = 0; round < kRounds; ++round) {
    std::vector<int64_t>& src = round % 2 ? b : a;
    std::vector<int64_t>& dst = round % 2 ? a : b;
    pool.run(kN, [&](int64_t i, int) { dst[static_cast<size_t>(i)] = src[static_cast<size_t>((i + 1) % kN)] + 1; });
  }
  const std::vector<int64_t>& last = kRounds % 2 ? b : a;
  for (int64_t v : last) EXPECT_EQ(v, kRounds);
}

// Pools that share the cores with more threads than there are cores (here
// six pools of four on the machine's cores, as several engines in one
// process or a busy neighbour make them): a worker may be scheduled long
// after its job was published, or join a later job. Every job still runs
// each task once, on a thread of its pool, and sees the last job's writes.
TEST(ThreadPool, PoolsSharingTheCoresKeepEveryJobExact) {
  constexpr int kPools = 6, kThreads = 4, kN = 37, kRounds = 1500;
  std::vector<int> failures(kPools, 0);
  std::vector<std::thread> drivers;
  for (int p = 0; p < kPools; ++p) {
    drivers.emplace_back([&, p] {
      ThreadPool pool(kThreads);
      std::vector<int64_t> a(kN, 0), b(kN, 0);
      std::vector<std::atomic<int>> hits(kN);
      for (int round = 0; round < kRounds; ++round) {
        std::vector<int64_t>& src = round % 2 ? b : a;
        std::vector<int64_t>& dst = round % 2 ? a : b;
        for (std::atomic<int>& h : hits) h.store(0, std::memory_order_relaxed);
        const int64_t n = 1 + round % kN;  // jobs of every size, down to one task
        pool.run(n, [&](int64_t i, int thread) {
          hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
          if (thread < 0 || thread >= kThreads) failures[static_cast<size_t>(p)] = 1;
          dst[static_cast<size_t>(i)] = src[static_cast<size_t>(i)] + 1;
        });
        for (int64_t i = 0; i < n; ++i) {
          if (hits[static_cast<size_t>(i)].load(std::memory_order_relaxed) != 1) failures[static_cast<size_t>(p)] = 2;
        }
        for (int64_t i = n; i < kN; ++i) dst[static_cast<size_t>(i)] = src[static_cast<size_t>(i)];
        for (int64_t i = 0; i < kN; ++i) {
          // Element i was incremented by the rounds whose jobs reached it.
          int64_t expected = 0;
          for (int r = 0; r <= round; ++r) expected += i < 1 + r % kN ? 1 : 0;
          if (dst[static_cast<size_t>(i)] != expected) failures[static_cast<size_t>(p)] = 3;
        }
      }
    });
  }
  for (std::thread& t : drivers) t.join();
  for (int p = 0; p < kPools; ++p) EXPECT_EQ(failures[static_cast<size_t>(p)], 0) << "pool " << p;
}

}  // namespace
}  // namespace minfer
