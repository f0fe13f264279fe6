// The socket minferd serves on: the one systemd passed (socket activation),
// else its own at --socket. Either way it must be a listening AF_UNIX stream
// socket that is not world-writable.
#pragma once

#include <string>
#include <sys/types.h>

#include "daemon/minferd/config.h"

namespace minfer::daemon {

struct ListenSocket {
  int fd = -1;
  bool activated = false;
  std::string path;   // the file we created (removed on exit); empty when activated
  ino_t inode = 0;    // of that file, so we never remove someone else's
  std::string error;
  std::string describe() const;
};

ListenSocket open_listen_socket(const DaemonConfig& config);
// Removes the socket file if it is still the one we created.
void remove_listen_socket(const ListenSocket& s);

}  // namespace minfer::daemon
