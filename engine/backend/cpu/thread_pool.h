// A fixed pool of worker threads for the CPU backend's data-parallel ops
// (and the CUDA backend's weight repacking at upload).
//
// run(n_tasks, fn) hands task indices out through one atomic counter; the
// calling thread works too, so a pool of N threads has N-1 workers. Workers
// spin briefly on the job generation before sleeping in atomic::wait: a
// decode step issues hundreds of short jobs, and waking a sleeping thread
// costs more than a job at small model sizes.
//
// run() returns once every task is done and no worker is inside the job. It
// never waits for a worker that did not join: when the cores are shared
// (another process busy, or several engines in one process), a worker that
// the kernel has not scheduled yet would otherwise hold up every job for a
// time slice. Such a worker joins a later job, or none; the caller does the
// tasks nobody took. (Waiting for every worker made a 0.3 s test take 60 s
// beside two busy processes on 2 cores.)
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace minfer {

class ThreadPool {
 public:
  // n_threads <= 0: one per hardware thread.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(task, thread) for every task in [0, n_tasks); thread is in
  // [0, size()) and identifies per-thread scratch. Returns when all are done.
  template <class Fn>
  void run(int64_t n_tasks, Fn&& fn) {
    auto thunk = [](void* ctx, int64_t task, int thread) { (*static_cast<Fn*>(ctx))(task, thread); };
    run_impl(n_tasks, thunk, &fn);
  }

 private:
  using Thunk = void (*)(void* ctx, int64_t task, int thread);
  void run_impl(int64_t n_tasks, Thunk thunk, void* ctx);
  void worker_loop(int thread);
  void work(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  // The current job; written by run_impl before the generation is bumped.
  Thunk thunk_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_tasks_ = 0;
  alignas(64) std::atomic<int64_t> next_task_{0};
  alignas(64) std::atomic<int64_t> done_tasks_{0};
  // Workers inside the current job; a worker joins only while it is open.
  alignas(64) std::atomic<int> active_workers_{0};
  std::atomic<bool> open_{false};
  alignas(64) std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace minfer
