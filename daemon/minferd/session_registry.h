// The open sessions: counted for the connection cap and /metrics, and reached
// at shutdown to drain or close them. Holds weak references only; the listener
// registers a session when it accepts it, the session leaves in its destructor.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace minfer::daemon {

class Session;

class SessionRegistry {
 public:
  void add(Session* s, std::weak_ptr<Session> w);
  void remove(Session* s);
  size_t size() const;
  // Calls f for every live session (outside the lock).
  void for_each(const std::function<void(const std::shared_ptr<Session>&)>& f) const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions_;
};

}  // namespace minfer::daemon
