// minferd's configuration: defaults, the INI file, command line over file,
// and errors that name the option and the value.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "daemon/minferd/config.h"

namespace minfer::daemon {
namespace {

ConfigOutcome parse(std::vector<std::string> args, DaemonConfig* c, std::string* message) {
  args.insert(args.begin(), "minferd");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_daemon_config(static_cast<int>(argv.size()), argv.data(), c, message);
}

// A configuration file for one test, removed at the end of the process.
std::string write_file(const std::string& text) {
  static std::vector<std::string> written;
  static struct Cleanup {
    ~Cleanup() {
      for (const auto& p : written) std::remove(p.c_str());
    }
  } cleanup;
  char path[] = "/tmp/minferd-conf-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << text;
  written.push_back(path);
  return path;
}

TEST(Config, DefaultsAndCommandLine) {
  DaemonConfig c;
  std::string msg;
  ASSERT_EQ(parse({"--config", write_file(""), "--ctx-size", "128", "--queue-size", "3"}, &c, &msg),
            ConfigOutcome::kRun)
      << msg;
  EXPECT_EQ(c.ctx_size, 128);
  EXPECT_EQ(c.queue_size, 3);
  EXPECT_EQ(c.model, "/usr/share/minfer/models/stories260K.gguf");
  EXPECT_EQ(c.socket, "/run/minfer/minferd.sock");
  EXPECT_EQ(c.backend, "auto");
  EXPECT_EQ(c.debug_stall_engine_after_tokens, 0);
}

TEST(Config, FileThenCommandLineWins) {
  const std::string file = write_file("# comment\nsocket = /tmp/x.sock\nctx-size = 512\nlog-level = debug\n");
  DaemonConfig c;
  std::string msg;
  ASSERT_EQ(parse({"--config", file, "--ctx-size", "64"}, &c, &msg), ConfigOutcome::kRun) << msg;
  EXPECT_EQ(c.socket, "/tmp/x.sock");
  EXPECT_EQ(c.ctx_size, 64);
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.config_file, file);
}

TEST(Config, ErrorsNameTheOptionAndValue) {
  DaemonConfig c;
  std::string msg;
  EXPECT_EQ(parse({"--config", write_file("no-such-option = 1\n")}, &c, &msg), ConfigOutcome::kExitUsage);
  EXPECT_NE(msg.find("no-such-option"), std::string::npos) << msg;
  EXPECT_EQ(parse({"--config", "/nonexistent/minferd.conf"}, &c, &msg), ConfigOutcome::kExitUsage);
  EXPECT_NE(msg.find("/nonexistent/minferd.conf"), std::string::npos) << msg;
  const std::string empty = write_file("");
  EXPECT_EQ(parse({"--config", empty, "--queue-size", "0"}, &c, &msg), ConfigOutcome::kExitUsage);
  EXPECT_NE(msg.find("--queue-size is 0"), std::string::npos) << msg;
  EXPECT_EQ(parse({"--config", empty, "--backend", "tpu"}, &c, &msg), ConfigOutcome::kExitUsage);
  EXPECT_NE(msg.find("'tpu'"), std::string::npos) << msg;
  EXPECT_EQ(parse({"--config", empty, "--log-level", "loud"}, &c, &msg), ConfigOutcome::kExitUsage);
  EXPECT_NE(msg.find("'loud'"), std::string::npos) << msg;
  EXPECT_EQ(parse({"--config", empty, "--ctx-size", "many"}, &c, &msg), ConfigOutcome::kExitUsage);
}

TEST(Config, TheShippedFileDocumentsTheDefaults) {
  // packaging/minferd.conf lists every setting, commented out, with its
  // default: uncommented, it must parse and change nothing.
  std::ifstream in(std::string(MINFER_TEST_DATA_DIR) + "/../../packaging/minferd.conf");
  ASSERT_TRUE(in.good());
  std::string line, uncommented;
  int settings = 0;
  while (std::getline(in, line)) {
    if (line.size() > 1 && line[0] == '#' && std::islower(static_cast<unsigned char>(line[1])) &&
        line.find(" =") != std::string::npos) {
      uncommented += line.substr(1) + "\n";
      ++settings;
    }
  }
  EXPECT_EQ(settings, 39);
  DaemonConfig c;
  std::string msg;
  ASSERT_EQ(parse({"--config", write_file(uncommented)}, &c, &msg), ConfigOutcome::kRun) << msg << "\n" << uncommented;
  const DaemonConfig d;
  EXPECT_EQ(c.model, d.model);
  EXPECT_EQ(c.backend, d.backend);
  EXPECT_EQ(c.ctx_size, d.ctx_size);
  EXPECT_EQ(c.batch_size, d.batch_size);
  EXPECT_EQ(c.kv_type, d.kv_type);
  EXPECT_EQ(c.threads, d.threads);
  EXPECT_EQ(c.socket, d.socket);
  EXPECT_EQ(c.group, d.group);
  EXPECT_EQ(c.queue_size, d.queue_size);
  EXPECT_EQ(c.max_connections, d.max_connections);
  EXPECT_EQ(c.max_pipelined, d.max_pipelined);
  EXPECT_EQ(c.body_limit_bytes, d.body_limit_bytes);
  EXPECT_EQ(c.stream_buffer_bytes, d.stream_buffer_bytes);
  EXPECT_EQ(c.send_buffer_bytes, d.send_buffer_bytes);
  EXPECT_EQ(c.request_timeout_ms, d.request_timeout_ms);
  EXPECT_EQ(c.header_timeout_ms, d.header_timeout_ms);
  EXPECT_EQ(c.idle_timeout_ms, d.idle_timeout_ms);
  EXPECT_EQ(c.shutdown_grace_ms, d.shutdown_grace_ms);
  EXPECT_EQ(c.heartbeat_timeout_ms, d.heartbeat_timeout_ms);
  EXPECT_EQ(c.http_threads, d.http_threads);
  EXPECT_EQ(c.log_level, d.log_level);
  EXPECT_EQ(c.log_sink, d.log_sink);
  EXPECT_EQ(c.debug_stall_engine_after_tokens, 0);
  EngineConfig from_file, defaults;
  c.engine.apply_to(&from_file);
  EXPECT_EQ(from_file.cuda_graphs, defaults.cuda_graphs);
  EXPECT_EQ(from_file.step_timeout_ms, defaults.step_timeout_ms);
  EXPECT_EQ(from_file.step_timeout_per_token_ms, defaults.step_timeout_per_token_ms);
  EXPECT_EQ(from_file.fuse_qkv, defaults.fuse_qkv);
  EXPECT_EQ(from_file.fuse_ffn, defaults.fuse_ffn);
  EXPECT_EQ(from_file.fa_prefill, defaults.fa_prefill);
  EXPECT_EQ(from_file.fused_gemm, defaults.fused_gemm);
  EXPECT_EQ(from_file.lookahead, defaults.lookahead);
  EXPECT_EQ(from_file.draw_in_step, defaults.draw_in_step);
  EXPECT_EQ(from_file.logprobs_in_step, defaults.logprobs_in_step);
  EXPECT_EQ(from_file.constrained_lookahead, defaults.constrained_lookahead);
  EXPECT_EQ(from_file.constrained_candidates, defaults.constrained_candidates);
  EXPECT_EQ(from_file.prefix_cache, defaults.prefix_cache);
  EXPECT_EQ(from_file.prefix_cache_entries, defaults.prefix_cache_entries);
  EXPECT_EQ(from_file.kv_cells, defaults.kv_cells);
  EXPECT_EQ(from_file.chat_template_file, defaults.chat_template_file);
  EXPECT_EQ(from_file.trace_path, defaults.trace_path);
}

TEST(Config, EngineSwitchesReachTheEngineConfig) {
  const std::string file = write_file(
      "cuda-graphs = false\nstep-timeout-ms = 2500\nstep-timeout-per-token-ms = 0.5\nfuse-qkv = no\n"
      "fuse-ffn = off\nfa-prefill = 0\nfused-gemm = false\nlookahead = false\ndraw-in-step = false\nprefix-cache = false\n"
      "prefix-cache-entries = 3\nkv-cells = 8192\nconstrained-lookahead = true\nconstrained-candidates = false\nlogprobs-in-step = false\n"
      "trace = /var/lib/minfer/trace.json\n");
  DaemonConfig c;
  std::string msg;
  ASSERT_EQ(parse({"--config", file, "--fuse-qkv", "true"}, &c, &msg), ConfigOutcome::kRun) << msg;
  EngineConfig e;
  c.engine.apply_to(&e);
  EXPECT_FALSE(e.cuda_graphs);
  EXPECT_EQ(e.step_timeout_ms, 2500.0);
  EXPECT_EQ(e.step_timeout_per_token_ms, 0.5);
  EXPECT_TRUE(e.fuse_qkv);  // the command line wins over the file
  EXPECT_FALSE(e.fuse_ffn);
  EXPECT_FALSE(e.fa_prefill);
  EXPECT_FALSE(e.fused_gemm);
  EXPECT_EQ(e.lookahead, 0);
  EXPECT_FALSE(e.draw_in_step);
  EXPECT_FALSE(e.logprobs_in_step);
  EXPECT_TRUE(e.constrained_lookahead);
  EXPECT_EQ(e.constrained_candidates, 0);
  EXPECT_FALSE(e.prefix_cache);
  EXPECT_EQ(e.prefix_cache_entries, 3);
  EXPECT_EQ(e.kv_cells, 8192);
  EXPECT_EQ(e.trace_path, "/var/lib/minfer/trace.json");
  // On, lookahead is the backend's choice (-1), not forced on every backend (1).
  ASSERT_EQ(parse({"--config", write_file(""), "--lookahead", "yes"}, &c, &msg), ConfigOutcome::kRun) << msg;
  c.engine.apply_to(&e);
  EXPECT_EQ(e.lookahead, -1);
}

TEST(Config, EngineSwitchErrorsNameTheOptionAndValue) {
  DaemonConfig c;
  std::string msg;
  const std::string empty = write_file("");
  EXPECT_EQ(parse({"--config", empty, "--step-timeout-ms", "0"}, &c, &msg), ConfigOutcome::kExitUsage);
  EXPECT_NE(msg.find("--step-timeout-ms is 0"), std::string::npos) << msg;
  EXPECT_EQ(parse({"--config", empty, "--step-timeout-ms", "-5"}, &c, &msg), ConfigOutcome::kExitUsage);
  EXPECT_NE(msg.find("--step-timeout-ms is -5"), std::string::npos) << msg;
  EXPECT_EQ(parse({"--config", empty, "--step-timeout-per-token-ms", "-1"}, &c, &msg), ConfigOutcome::kExitUsage);
  EXPECT_NE(msg.find("--step-timeout-per-token-ms is -1"), std::string::npos) << msg;
  EXPECT_EQ(parse({"--config", empty, "--step-timeout-ms", "inf"}, &c, &msg), ConfigOutcome::kExitUsage);
  EXPECT_NE(msg.find("--step-timeout-ms is inf"), std::string::npos) << msg;
  EXPECT_EQ(parse({"--config", empty, "--prefix-cache-entries", "0"}, &c, &msg), ConfigOutcome::kExitUsage);
  EXPECT_NE(msg.find("--prefix-cache-entries is 0; allowed 1 to 1024"), std::string::npos) << msg;
  EXPECT_EQ(parse({"--config", empty, "--kv-cells", "-1"}, &c, &msg), ConfigOutcome::kExitUsage);
  EXPECT_NE(msg.find("--kv-cells is -1; allowed 0 (the context) to 4194304"), std::string::npos) << msg;
  EXPECT_EQ(parse({"--config", write_file("cuda-graphs = maybe\n")}, &c, &msg), ConfigOutcome::kExitUsage);
  EXPECT_NE(msg.find("cuda-graphs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("maybe"), std::string::npos) << msg;
}

TEST(Config, HelpListsEveryOption) {
  DaemonConfig c;
  std::string msg;
  ASSERT_EQ(parse({"--help"}, &c, &msg), ConfigOutcome::kExitOk);
  for (const char* name : {"--config", "--model", "--socket", "--group", "--backend", "--ctx-size", "--kv-type",
                           "--threads", "--batch-size", "--queue-size", "--max-connections", "--max-pipelined",
                           "--body-limit-bytes", "--stream-buffer-bytes", "--send-buffer-bytes",
                           "--request-timeout-ms", "--header-timeout-ms", "--idle-timeout-ms", "--shutdown-grace-ms",
                           "--heartbeat-timeout-ms", "--http-threads", "--log-level", "--log-sink",
                           "--debug-stall-engine-after-tokens", "--debug-token-delay-ms", "--debug-load-delay-ms",
                           "--cuda-graphs", "--step-timeout-ms", "--step-timeout-per-token-ms", "--fuse-qkv",
                           "--fuse-ffn", "--fa-prefill", "--fused-gemm", "--lookahead", "--draw-in-step", "--logprobs-in-step",
                           "--constrained-lookahead", "--constrained-candidates", "--prefix-cache",
                           "--prefix-cache-entries", "--kv-cells", "--trace"}) {
    EXPECT_NE(msg.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace minfer::daemon
