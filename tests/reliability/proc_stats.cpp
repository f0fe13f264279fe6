#include "tests/reliability/proc_stats.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace minfer::test {

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

int fd_count(pid_t pid) {
  std::error_code ec;
  int n = 0;
  for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++n;
  }
  return ec ? -1 : n;
}

int settled_fd_count(pid_t pid, int window_ms) {
  int fewest = fd_count(pid);
  for (int t = 0; t < window_ms; t += 50) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    fewest = std::min(fewest, fd_count(pid));
  }
  return fewest;
}

std::vector<std::string> fd_targets(pid_t pid) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    char buf[4096];
    const ssize_t n = ::readlink(it->path().c_str(), buf, sizeof buf - 1);
    if (n > 0) out.emplace_back(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace minfer::test
