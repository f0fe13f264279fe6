// minferd as a whole: opens the socket (systemd's, or its own), starts the
// engine thread and the HTTP threads, tells systemd how it is doing
// (READY=1 after the warm-up, STATUS=, WATCHDOG=1 while healthy, STOPPING=1)
// and shuts down in order on SIGTERM/SIGINT: stop accepting, let in-flight
// requests finish for --shutdown-grace-ms, cancel the rest, exit 0.
#pragma once

#include "daemon/minferd/config.h"

namespace minfer::daemon {

// Returns the process exit code: 0 after a requested shutdown, 1 when the
// socket or the model could not be set up.
int run_daemon(const DaemonConfig& config);

}  // namespace minfer::daemon
