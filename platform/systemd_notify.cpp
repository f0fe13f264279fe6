#include "platform/systemd_notify.h"

#include <string>

#ifdef MINFER_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#else
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#endif

namespace minfer::platform {

#ifdef MINFER_HAVE_SYSTEMD

bool notify_service_manager(std::string_view state) {
  const std::string s(state);  // sd_notify wants a NUL-terminated string
  return sd_notify(0, s.c_str()) >= 0;
}

std::optional<std::chrono::microseconds> watchdog_interval() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return std::nullopt;
  return std::chrono::microseconds(usec);
}

#else

// The protocol of sd_notify(3): one datagram to the AF_UNIX socket named by
// $NOTIFY_SOCKET; a leading '@' names an abstract socket.
bool notify_service_manager(std::string_view state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || *path == '\0') return true;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const size_t len = std::strlen(path);
  if (len >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, path, len);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const socklen_t addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  const ssize_t n = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&addr),
                             addr_len);
  ::close(fd);
  return n == static_cast<ssize_t>(state.size());
}

std::optional<std::chrono::microseconds> watchdog_interval() {
  const char* usec = std::getenv("WATCHDOG_USEC");
  if (usec == nullptr) return std::nullopt;
  if (const char* pid = std::getenv("WATCHDOG_PID"); pid != nullptr && *pid != '\0') {
    if (std::strtoll(pid, nullptr, 10) != static_cast<long long>(::getpid())) return std::nullopt;
  }
  char* end = nullptr;
  const unsigned long long v = std::strtoull(usec, &end, 10);
  if (end == usec || *end != '\0' || v == 0) return std::nullopt;
  return std::chrono::microseconds(v);
}

#endif

}  // namespace minfer::platform
