// What /proc says about a process: resident memory and open descriptors, the
// two numbers the load, soak and security tests watch for leaks.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace minfer::test {

// VmRSS in KiB; -1 when the process is gone.
long rss_kib(pid_t pid);
// Entries in /proc/PID/fd; -1 when the process is gone.
int fd_count(pid_t pid);
// The fewest descriptors seen over `window_ms` (sampled every 50 ms): the
// level with no client connection open, for a test to return to. (A count
// taken once may include the connection of a request that just ended.)
int settled_fd_count(pid_t pid, int window_ms = 500);
// The targets of its open descriptors (readlink of /proc/PID/fd/*).
std::vector<std::string> fd_targets(pid_t pid);

}  // namespace minfer::test
