#include "platform/peer_credentials.h"

#include <sys/socket.h>

namespace minfer::platform {

PeerCredentials peer_credentials(int fd) {
  PeerCredentials out;
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof(cred)) {
    out.valid = true;
    out.pid = cred.pid;
    out.uid = cred.uid;
    out.gid = cred.gid;
  }
  return out;
}

}  // namespace minfer::platform
