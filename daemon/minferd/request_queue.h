// The bounded queue between the sessions and the engine thread. Full means
// 503 + Retry-After, never an unbounded wait. A job whose client went away
// while it waited is dropped when its place is needed, so a cancelled request
// frees its place at once rather than when the engine reaches it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "daemon/minferd/job.h"

namespace minfer::daemon {

class RequestQueue {
 public:
  explicit RequestQueue(size_t capacity) : capacity_(capacity) {}

  // False when full (after dropping cancelled jobs, returned in *dropped for
  // the caller to finish) or closed.
  bool try_push(std::shared_ptr<Job> job, std::vector<std::shared_ptr<Job>>* dropped);
  // The oldest job, or nullptr after `timeout` (the engine thread's idle tick) or when closed and empty.
  std::shared_ptr<Job> pop_for(std::chrono::milliseconds timeout);
  // Refuses further pushes; pop_for returns what is left, then nullptr.
  void close();
  // Removes every waiting job (shutdown).
  std::vector<std::shared_ptr<Job>> take_all();

  size_t depth() const;
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::shared_ptr<Job>> jobs_;
  bool closed_ = false;
};

}  // namespace minfer::daemon
