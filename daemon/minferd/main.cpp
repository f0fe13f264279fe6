// minferd: the inference daemon. Parses the configuration, sets up logging
// (journald when stderr is the journal, else stderr) and runs the daemon.
// No self-forking and no PID file: systemd supervises it (Type=notify).
#include <csignal>
#include <cstdio>

#include "daemon/minferd/config.h"
#include "daemon/minferd/daemon.h"
#include "platform/log.h"

int main(int argc, char** argv) {
  using namespace minfer;
  daemon::DaemonConfig config;
  std::string message;
  switch (daemon::parse_daemon_config(argc, argv, &config, &message)) {
    case daemon::ConfigOutcome::kExitOk: std::fputs(message.c_str(), stdout); return 0;
    case daemon::ConfigOutcome::kExitUsage: std::fprintf(stderr, "%s\n", message.c_str()); return 2;
    case daemon::ConfigOutcome::kRun: break;
  }
  log::Level level = log::Level::kInfo;
  log::parse_level(config.log_level, &level);  // validated by the parser
  const bool journald = config.log_sink == "journald" || (config.log_sink == "auto" && log::stderr_is_journal());
  log::configure(journald ? log::Sink::kJournald : log::Sink::kStderr, level);
  if (!config.config_file.empty()) log::info("configuration file {}", config.config_file);
  // Writes to a vanished client must be errors, not a signal that kills us.
  std::signal(SIGPIPE, SIG_IGN);
  return daemon::run_daemon(config);
}
