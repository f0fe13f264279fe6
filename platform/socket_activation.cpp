#include "platform/socket_activation.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#ifdef MINFER_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace minfer::platform {
namespace {
constexpr int kListenFdsStart = 3;  // SD_LISTEN_FDS_START
}

ActivatedSockets activated_sockets() {
  ActivatedSockets out;
#ifdef MINFER_HAVE_SYSTEMD
  const int n = sd_listen_fds(1);  // 1: unset LISTEN_FDS/LISTEN_PID/LISTEN_FDNAMES
  if (n < 0) {
    out.error = fmt::format("sd_listen_fds failed: {}", std::strerror(-n));
    return out;
  }
#else
  // The same checks as sd_listen_fds: LISTEN_PID must be ours, LISTEN_FDS a count.
  const char* pid = std::getenv("LISTEN_PID");
  const char* fds = std::getenv("LISTEN_FDS");
  int n = 0;
  if (pid != nullptr && fds != nullptr && std::strtoll(pid, nullptr, 10) == static_cast<long long>(::getpid())) {
    char* end = nullptr;
    const long v = std::strtol(fds, &end, 10);
    if (end == fds || *end != '\0' || v < 0 || v > 64) {
      out.error = fmt::format("LISTEN_FDS='{}' is not a small count", fds);
    } else {
      n = static_cast<int>(v);
    }
  }
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  if (!out.error.empty()) return out;
  for (int fd = kListenFdsStart; fd < kListenFdsStart + n; ++fd) {
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0) {
      out.error = fmt::format("LISTEN_FDS names fd {} but it is not open", fd);
      return out;
    }
    ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
#endif
  for (int fd = kListenFdsStart; fd < kListenFdsStart + n; ++fd) out.fds.push_back(fd);
  return out;
}

bool is_listening_unix_stream(int fd) {
#ifdef MINFER_HAVE_SYSTEMD
  return sd_is_socket_unix(fd, SOCK_STREAM, 1, nullptr, 0) > 0;
#else
  int type = 0, listening = 0;
  socklen_t len = sizeof(type);
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) return false;
  len = sizeof(listening);
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening == 0) return false;
  sockaddr_storage ss{};
  len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
  return ss.ss_family == AF_UNIX;
#endif
}

}  // namespace minfer::platform
