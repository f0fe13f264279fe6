// `minfer health`: prints minferd's /health (phase, backend and why, model,
// uptime). Exit status 0 when it serves, 1 otherwise, so scripts can wait on it.
#include "daemon/minfer/command.h"
#include "daemon/minfer/get_command.h"

namespace minfer::cli {

int cmd_health(const std::vector<std::string>& args) { return run_get_command(args, "health", "/health", true); }

}  // namespace minfer::cli
