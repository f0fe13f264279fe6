#include "engine/scheduler/stop_matcher.h"

#include <algorithm>

namespace minfer {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  pending_ += text;
  // A complete stop string: emit what precedes the earliest one.
  size_t cut = std::string::npos;
  const std::string* first = nullptr;
  for (const std::string& s : stops_) {
    if (const size_t at = pending_.find(s); at < cut) {
      cut = at;
      first = &s;
    }
  }
  if (first != nullptr) {
    stopped_ = true;
    matched_ = *first;
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  if (stopped_) return {};
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace minfer
