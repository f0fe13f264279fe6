// What /proc says about a process: resident memory and open descriptors, the
// two numbers the load, soak and security tests watch for leaks.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace minfer::test {

// True in ASan and TSan builds (this binary and minferd are built alike).
// Their allocators keep freed memory resident on purpose (ASan's
// quarantine), so RSS bounds hold only in plain builds; LeakSanitizer
// checks for leaks in the ASan build instead.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

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
