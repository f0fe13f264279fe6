#include "daemon/minferd/config.h"

#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "platform/log.h"

namespace minfer::daemon {
namespace po = boost::program_options;

namespace {

po::options_description describe(DaemonConfig* c) {
  po::options_description model("Model and engine");
  model.add_options()
      ("model,m", po::value(&c->model)->default_value(c->model), "GGUF model file to serve")
      ("backend", po::value(&c->backend)->default_value(c->backend),
       "auto | cpu | cuda (cuda: refuse to start unless the GPU runs the whole model)")
      ("ctx-size,c", po::value(&c->ctx_size)->default_value(c->ctx_size),
       "context size in tokens, prompt and reply together (0: the model's training context)")
      ("batch-size,b", po::value(&c->batch_size)->default_value(c->batch_size), "most prompt tokens per forward step")
      ("kv-type", po::value(&c->kv_type)->default_value(c->kv_type), "KV cache element type: f16 | f32")
      ("threads,t", po::value(&c->threads)->default_value(c->threads), "CPU threads for the engine (0: all cores)");
  po::options_description engine("GPU deadline, switches and tracing");
  c->engine.add_to(engine);
  po::options_description sock("Socket");
  sock.add_options()
      ("socket,s", po::value(&c->socket)->default_value(c->socket),
       "Unix socket path to create (mode 0660) when systemd does not pass one (LISTEN_FDS)")
      ("group", po::value(&c->group)->default_value(c->group),
       "group owning the socket, so its members may connect (empty: the daemon's group)");
  po::options_description limits("Limits and timeouts");
  limits.add_options()
      ("queue-size", po::value(&c->queue_size)->default_value(c->queue_size),
       "requests that may wait for the engine; beyond it: 503 with Retry-After")
      ("max-connections", po::value(&c->max_connections)->default_value(c->max_connections),
       "open client connections; beyond it a connection gets 503 and is closed")
      ("max-pipelined", po::value(&c->max_pipelined)->default_value(c->max_pipelined),
       "requests one connection may have read but not yet answered; reading pauses beyond it")
      ("body-limit-bytes", po::value(&c->body_limit_bytes)->default_value(c->body_limit_bytes),
       "largest request body; beyond it: 413")
      ("stream-buffer-bytes", po::value(&c->stream_buffer_bytes)->default_value(c->stream_buffer_bytes),
       "unsent streamed bytes one connection may hold; beyond it the request is cancelled (a client not reading)")
      ("send-buffer-bytes", po::value(&c->send_buffer_bytes)->default_value(c->send_buffer_bytes),
       "kernel send buffer (SO_SNDBUF) of client connections (0: the kernel's default)")
      ("request-timeout-ms", po::value(&c->request_timeout_ms)->default_value(c->request_timeout_ms),
       "deadline of a generation request from receipt, queue included; past it: 504")
      ("header-timeout-ms", po::value(&c->header_timeout_ms)->default_value(c->header_timeout_ms),
       "time to receive a request's headers once its first byte arrived, and again its body")
      ("idle-timeout-ms", po::value(&c->idle_timeout_ms)->default_value(c->idle_timeout_ms),
       "an idle keep-alive connection is closed after this; also bounds a blocked write")
      ("shutdown-grace-ms", po::value(&c->shutdown_grace_ms)->default_value(c->shutdown_grace_ms),
       "on SIGTERM/SIGINT, time in-flight requests get to finish before they are cancelled")
      ("heartbeat-timeout-ms", po::value(&c->heartbeat_timeout_ms)->default_value(c->heartbeat_timeout_ms),
       "the engine thread counts as stalled (503 on /health, no watchdog pings) after this long without progress "
       "(0: half of WatchdogSec, or 30000 without a watchdog)")
      ("http-threads", po::value(&c->http_threads)->default_value(c->http_threads),
       "threads serving the socket (they never wait for the engine)");
  po::options_description logging("Logging");
  logging.add_options()
      ("log-level", po::value(&c->log_level)->default_value(c->log_level),
       "trace | debug | info | warn | error | critical | off (info: one line per request)")
      ("log-sink", po::value(&c->log_sink)->default_value(c->log_sink),
       "auto | stderr | journald (auto: journald when stderr is the journal, JOURNAL_STREAM)");
  po::options_description hooks("Test hooks (never set in production)");
  hooks.add_options()
      ("debug-stall-engine-after-tokens",
       po::value(&c->debug_stall_engine_after_tokens)->default_value(c->debug_stall_engine_after_tokens),
       "hang the engine thread forever after this many generated tokens, like a hung GPU (0: off)")
      ("debug-token-delay-ms", po::value(&c->debug_token_delay_ms)->default_value(c->debug_token_delay_ms),
       "sleep this long on every generated token, like a slow model (0: off)")
      ("debug-load-delay-ms", po::value(&c->debug_load_delay_ms)->default_value(c->debug_load_delay_ms),
       "sleep this long before loading the model (0: off)");
  po::options_description all;
  all.add(model).add(engine).add(sock).add(limits).add(logging).add(hooks);
  return all;
}

std::string check(const DaemonConfig& c) {
  auto positive = [](const char* name, long long v, long long min) -> std::string {
    return v < min ? fmt::format("--{} is {}; it must be at least {}", name, v, min) : std::string();
  };
  for (const std::string& e :
       {positive("ctx-size", c.ctx_size, 0), positive("batch-size", c.batch_size, 1), positive("threads", c.threads, 0),
        positive("queue-size", c.queue_size, 1), positive("max-connections", c.max_connections, 1),
        positive("max-pipelined", c.max_pipelined, 1),
        positive("body-limit-bytes", static_cast<long long>(c.body_limit_bytes), 64),
        positive("stream-buffer-bytes", static_cast<long long>(c.stream_buffer_bytes), 1024),
        positive("send-buffer-bytes", c.send_buffer_bytes, 0), positive("request-timeout-ms", c.request_timeout_ms, 1),
        positive("header-timeout-ms", c.header_timeout_ms, 1), positive("idle-timeout-ms", c.idle_timeout_ms, 1),
        positive("shutdown-grace-ms", c.shutdown_grace_ms, 0),
        positive("heartbeat-timeout-ms", c.heartbeat_timeout_ms, 0), positive("http-threads", c.http_threads, 1),
        positive("debug-stall-engine-after-tokens", c.debug_stall_engine_after_tokens, 0),
        positive("debug-token-delay-ms", c.debug_token_delay_ms, 0),
        positive("debug-load-delay-ms", c.debug_load_delay_ms, 0)}) {
    if (!e.empty()) return e;
  }
  if (c.backend != "auto" && c.backend != "cpu" && c.backend != "cuda") {
    return fmt::format("--backend is '{}'; expected auto, cpu or cuda", c.backend);
  }
  if (c.kv_type != "f16" && c.kv_type != "f32") return fmt::format("--kv-type is '{}'; expected f16 or f32", c.kv_type);
  if (std::string e = c.engine.check(); !e.empty()) return e;
  if (log::Level l; !log::parse_level(c.log_level, &l)) {
    return fmt::format("--log-level is '{}'; expected trace, debug, info, warn, error, critical or off", c.log_level);
  }
  if (c.log_sink != "auto" && c.log_sink != "stderr" && c.log_sink != "journald") {
    return fmt::format("--log-sink is '{}'; expected auto, stderr or journald", c.log_sink);
  }
  return {};
}

}  // namespace

ConfigOutcome parse_daemon_config(int argc, const char* const* argv, DaemonConfig* out, std::string* message) {
  *out = DaemonConfig{};
  std::string config_path;
  bool help = false, version = false;
  po::options_description generic("General");
  generic.add_options()
      ("help,h", po::bool_switch(&help), "print this help and exit")
      ("version", po::bool_switch(&version), "print the version and exit")
      ("config", po::value(&config_path),
       "INI configuration file (default: /etc/minfer/minferd.conf when it exists); the command line wins over it");
  po::options_description settings = describe(out);
  po::options_description cmdline;
  cmdline.add(generic).add(settings);
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, cmdline), vm);
    if (vm["help"].as<bool>()) {
      std::ostringstream os;
      os << "usage: minferd [options]\n\n"
            "minferd serves one GGUF model over HTTP/1.1 on a Unix socket (OpenAI-style API).\n"
            "Options may also be set in the configuration file as `name = value` (names without --).\n"
         << cmdline;
      *message = os.str();
      return ConfigOutcome::kExitOk;
    }
    if (vm["version"].as<bool>()) {
      *message = "minferd " MINFER_VERSION "\n";
      return ConfigOutcome::kExitOk;
    }
    if (vm.count("config")) {
      config_path = vm["config"].as<std::string>();
    } else if (std::error_code ec; std::filesystem::exists(kDefaultConfigPath, ec)) {
      config_path = kDefaultConfigPath;
    }
    if (!config_path.empty()) {
      std::ifstream in(config_path);
      if (!in) {
        *message = fmt::format("minferd: cannot read the configuration file {}", config_path);
        return ConfigOutcome::kExitUsage;
      }
      // Values stored first win: the command line above, then the file.
      po::store(po::parse_config_file(in, settings, false), vm);
    }
    po::notify(vm);
  } catch (const po::error& e) {
    *message = fmt::format("minferd: {}{}\n(minferd --help lists the options)", e.what(),
                           config_path.empty() ? "" : fmt::format(" (configuration file {})", config_path));
    return ConfigOutcome::kExitUsage;
  }
  out->config_file = config_path;
  if (std::string e = check(*out); !e.empty()) {
    *message = "minferd: " + e;
    return ConfigOutcome::kExitUsage;
  }
  return ConfigOutcome::kRun;
}

}  // namespace minfer::daemon
