#include "engine/backend/cpu/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace minfer {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Spin iterations before sleeping: ~50 µs with pause on current x86 cores,
// longer than the gap between two ops of a decode step.
constexpr int kSpinIterations = 20000;

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (n_threads <= 0) n_threads = 1;
  n_threads_ = n_threads;
  workers_.reserve(static_cast<size_t>(n_threads - 1));
  for (int t = 1; t < n_threads; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::work(int thread) {
  int64_t done = 0;  // counted once at the end: one shared write a job, not one a task
  for (;;) {
    const int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks_) break;
    thunk_(ctx_, task, thread);
    ++done;
  }
  if (done > 0) done_tasks_.fetch_add(done, std::memory_order_release);
}

namespace {

// Spins, then yields, until done() holds.
template <class Done>
void wait_until(Done done) {
  int spins = 0;
  while (!done()) {
    if (++spins < kSpinIterations) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace

void ThreadPool::run_impl(int64_t n_tasks, Thunk thunk, void* ctx) {
  if (n_tasks <= 0) return;
  if (workers_.empty() || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) thunk(ctx, t, 0);
    return;
  }
  // The last job is closed and no worker is inside it: its fields are free.
  thunk_ = thunk;
  ctx_ = ctx;
  n_tasks_ = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  done_tasks_.store(0, std::memory_order_relaxed);
  open_.store(true, std::memory_order_seq_cst);  // publishes the job to workers that join
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  work(0);
  // Every task done (a task a worker took is waited for: its results are the caller's) ...
  wait_until([&] { return done_tasks_.load(std::memory_order_acquire) == n_tasks; });
  // ... then closed, and left by every worker that joined. A worker that
  // joins from here on sees it closed and leaves without reading the job.
  open_.store(false, std::memory_order_seq_cst);
  wait_until([&] { return active_workers_.load(std::memory_order_seq_cst) == 0; });
}

void ThreadPool::worker_loop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    int spins = 0;
    while (gen == seen) {
      if (++spins < kSpinIterations) {
        cpu_relax();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
        spins = 0;
      }
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    // Join the job only while it is open (the caller's open_/active_workers_
    // pair and this one, all sequentially consistent: either this worker
    // sees it closed, or the caller sees this worker inside).
    active_workers_.fetch_add(1, std::memory_order_seq_cst);
    if (open_.load(std::memory_order_seq_cst)) work(thread);
    active_workers_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace minfer
