#include "daemon/minferd/request_queue.h"

#include <algorithm>

namespace minfer::daemon {

bool RequestQueue::try_push(std::shared_ptr<Job> job, std::vector<std::shared_ptr<Job>>* dropped) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return false;
    if (jobs_.size() >= capacity_) {
      auto cancelled = std::stable_partition(jobs_.begin(), jobs_.end(), [](const auto& j) { return !j->cancelled(); });
      dropped->insert(dropped->end(), cancelled, jobs_.end());
      jobs_.erase(cancelled, jobs_.end());
    }
    if (jobs_.size() >= capacity_) return false;
    jobs_.push_back(std::move(job));
  }
  ready_.notify_one();
  return true;
}

std::shared_ptr<Job> RequestQueue::pop_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !jobs_.empty() || closed_; })) return nullptr;
  if (jobs_.empty()) return nullptr;
  std::shared_ptr<Job> job = std::move(jobs_.front());
  jobs_.pop_front();
  return job;
}

void RequestQueue::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  ready_.notify_all();
}

std::vector<std::shared_ptr<Job>> RequestQueue::take_all() {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<Job>> out(std::make_move_iterator(jobs_.begin()), std::make_move_iterator(jobs_.end()));
  jobs_.clear();
  return out;
}

size_t RequestQueue::depth() const {
  std::lock_guard lock(mutex_);
  return jobs_.size();
}

}  // namespace minfer::daemon
