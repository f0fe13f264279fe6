// Sockets passed by systemd socket activation (LISTEN_FDS / LISTEN_PID,
// sd_listen_fds(3)): they start at fd 3. The variables are cleared once read
// so that no child process believes the sockets are its own.
#pragma once

#include <string>
#include <vector>

namespace minfer::platform {

struct ActivatedSockets {
  std::vector<int> fds;  // empty: not socket-activated
  std::string error;     // set when LISTEN_FDS is present but unusable
};

ActivatedSockets activated_sockets();

// True when `fd` is a listening AF_UNIX stream socket (what minferd serves on).
bool is_listening_unix_stream(int fd);

}  // namespace minfer::platform
