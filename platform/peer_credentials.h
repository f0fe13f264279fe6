// Who is on the other end of a Unix socket (SO_PEERCRED): logged with every
// request so that journald says which local process asked for what.
#pragma once

#include <sys/types.h>

namespace minfer::platform {

struct PeerCredentials {
  bool valid = false;
  pid_t pid = -1;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
};

PeerCredentials peer_credentials(int fd);

}  // namespace minfer::platform
