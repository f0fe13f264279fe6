#include "platform/unix_listener.h"

#include <fmt/format.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace minfer::platform {
namespace {

std::string errno_text(int e) { return std::strerror(e); }

bool make_address(const std::string& path, sockaddr_un* addr, std::string* error) {
  *addr = sockaddr_un{};
  addr->sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr->sun_path)) {
    *error = fmt::format("socket path '{}' is {} bytes; it must be 1..{} bytes", path, path.size(),
                         sizeof(addr->sun_path) - 1);
    return false;
  }
  std::memcpy(addr->sun_path, path.data(), path.size());
  return true;
}

// Some process accepts on `path` (connect succeeds) → error; refused → stale.
// Any other failure is reported rather than guessed at.
bool remove_if_stale(const std::string& path, const sockaddr_un& addr, std::string* error) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return true;
    *error = fmt::format("cannot stat socket path {}: {}", path, errno_text(errno));
    return false;
  }
  if (!S_ISSOCK(st.st_mode)) {
    *error = fmt::format("{} exists and is not a socket; refusing to replace it", path);
    return false;
  }
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) {
    *error = fmt::format("socket(): {}", errno_text(errno));
    return false;
  }
  const int rc = ::connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int e = errno;
  ::close(probe);
  if (rc == 0) {
    *error = fmt::format("another process is listening on {}; is minferd already running?", path);
    return false;
  }
  if (e != ECONNREFUSED) {
    *error = fmt::format("cannot tell whether {} is in use (connect: {}); remove it by hand if it is stale", path,
                         errno_text(e));
    return false;
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    *error = fmt::format("cannot remove stale socket {}: {}", path, errno_text(errno));
    return false;
  }
  return true;
}

bool group_id(const std::string& group, gid_t* gid, std::string* error) {
  std::vector<char> buf(16384);
  for (;;) {
    struct group gr {};
    struct group* found = nullptr;
    const int rc = ::getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &found);
    if (rc == ERANGE && buf.size() < (1u << 20)) {
      buf.resize(buf.size() * 2);
      continue;
    }
    if (rc != 0 || found == nullptr) {
      *error = fmt::format("group '{}' does not exist{}", group, rc != 0 ? ": " + errno_text(rc) : "");
      return false;
    }
    *gid = gr.gr_gid;
    return true;
  }
}

}  // namespace

ListenResult open_unix_listener(const std::string& path, const std::string& group, int backlog) {
  ListenResult r;
  sockaddr_un addr{};
  if (!make_address(path, &addr, &r.error)) return r;
  gid_t gid = static_cast<gid_t>(-1);
  if (!group.empty() && !group_id(group, &gid, &r.error)) return r;
  if (!remove_if_stale(path, addr, &r.error)) return r;

  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    r.error = fmt::format("socket(): {}", errno_text(errno));
    return r;
  }
  auto fail = [&](std::string message) {
    ::close(fd);
    r.error = std::move(message);
    return r;
  };
  // bind() creates the file with 0777 & ~umask: create it owner-only, then
  // widen to exactly kSocketMode after the group is set. Nobody can connect
  // before listen() anyway; this keeps the file itself never too open.
  const mode_t old_mask = ::umask(0177);
  const int bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int bind_errno = errno;
  ::umask(old_mask);
  if (bound != 0) {
    return fail(fmt::format("cannot bind {}: {}{}", path, errno_text(bind_errno),
                            bind_errno == ENOENT ? " (does its directory exist?)" : ""));
  }
  if (gid != static_cast<gid_t>(-1) && ::chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    const int e = errno;
    ::unlink(path.c_str());
    return fail(fmt::format("cannot give {} to group '{}': {} (is this user a member of it?)", path, group,
                            errno_text(e)));
  }
  if (::chmod(path.c_str(), kSocketMode) != 0) {
    const int e = errno;
    ::unlink(path.c_str());
    return fail(fmt::format("cannot chmod {} to {:o}: {}", path, kSocketMode, errno_text(e)));
  }
  if (::listen(fd, backlog) != 0) {
    const int e = errno;
    ::unlink(path.c_str());
    return fail(fmt::format("cannot listen on {}: {}", path, errno_text(e)));
  }
  r.fd = fd;
  return r;
}

bool bound_path_mode(int fd, std::string* path, unsigned* mode) {
  sockaddr_un addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || addr.sun_family != AF_UNIX) return false;
  const size_t n = len > offsetof(sockaddr_un, sun_path) ? len - offsetof(sockaddr_un, sun_path) : 0;
  if (n == 0 || addr.sun_path[0] == '\0') {
    path->clear();  // unnamed or abstract: no file, no mode
    return true;
  }
  *path = std::string(addr.sun_path, strnlen(addr.sun_path, n));
  struct stat st {};
  if (::stat(path->c_str(), &st) != 0) return false;
  *mode = st.st_mode & 07777;
  return true;
}

}  // namespace minfer::platform
