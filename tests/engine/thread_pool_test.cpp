#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace
}  // namespace minfer
