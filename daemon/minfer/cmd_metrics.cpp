// `minfer metrics`: prints minferd's /metrics (Prometheus text).
#include "daemon/minfer/command.h"
#include "daemon/minfer/get_command.h"

namespace minfer::cli {

int cmd_metrics(const std::vector<std::string>& args) { return run_get_command(args, "metrics", "/metrics", false); }

}  // namespace minfer::cli
