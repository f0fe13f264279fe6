// Jobs a second of the CPU backend's ThreadPool at the decode pattern: short
// jobs (64 tasks of ~100 ns), one after another, with `busy` other threads
// spinning beside it on the same cores (a neighbour process, or other
// engines). Measures how long a job takes when the pool's workers are not
// all scheduled; no GPU needed.
//
// Run: build-local/bench/thread_pool_bench
#include <benchmark/benchmark.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "engine/backend/cpu/thread_pool.h"

namespace minfer {
namespace {

void BM_ShortJobs(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int busy = static_cast<int>(state.range(1));
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (int i = 0; i < busy; ++i) {
    spinners.emplace_back([&] {
      volatile double x = 1.0;
      while (!stop.load(std::memory_order_relaxed)) x = std::sqrt(x + 1.0);
    });
  }
  ThreadPool pool(threads);
  std::vector<float> out(64);
  for (auto _ : state) {
    pool.run(64, [&](int64_t task, int) {
      float v = static_cast<float>(task);
      for (int k = 0; k < 50; ++k) v = v * 0.999f + 1.0f;
      out[static_cast<size_t>(task)] = v;
    });
    benchmark::DoNotOptimize(out.data());
  }
  stop = true;
  for (std::thread& t : spinners) t.join();
  state.SetItemsProcessed(state.iterations());
}

// {pool threads, busy threads}: the pool alone, then beside one and two spinners.
BENCHMARK(BM_ShortJobs)->Args({2, 0})->Args({2, 1})->Args({2, 2})->Args({4, 0})->Args({4, 2})->UseRealTime();

}  // namespace
}  // namespace minfer

BENCHMARK_MAIN();
