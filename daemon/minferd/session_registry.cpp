#include "daemon/minferd/session_registry.h"

#include <vector>

namespace minfer::daemon {

void SessionRegistry::add(Session* s, std::weak_ptr<Session> w) {
  std::lock_guard lock(mutex_);
  sessions_[s] = std::move(w);
}

void SessionRegistry::remove(Session* s) {
  std::lock_guard lock(mutex_);
  sessions_.erase(s);
}

size_t SessionRegistry::size() const {
  std::lock_guard lock(mutex_);
  return sessions_.size();
}

void SessionRegistry::for_each(const std::function<void(const std::shared_ptr<Session>&)>& f) const {
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [p, w] : sessions_) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
  }
  for (const auto& s : live) f(s);
}

}  // namespace minfer::daemon
