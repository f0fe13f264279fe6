// minferd's configuration: command line and an INI file (Boost.ProgramOptions).
// The file is --config FILE, else /etc/minfer/minferd.conf when it exists;
// the command line wins over the file. Every option appears in --help, in
// packaging/minferd.conf and in the README.
#pragma once

#include <cstddef>
#include <string>

#include "daemon/engine_switches.h"

namespace minfer::daemon {

inline constexpr const char* kDefaultConfigPath = "/etc/minfer/minferd.conf";
inline constexpr const char* kDefaultModelPath = "/usr/share/minfer/models/stories260K.gguf";
inline constexpr const char* kDefaultSocketPath = "/run/minfer/minferd.sock";

struct DaemonConfig {
  std::string config_file;  // the file actually read ("" when none)

  // Model and engine.
  std::string model = kDefaultModelPath;
  std::string backend = "auto";  // auto | cpu | cuda
  int ctx_size = 4096;
  int batch_size = 512;
  std::string kv_type = "f16";
  int threads = 0;
  // CUDA graphs, the GPU step deadline, the A/B switches, tracing.
  EngineSwitches engine;

  // Socket.
  std::string socket = kDefaultSocketPath;
  std::string group;  // empty: the daemon's own group

  // Limits and timeouts.
  int queue_size = 16;
  int max_connections = 64;
  int max_pipelined = 8;
  size_t body_limit_bytes = 1 << 20;
  size_t stream_buffer_bytes = 1 << 20;
  int send_buffer_bytes = 0;  // SO_SNDBUF of client connections; 0: the kernel's default
  int request_timeout_ms = 300000;
  int header_timeout_ms = 10000;
  int idle_timeout_ms = 60000;
  int shutdown_grace_ms = 10000;
  int heartbeat_timeout_ms = 0;  // 0: half of WATCHDOG_USEC, or 30 s without a watchdog
  int http_threads = 1;

  // Logging.
  std::string log_level = "info";
  std::string log_sink = "auto";  // auto | stderr | journald

  // Test hooks, never set by the shipped configuration. They make the
  // daemon's failure paths reachable from a test without timing luck:
  // - after this many generated tokens the engine thread hangs, as on a hung
  //   GPU, so tests can prove that /health turns 503 and watchdog pings stop;
  int debug_stall_engine_after_tokens = 0;
  // - every generated token takes at least this long (a slow model), so a
  //   test can disconnect, fill the queue or pass a deadline mid-generation;
  int debug_token_delay_ms = 0;
  // - loading takes this much longer, so /health can be seen answering 503.
  int debug_load_delay_ms = 0;
};

enum class ConfigOutcome { kRun, kExitOk, kExitUsage };

// Parses argv and the configuration file. On kExitOk (--help, --version)
// `message` holds what to print to stdout; on kExitUsage the error for stderr.
ConfigOutcome parse_daemon_config(int argc, const char* const* argv, DaemonConfig* out, std::string* message);

}  // namespace minfer::daemon
