#include "daemon/minferd/listen_socket.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "platform/socket_activation.h"
#include "platform/unix_listener.h"

namespace minfer::daemon {

std::string ListenSocket::describe() const {
  return activated ? fmt::format("socket fd {} from systemd", fd) : fmt::format("{} (mode {:o})", path,
                                                                                platform::kSocketMode);
}

ListenSocket open_listen_socket(const DaemonConfig& config) {
  ListenSocket s;
  platform::ActivatedSockets act = platform::activated_sockets();
  if (!act.error.empty()) {
    s.error = act.error;
    return s;
  }
  if (act.fds.size() > 1) {
    s.error = fmt::format("systemd passed {} sockets; minferd serves exactly one (check ListenStream= in "
                          "minferd.socket)",
                          act.fds.size());
    return s;
  }
  if (act.fds.size() == 1) {
    const int fd = act.fds[0];
    if (!platform::is_listening_unix_stream(fd)) {
      s.error = fmt::format("the socket systemd passed (fd {}) is not a listening Unix stream socket", fd);
      return s;
    }
    std::string path;
    unsigned mode = 0;
    if (platform::bound_path_mode(fd, &path, &mode) && !path.empty() && (mode & 0002) != 0) {
      s.error = fmt::format("the socket systemd passed, {}, has mode {:o} and is world-writable; set SocketMode=0660 "
                            "in minferd.socket",
                            path, mode);
      return s;
    }
    s.fd = fd;
    s.activated = true;
    return s;
  }
  // Enough backlog for a burst of connections at the cap.
  const int backlog = std::max(SOMAXCONN, config.max_connections);
  platform::ListenResult r = platform::open_unix_listener(config.socket, config.group, backlog);
  if (r.fd < 0) {
    s.error = r.error;
    return s;
  }
  s.fd = r.fd;
  s.path = config.socket;
  struct stat st {};
  if (::stat(s.path.c_str(), &st) == 0) s.inode = st.st_ino;
  return s;
}

void remove_listen_socket(const ListenSocket& s) {
  if (s.activated || s.path.empty()) return;
  struct stat st {};
  if (::stat(s.path.c_str(), &st) == 0 && st.st_ino == s.inode) ::unlink(s.path.c_str());
}

}  // namespace minfer::daemon
