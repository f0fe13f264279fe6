// The daemon's own listening socket when systemd does not pass one: an
// AF_UNIX stream socket bound at a path, mode 0660, owned by a configured
// group. A socket file left by a crashed daemon is replaced only after a
// connect() to it is refused (ECONNREFUSED: nobody listens); a live one is an
// error, so two daemons never steal each other's socket.
#pragma once

#include <string>

namespace minfer::platform {

// The only mode minferd creates its socket with: owner and group read/write,
// nothing for others (never world-writable).
constexpr unsigned kSocketMode = 0660;

struct ListenResult {
  int fd = -1;        // listening, close-on-exec
  std::string error;  // names the path, the call and errno text
};

// `group` empty: keep the process's group.
ListenResult open_unix_listener(const std::string& path, const std::string& group, int backlog);

// For sockets we did not create (socket activation): the path they are bound
// to ("" for unnamed/abstract sockets) and, through *mode, its permission bits.
bool bound_path_mode(int fd, std::string* path, unsigned* mode);

}  // namespace minfer::platform
