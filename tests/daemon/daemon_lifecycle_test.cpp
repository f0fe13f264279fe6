// minferd's life as systemd sees it: READY=1 only after load and warm-up,
// STATUS= with the phase, WATCHDOG=1 while healthy and none while the engine
// is stalled (the --debug-stall-engine-after-tokens hook), STOPPING=1 and
// exit 0 on SIGTERM with requests in flight; socket activation with a
// listening fd passed as systemd does; the socket's mode, group, stale and
// live socket files; start-up errors.
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "tests/daemon/daemon_process.h"
#include "tests/daemon/http_test_client.h"
#include "tests/daemon/prometheus_text.h"

namespace minfer::test {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// A socket bound at `path`: a datagram one (NOTIFY_SOCKET) or a listening
// stream one (what systemd passes). Close-on-exec, so a started daemon only
// gets it when the test hands it over.
int bound_socket(const std::string& path, int type) {
  const int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  if (type == SOCK_STREAM && ::listen(fd, 16) != 0) return -1;
  return fd;
}

// The service manager's side of sd_notify: collects datagrams.
class NotifyListener {
 public:
  explicit NotifyListener(const std::string& path) : path_(path), fd_(bound_socket(path, SOCK_DGRAM)) {}
  ~NotifyListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

  // Next message, or nullopt after `timeout`.
  std::optional<std::string> next(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return std::nullopt;
    return std::string(buf, static_cast<size_t>(n));
  }
  // Reads until a message containing `needle`; the messages before it go to *seen.
  std::optional<std::string> until(const std::string& needle, std::chrono::milliseconds timeout,
                                   std::vector<std::string>* seen = nullptr) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      auto m = next(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
      if (!m) break;
      if (m->find(needle) != std::string::npos) return m;
      if (seen != nullptr) seen->push_back(*m);
    }
    return std::nullopt;
  }
  // All messages within `window`.
  std::vector<std::string> collect(std::chrono::milliseconds window) {
    std::vector<std::string> out;
    const auto end = Clock::now() + window;
    while (Clock::now() < end) {
      auto m = next(std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()));
      if (m) out.push_back(*m);
    }
    return out;
  }

 private:
  std::string path_;
  int fd_;
};

size_t count_containing(const std::vector<std::string>& messages, const std::string& needle) {
  size_t n = 0;
  for (const auto& m : messages) n += m.find(needle) != std::string::npos;
  return n;
}

TEST(DaemonLifecycle, NotifiesReadyStatusWatchdogAndStoppingAndStopsPingingWhenStalled) {
  TempDir dir;
  NotifyListener notify(dir.file("notify.sock"));
  ASSERT_TRUE(notify.ok());
  DaemonSpec spec;
  // Loading takes 3 s (test hook) so /health can be seen answering 503 first.
  // The heartbeat may be 1 s old before the engine counts as stalled: far
  // above any scheduling hiccup of a busy machine, so only the hook stalls it.
  spec.args = {"--debug-load-delay-ms", "3000", "--debug-stall-engine-after-tokens", "3", "--shutdown-grace-ms", "300",
               "--heartbeat-timeout-ms", "1000"};
  spec.env = {{"NOTIFY_SOCKET", notify.path()}, {"WATCHDOG_USEC", "300000"}, {"WATCHDOG_PID", "$PID"}};
  DaemonProcess d(dir, spec);

  const auto loading = notify.until("STATUS=loading model", 20s);
  ASSERT_TRUE(loading.has_value()) << d.log();
  EXPECT_EQ(loading->find("READY=1"), std::string::npos);
  ASSERT_TRUE(eventually([&] { return TestConnection(d.socket()).connected(); }));
  const HttpResponse early = http_request(d.socket(), "GET", "/health");
  EXPECT_EQ(early.status, 503) << early.body;
  EXPECT_EQ(early.json()["phase"], "loading") << early.body;
  EXPECT_EQ(early.header("retry-after"), "1");
  const HttpResponse early_gen = post_json(d.socket(), "/v1/completions", {{"prompt", "x"}});
  EXPECT_EQ(early_gen.status, 503);
  EXPECT_EQ(early_gen.json()["error"]["code"], "model_loading");

  std::vector<std::string> before_ready;
  const auto ready = notify.until("READY=1", 30s, &before_ready);
  ASSERT_TRUE(ready.has_value()) << d.log();
  EXPECT_NE(ready->find("STATUS=ready: "), std::string::npos) << *ready;
  EXPECT_NE(ready->find(" on cpu"), std::string::npos) << *ready;
  EXPECT_EQ(count_containing(before_ready, "STATUS=warming up on cpu"), 1u) << "READY comes after the warm-up";
  EXPECT_EQ(http_request(d.socket(), "GET", "/health").status, 200) << "ready when READY=1 is sent";

  // Healthy: a ping every 150 ms (half of WATCHDOG_USEC).
  const auto healthy = notify.collect(1500ms);
  EXPECT_GE(count_containing(healthy, "WATCHDOG=1"), 4u);

  // The engine hangs after 3 tokens: STATUS says so and the pings stop.
  TestConnection c(d.socket());
  ASSERT_TRUE(c.send(make_request("POST", "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":10})")));
  const auto stalled = notify.until("STATUS=stalled", 20s);
  ASSERT_TRUE(stalled.has_value()) << d.log();
  const auto during_stall = notify.collect(1500ms);
  EXPECT_EQ(count_containing(during_stall, "WATCHDOG=1"), 0u);
  const HttpResponse health = http_request(d.socket(), "GET", "/health");
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.json()["phase"], "stalled");
  EXPECT_GE(scrape(d.socket(), "minfer_watchdog_trips_total"), 5);
  EXPECT_EQ(scrape(d.socket(), "minfer_engine_state{state=\"stalled\"}"), 1);

  // SIGTERM: STOPPING=1, and exit 0 even though the engine thread is stuck.
  ::kill(d.pid(), SIGTERM);
  EXPECT_TRUE(notify.until("STOPPING=1", 10s).has_value());
  const auto st = d.wait_exit(20s);
  ASSERT_TRUE(st.has_value()) << d.log();
  EXPECT_TRUE(st->exited);
  EXPECT_EQ(st->code, 0) << d.log();
  EXPECT_NE(d.log().find("CANCEL_REASON=shutdown"), std::string::npos) << "the stuck request's outcome is logged";
}

TEST(DaemonLifecycle, SigtermLetsAnInFlightStreamFinishThenExitsZero) {
  TempDir dir;
  DaemonProcess d(dir, DaemonSpec{true, {"--debug-token-delay-ms", "10"}, {}, -1});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  TestConnection c(d.socket());
  ASSERT_TRUE(c.send(make_request("POST", "/v1/completions",
                                  R"({"prompt":"Once upon a time","max_tokens":100,"temperature":0,"stream":true})")));
  ASSERT_TRUE(c.read_until([](const std::string& b) { return b.find("data: ") != std::string::npos; }));
  ::kill(d.pid(), SIGTERM);
  // New connections are refused while the stream drains.
  EXPECT_TRUE(eventually([&] { return !TestConnection(d.socket()).connected(); }, 10s));
  const auto r = c.read_response(30s);
  ASSERT_TRUE(r.has_value());
  bool done = false;
  const auto events = sse_data(r->body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(Json::parse(events.back())["choices"][0]["finish_reason"], "length") << r->body;
  const auto st = d.wait_exit(20s);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(st->exited && st->code == 0) << d.log();
  struct stat sb {};
  EXPECT_NE(::stat(d.socket().c_str(), &sb), 0) << "the socket file is removed on exit";
}

TEST(DaemonLifecycle, SigtermPastTheGraceCancelsInFlightRequestsAndExitsZero) {
  TempDir dir;
  DaemonProcess d(dir, DaemonSpec{true, {"--debug-token-delay-ms", "50", "--shutdown-grace-ms", "300"}, {}, -1});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  TestConnection c(d.socket());  // 200 tokens × 50 ms: far past the grace
  ASSERT_TRUE(c.send(make_request("POST", "/v1/completions",
                                  R"({"prompt":"Once upon a time","max_tokens":200,"stream":true})")));
  ASSERT_TRUE(c.read_until([](const std::string& b) { return b.find("data: ") != std::string::npos; }));
  const auto t0 = Clock::now();
  ::kill(d.pid(), SIGTERM);
  const auto r = c.read_response(30s);
  ASSERT_TRUE(r.has_value());
  bool done = false;
  const auto events = sse_data(r->body, &done);
  EXPECT_TRUE(done);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(Json::parse(events.back())["error"]["code"], "shutting_down") << r->body;
  const auto st = d.wait_exit(20s);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(st->exited && st->code == 0) << d.log();
  EXPECT_LT(Clock::now() - t0, 8s) << "bounded by the grace period, not by the generation";
  EXPECT_NE(d.log().find("CANCEL_REASON=shutdown"), std::string::npos) << d.log();
}

// Requests still queued when the grace ends are answered 503, whatever their
// endpoint: a tokenize request behind the stuck generation is not answered
// with an empty token list.
TEST(DaemonLifecycle, SigtermPastTheGraceAnswersQueuedRequests503) {
  TempDir dir;
  DaemonProcess d(dir, DaemonSpec{true, {"--debug-token-delay-ms", "50", "--shutdown-grace-ms", "300"}, {}, -1});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  TestConnection running(d.socket());
  ASSERT_TRUE(running.send(make_request("POST", "/v1/completions",
                                        R"({"prompt":"Once upon a time","max_tokens":200,"stream":true})")));
  ASSERT_TRUE(running.read_until([](const std::string& b) { return b.find("data: ") != std::string::npos; }));
  TestConnection tokenize(d.socket()), complete(d.socket());
  ASSERT_TRUE(tokenize.send(make_request("POST", "/tokenize", R"({"content":"Once upon a time"})")));
  ASSERT_TRUE(complete.send(make_request("POST", "/v1/completions", R"({"prompt":"Once","max_tokens":4})")));
  // Both wait in the queue behind the stream.
  ASSERT_TRUE(eventually([&] { return scrape(d.socket(), "minfer_queue_depth") == 2; }, 10s));
  ::kill(d.pid(), SIGTERM);
  for (TestConnection* c : {&tokenize, &complete}) {
    const auto r = c->read_response(30s);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 503) << r->body;
    EXPECT_EQ(Json::parse(r->body)["error"]["code"], "shutting_down") << r->body;
  }
  const auto st = d.wait_exit(20s);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(st->exited && st->code == 0) << d.log();
}

TEST(DaemonLifecycle, ServesOnASocketPassedBySystemd) {
  TempDir dir;
  const std::string path = dir.file("activated.sock");
  const int fd = bound_socket(path, SOCK_STREAM);
  ASSERT_GE(fd, 0);
  ::chmod(path.c_str(), 0660);
  DaemonSpec spec;
  spec.default_args = false;  // no --socket: the passed one must be used
  spec.args = {"--model", stories_model_path(), "--backend", "cpu", "--ctx-size", "256", "--threads", "1",
               "--socket", dir.file("not-this-one/minferd.sock")};
  spec.activation_fd = fd;
  DaemonProcess d(dir, spec);
  ::close(fd);  // the daemon holds its copy
  ASSERT_TRUE(eventually([&] { return http_request(path, "GET", "/health").status == 200; }, 30s)) << d.log();
  const HttpResponse r = post_json(path, "/v1/completions",
                                   {{"prompt", "Once upon a time"}, {"max_tokens", 27}, {"temperature", 0}});
  EXPECT_EQ(r.json()["choices"][0]["text"], ", there was a little girl named Lily. She loved to play outside in the park.");
  EXPECT_NE(d.log().find("socket fd 3 from systemd"), std::string::npos) << d.log();
  const auto st = d.stop(SIGTERM);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->code, 0) << d.log();
  struct stat sb {};
  EXPECT_EQ(::stat(path.c_str(), &sb), 0) << "systemd's socket file is not ours to remove";
}

TEST(DaemonLifecycle, RefusesAWorldWritableActivatedSocket) {
  TempDir dir;
  const std::string path = dir.file("open.sock");
  const int fd = bound_socket(path, SOCK_STREAM);
  ASSERT_GE(fd, 0);
  ::chmod(path.c_str(), 0666);
  DaemonSpec spec;
  spec.activation_fd = fd;
  DaemonProcess d(dir, spec);
  ::close(fd);
  const auto st = d.wait_exit(20s);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->code, 1);
  EXPECT_NE(d.log().find("world-writable"), std::string::npos) << d.log();
  EXPECT_NE(d.log().find("SocketMode=0660"), std::string::npos) << d.log();
}

TEST(DaemonLifecycle, CreatesItsSocketWithMode0660AndTheConfiguredGroup) {
  TempDir dir;
  const group* g = ::getgrgid(::getgid());
  ASSERT_NE(g, nullptr);
  DaemonProcess d(dir, DaemonSpec{true, {"--group", g->gr_name}, {}, -1});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  struct stat sb {};
  ASSERT_EQ(::stat(d.socket().c_str(), &sb), 0);
  EXPECT_TRUE(S_ISSOCK(sb.st_mode));
  EXPECT_EQ(sb.st_mode & 07777, 0660u);
  EXPECT_EQ(sb.st_gid, ::getgid());
}

TEST(DaemonLifecycle, AnUnknownGroupIsAStartupError) {
  TempDir dir;
  DaemonProcess d(dir, DaemonSpec{true, {"--group", "no-such-group-minfer"}, {}, -1});
  const auto st = d.wait_exit(20s);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->code, 1);
  EXPECT_NE(d.log().find("group 'no-such-group-minfer' does not exist"), std::string::npos) << d.log();
}

TEST(DaemonLifecycle, AStaleSocketFileIsReplacedALiveOneIsAnError) {
  TempDir dir;
  {
    const int stale = bound_socket(dir.file("minferd.sock"), SOCK_STREAM);  // bound, then abandoned
    ASSERT_GE(stale, 0);
    ::close(stale);
  }
  DaemonProcess first(dir, DaemonSpec{});
  ASSERT_TRUE(first.wait_ready()) << first.log();

  TempDir other;  // the second daemon's log lives elsewhere; its socket is the first's
  DaemonProcess second(other, DaemonSpec{true, {"--socket", first.socket()}, {}, -1});
  const auto st = second.wait_exit(20s);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->code, 1);
  EXPECT_NE(second.log().find("another process is listening on " + first.socket()), std::string::npos)
      << second.log();
  EXPECT_EQ(http_request(first.socket(), "GET", "/health").status, 200) << "the live daemon is untouched";
}

TEST(DaemonLifecycle, AFileThatIsNotASocketIsNotReplaced) {
  TempDir dir;
  std::ofstream(dir.file("minferd.sock")) << "precious";
  DaemonProcess d(dir, DaemonSpec{});
  const auto st = d.wait_exit(20s);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->code, 1);
  EXPECT_NE(d.log().find("is not a socket"), std::string::npos) << d.log();
  std::ifstream in(dir.file("minferd.sock"));
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious");
}

TEST(DaemonLifecycle, AMissingModelIsAStartupErrorWithStatus) {
  TempDir dir;
  NotifyListener notify(dir.file("notify.sock"));
  DaemonProcess d(dir, DaemonSpec{true, {"--model", "/nonexistent/model.gguf"}, {{"NOTIFY_SOCKET", notify.path()}}, -1});
  const auto st = d.wait_exit(20s);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->code, 1) << d.log();
  EXPECT_NE(d.log().find("cannot load model /nonexistent/model.gguf"), std::string::npos) << d.log();
  const auto failed = notify.until("STATUS=failed: cannot load model /nonexistent/model.gguf", 5s);
  EXPECT_TRUE(failed.has_value());
}

TEST(DaemonLifecycle, ReadsItsConfigurationFileAndTheCommandLineWins) {
  TempDir dir;
  std::ofstream(dir.file("minferd.conf")) << "# test\nctx-size = 128\nqueue-size = 5\n";
  DaemonProcess d(dir, DaemonSpec{true, {"--config", dir.file("minferd.conf"), "--queue-size", "7"}, {}, -1});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  // The harness passes --ctx-size 256 on the command line: it wins over the file.
  EXPECT_EQ(http_request(d.socket(), "GET", "/v1/models").json()["data"][0]["n_ctx"], 256);
  EXPECT_EQ(http_request(d.socket(), "GET", "/health").json()["queue_capacity"], 7);
  TempDir dir2;
  std::ofstream(dir2.file("minferd.conf")) << "ctx-size = 128\nkv-cells = 384\n";
  DaemonSpec spec;
  spec.default_args = false;
  spec.args = {"--config", dir2.file("minferd.conf"), "--model", stories_model_path(), "--socket",
               dir2.file("minferd.sock"), "--threads", "1"};
  DaemonProcess d2(dir2, spec);
  ASSERT_TRUE(d2.wait_ready()) << d2.log();
  const Json model = http_request(d2.socket(), "GET", "/v1/models").json()["data"][0];
  EXPECT_EQ(model["n_ctx"], 128);
  EXPECT_EQ(model["kv_cells"], 384);
  EXPECT_EQ(http_request(d.socket(), "GET", "/v1/models").json()["data"][0]["kv_cells"], 256);  // as the context
  EXPECT_NE(d2.log().find("n_ctx 128, 384 KV cells"), std::string::npos) << d2.log();
  const std::string metrics = http_request(d2.socket(), "GET", "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "minfer_kv_cells{state=\"kept\"}") +
                metric_value(metrics, "minfer_kv_cells{state=\"free\"}"),
            384)
      << metrics;
}

// The daemon's warm-up generation leaves nothing in the prefix cache: the
// first request reuses no token (before, the warm-up's BOS counted as cached).
TEST(DaemonLifecycle, ServesItsFirstRequestWithAnEmptyPrefixCache) {
  TempDir dir;
  DaemonProcess d(dir, DaemonSpec{true, {}, {}, -1});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  const std::string metrics = http_request(d.socket(), "GET", "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "minfer_prefix_cache_histories"), 0) << metrics;
  EXPECT_EQ(metric_value(metrics, "minfer_kv_cells{state=\"kept\"}"), 0) << metrics;
  const Json body = {{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}};
  const HttpResponse first = post_json(d.socket(), "/v1/completions", body);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << first.body;
  // The cache works from there: the same prompt again reuses all but its last token.
  const HttpResponse again = post_json(d.socket(), "/v1/completions", body);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 4) << again.body;
}

// The engine switches of minferd.conf reach the engine: every A/B switch off
// (and graphs, lookahead, the prefix cache) leaves the greedy text the
// reference, the log names them, and `trace` writes a Chrome trace with an
// event for every node of every step, closed on SIGTERM. An unwritable
// trace file is a start-up error that names it.
TEST(DaemonLifecycle, EngineSwitchesAndTraceFromTheConfigurationFile) {
  TempDir dir;
  std::ofstream(dir.file("minferd.conf"))
      << "cuda-graphs = false\nfuse-qkv = false\nfuse-ffn = false\nfa-prefill = false\nfused-gemm = false\n"
         "lookahead = false\n"
         "draw-in-step = false\nlogprobs-in-step = false\nconstrained-candidates = false\nprefix-cache = false\n"
         "step-timeout-ms = 5000\ntrace = "
      << dir.file("trace.json") << "\n";
  DaemonProcess d(dir, DaemonSpec{true, {"--config", dir.file("minferd.conf")}, {}, -1});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  EXPECT_NE(d.log().find("engine switches off: cuda-graphs, fuse-qkv, fuse-ffn, fa-prefill, fused-gemm, lookahead, "
                         "draw-in-step, logprobs-in-step, constrained-candidates, prefix-cache"),
            std::string::npos)
      << d.log();
  EXPECT_NE(d.log().find("tracing every node to " + dir.file("trace.json")), std::string::npos) << d.log();
  const Json body = {{"prompt", "Once upon a time"}, {"max_tokens", 27}, {"temperature", 0}};
  const HttpResponse r = post_json(d.socket(), "/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["choices"][0]["text"], ", there was a little girl named Lily. She loved to play outside in the park.");
  const HttpResponse again = post_json(d.socket(), "/v1/completions", body);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << "prefix-cache = false";
  const auto st = d.stop(SIGTERM);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->code, 0) << d.log();
  std::ifstream in(dir.file("trace.json"));
  const Json trace = Json::parse(in, nullptr, false);
  ASSERT_TRUE(trace.is_array()) << "the trace is not a closed JSON array";
  // The steps: the daemon's warm-up (a prefill, 3 decode steps: 4 tokens),
  // then each request's prefill of its 5 prompt tokens (all 5 the second time
  // too: no prefix cache) and 26 decode steps; each step's embedding node has
  // the step's tokens as rows.
  std::map<int, int> embed_rows;
  std::set<std::string> ops;
  for (const Json& e : trace) {
    ASSERT_EQ(e["ph"], "X");
    EXPECT_EQ(e["tid"], "cpu");
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    EXPECT_EQ(e["args"]["nan"], 0) << e;
    ops.insert(e["args"]["op"].get<std::string>());
    if (e["args"]["op"] == "embed") embed_rows[e["args"]["step"].get<int>()] = e["args"]["shape"][0].get<int>();
  }
  ASSERT_EQ(embed_rows.size(), 58u);
  std::vector<int> rows, expected;
  for (const auto& [step, n] : embed_rows) rows.push_back(n);
  for (int request = 0; request < 2; ++request) {
    expected.push_back(5);
    expected.insert(expected.end(), 26, 1);
  }
  EXPECT_EQ(std::vector<int>(rows.begin() + 4, rows.end()), expected);
  // The fusions are off: their unfused ops run, the fused ones do not.
  for (const char* op : {"rms_norm", "matmul", "rope", "kv_store", "attention", "swiglu", "add", "argmax"}) {
    EXPECT_TRUE(ops.count(op)) << op;
  }
  EXPECT_FALSE(ops.count("qkv_tail"));
  EXPECT_FALSE(ops.count("gate_up_swiglu"));

  TempDir dir2;
  DaemonProcess bad(dir2, DaemonSpec{true, {"--trace", "/nonexistent/trace.json"}, {}, -1});
  const auto bad_st = bad.wait_exit(20s);
  ASSERT_TRUE(bad_st.has_value());
  EXPECT_EQ(bad_st->code, 1) << bad.log();
  EXPECT_NE(bad.log().find("cannot open trace file '/nonexistent/trace.json'"), std::string::npos) << bad.log();
}

TEST(DaemonLifecycle, AnInheritedJournalStreamThatIsNotOurStderrKeepsLoggingToStderr) {
  TempDir dir;
  DaemonProcess d(dir, DaemonSpec{true, {}, {{"JOURNAL_STREAM", "1:1"}}, -1});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  EXPECT_TRUE(eventually([&] { return d.log().find("GET /health 200") != std::string::npos; }, 5s)) << d.log();
}

}  // namespace
}  // namespace minfer::test
