// Security (issue 8, point 6), against a real minferd:
// - the socket is never world-writable, from the moment it exists, even when
//   minferd starts with umask 0; a user outside its group cannot connect;
// - every request's log line carries the peer's credentials (SO_PEERCRED) of
//   the process that sent it (here another program, curl);
// - each bound is configurable and answers with its status: body size 413,
//   header size 431, prompt tokens and max_tokens 400 against --ctx-size,
//   connections 503, pipelined requests read ahead (back-pressure: the
//   socket stops being read, the queue holds one of them);
// - no field of any request makes the daemon open a file: paths sent in
//   every field and in the URL are never opened (inotify on their folder
//   sees no open or access), and no descriptor appears.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "tests/daemon/daemon_process.h"
#include "tests/daemon/http_test_client.h"
#include "tests/daemon/prometheus_text.h"
#include "tests/reliability/proc_stats.h"

namespace minfer::test {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

void expect_error(const HttpResponse& r, int status, const std::string& code) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.json()["error"]["code"], code) << r.body;
}

TEST(Security, TheSocketIsNeverWorldWritableEvenUnderUmaskZero) {
  TempDir dir;
  const mode_t old = ::umask(0);  // inherited by minferd
  std::set<unsigned> modes;
  DaemonProcess d(dir, DaemonSpec{true, {"--debug-load-delay-ms", "300"}, {}, -1});
  ::umask(old);
  // Watch the socket from the moment it appears until the daemon is ready.
  const auto until = Clock::now() + 30s;
  bool ready = false;
  while (Clock::now() < until && !ready) {
    struct stat sb {};
    if (::lstat(d.socket().c_str(), &sb) == 0) {
      modes.insert(sb.st_mode & 07777);
      ready = http_request(d.socket(), "GET", "/health").status == 200;
    }
    if (!d.running()) break;
  }
  ASSERT_TRUE(ready) << d.log();
  for (unsigned m : modes) EXPECT_EQ(m & 0007, 0u) << "socket mode " << std::oct << m;
  struct stat sb {};
  ASSERT_EQ(::stat(d.socket().c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0660u);
  // And its folder's files (the log) were not made world-writable either.
  const auto st = d.stop(SIGTERM);
  EXPECT_TRUE(st && st->exited && st->code == 0);
}

// connect() to `path` as `uid`/`gid` in a child process; its errno, 0 on success.
int connect_as(const std::string& path, uid_t uid, gid_t gid) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(100);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::_exit(rc == 0 ? 0 : (errno & 0x7f));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Security, OnlyTheOwnerAndTheGroupMayConnect) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as another user (CI runs as root)";
  TempDir dir;
  ::chmod(dir.path().c_str(), 0755);  // the folder is not what keeps others out
  DaemonProcess d(dir, DaemonSpec{});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  const passwd* nobody = ::getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  EXPECT_EQ(connect_as(d.socket(), nobody->pw_uid, nobody->pw_gid), EACCES) << "a stranger was let in";
  // Someone in the socket's group (root's group here) may.
  EXPECT_EQ(connect_as(d.socket(), nobody->pw_uid, ::getgid()), 0);
}

TEST(Security, EachRequestIsLoggedWithItsSendersCredentials) {
  TempDir dir;
  DaemonProcess d(dir, DaemonSpec{});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  // Three requests from three other processes: each line names its sender.
  std::vector<pid_t> senders;
  for (int i = 0; i < 3; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execlp("curl", "curl", "-s", "-o", "/dev/null", "--unix-socket", d.socket().c_str(),
               ("http://minferd/v1/models?n=" + std::to_string(i)).c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "curl failed (is it installed?)";
    senders.push_back(pid);
  }
  ASSERT_TRUE(eventually([&] {
    const std::string log = d.log();
    size_t n = 0;
    for (size_t p = 0; (p = log.find("GET /v1/models?n=", p)) != std::string::npos; ++p) ++n;
    return n == 3;
  }, 10s)) << d.log();
  const std::string log = d.log();
  for (int i = 0; i < 3; ++i) {
    const size_t at = log.find("GET /v1/models?n=" + std::to_string(i));
    ASSERT_NE(at, std::string::npos);
    const std::string line = log.substr(at, log.find('\n', at) - at);
    EXPECT_NE(line.find("PEER_PID=" + std::to_string(senders[i]) + " "), std::string::npos) << line;
    EXPECT_NE(line.find("PEER_UID=" + std::to_string(::getuid()) + " "), std::string::npos) << line;
    EXPECT_NE(line.find("PEER_GID=" + std::to_string(::getgid())), std::string::npos) << line;
  }
}

TEST(Security, EveryBoundIsConfigurableAndAnswersWithItsStatus) {
  TempDir dir;
  DaemonProcess d(dir, DaemonSpec{true,
                                  {"--ctx-size", "64", "--body-limit-bytes", "2000", "--max-connections", "3",
                                   "--max-pipelined", "2", "--debug-token-delay-ms", "100"},
                                  {},
                                  -1});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  const std::string& sock = d.socket();
  // Body size: 2000 bytes pass the limit, 2001 do not (413, before the body is read).
  const std::string pad(2000 - Json{{"prompt", "Once"}, {"max_tokens", 1}, {"user", ""}}.dump().size(), 'x');
  const Json fits = {{"prompt", "Once"}, {"max_tokens", 1}, {"user", pad}};
  ASSERT_EQ(fits.dump().size(), 2000u);
  EXPECT_EQ(post_json(sock, "/v1/completions", fits).status, 200);
  Json over = fits;
  over["user"] = pad + "x";
  expect_error(post_json(sock, "/v1/completions", over), 413, "request_too_large");
  // Headers: 16 KiB in all (fixed; Beast's limit): 431.
  {
    TestConnection c(sock);
    c.send("GET /health HTTP/1.1\r\nX-Big: " + std::string(17000, 'a') + "\r\n\r\n");
    const auto r = c.read_response(10s);
    ASSERT_TRUE(r.has_value());
    expect_error(*r, 431, "request_header_too_large");
  }
  // Prompt tokens and max_tokens: prompt + max_tokens <= --ctx-size (64 here).
  expect_error(post_json(sock, "/v1/completions", {{"prompt", std::vector<int>(64, 403)}, {"max_tokens", 1}}), 400,
               "context_length_exceeded");
  EXPECT_EQ(post_json(sock, "/v1/completions", {{"prompt", std::vector<int>(60, 403)}, {"max_tokens", 4}}).status, 200);
  expect_error(post_json(sock, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 64}}), 400,
               "context_length_exceeded");
  expect_error(post_json(sock, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 0}}), 400, "invalid_value");

  // Pipelining: a slow stream first (55 tokens at 100 ms: 5.5 s), then 40
  // requests of 1.9 KB each behind it on the same connection. minferd reads
  // 2 ahead and stops reading, so the bytes pile up in the socket and a
  // non-blocking writer is told to wait; the queue never holds more than the
  // connection's one active request.
  {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, sock.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    int small = 4096;
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    std::string burst = make_request("POST", "/v1/completions",
                                     Json{{"prompt", "Once"}, {"max_tokens", 55}, {"stream", true}}.dump(), true);
    Json filler = {{"prompt", "Once"}, {"max_tokens", 1}, {"user", std::string(1800, 'y')}};
    for (int i = 0; i < 40; ++i) burst += make_request("POST", "/v1/completions", filler.dump(), true);
    size_t sent = 0;
    const auto until = Clock::now() + 2s;
    while (Clock::now() < until && sent < burst.size()) {
      const ssize_t n = ::send(fd, burst.data() + sent, burst.size() - sent, MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
      std::this_thread::sleep_for(10ms);
    }
    EXPECT_LT(sent, burst.size()) << "all " << burst.size() << " bytes were read while one request was running";
    std::printf("pipelining: %zu of %zu bytes accepted while the first request ran\n", sent, burst.size());
    EXPECT_LE(scrape(sock, "minfer_queue_depth"), 1);
    ::close(fd);
  }

  // Connections: 3 open (each answered once on keep-alive), the 4th is 503.
  std::vector<std::unique_ptr<TestConnection>> held;
  ASSERT_TRUE(eventually([&] { return scrape(sock, "minfer_connections_active") <= 1; }, 20s));
  for (int attempt = 0; held.size() < 3 && attempt < 100; ++attempt) {
    auto c = std::make_unique<TestConnection>(sock);
    c->send(make_request("GET", "/health", "", true));
    const auto r = c->read_response(10s);
    if (r && r->status == 200) held.push_back(std::move(c));
  }
  ASSERT_EQ(held.size(), 3u);
  TestConnection fourth(sock);
  fourth.send(make_request("GET", "/health"));
  const auto r = fourth.read_response(10s);
  ASSERT_TRUE(r.has_value());
  expect_error(*r, 503, "too_many_connections");
  held.clear();
  EXPECT_TRUE(eventually([&] { return http_request(sock, "GET", "/health").status == 200; }));
}

TEST(Security, NoRequestFieldMakesTheDaemonOpenAFile) {
  TempDir dir;
  DaemonProcess d(dir, DaemonSpec{});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  const std::string& sock = d.socket();
  // Bait in a folder of its own: a FIFO (an open for reading would block
  // the daemon), a GGUF model and a config file.
  TempDir bait;
  const std::string fifo = bait.file("model.fifo"), gguf = bait.file("other.gguf"), conf = bait.file("minferd.conf");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  ASSERT_EQ(::symlink(stories_model_path().c_str(), gguf.c_str()), 0);
  std::ofstream(conf) << "model = " << gguf << "\n";
  const int in = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(in, 0);
  ASSERT_GE(::inotify_add_watch(in, bait.path().c_str(), IN_OPEN | IN_ACCESS | IN_CLOSE), 0);
  ASSERT_TRUE(eventually([&] { return scrape(sock, "minfer_connections_active") <= 1; }, 10s));
  const int fds_before = settled_fd_count(d.pid());

  int answered = 0;
  for (const std::string& path : {fifo, gguf, conf, "file://" + gguf, "../../../../" + fifo}) {
    const std::vector<std::pair<std::string, Json>> requests = {
        {"/v1/completions", {{"prompt", path}, {"model", path}, {"max_tokens", 2}, {"user", path}, {"stop", {path}}}},
        {"/v1/completions", {{"prompt", "x"}, {"model", path}, {"config", path}, {"max_tokens", 1}}},
        {"/v1/completions", {{"prompt", "x"}, {"suffix", path}}},
        {"/v1/chat/completions",
         {{"model", path}, {"messages", {{{"role", "system"}, {"content", path}}, {{"role", "user"}, {"content", path}}}},
          {"max_tokens", 2}}},
        {"/v1/chat/completions", {{"messages", {{{"role", path}, {"content", "x"}}}}}},
        {"/tokenize", {{"content", path}, {"model", path}}},
        {"/detokenize", {{"tokens", {1}}, {"model", path}}},
        {"/infill",
         {{"input_prefix", path}, {"input_suffix", path}, {"prompt", path},
          {"input_extra", {{{"filename", path}, {"text", path}}}}, {"model", path}}},
    };
    for (const auto& [target, body] : requests) {
      const HttpResponse r = post_json(sock, target, body);
      EXPECT_TRUE(r.status == 200 || r.status == 400) << target << " " << r.status << " " << r.body;
      answered += r.status != 0;
    }
    std::string escaped;
    for (char ch : path) escaped += ch == '/' ? std::string("%2F") : std::string(1, ch);
    for (const std::string& url : {"/v1/models/" + escaped, "/v1/models/" + path, path, "/" + escaped}) {
      answered += http_request(sock, "GET", url).status != 0;
    }
    TestConnection c(sock);
    c.send(make_request("GET", "/health", "", false, "X-Model: " + path + "\r\nCookie: model=" + path + "\r\n"));
    answered += c.read_response(10s).has_value();
  }
  EXPECT_EQ(answered, 5 * (8 + 4 + 1)) << "every request answered: nothing blocked on the FIFO";
  EXPECT_EQ(http_request(sock, "GET", "/health").status, 200);

  // No open of anything in the bait folder, by anyone, and no new descriptor.
  char events[4096];
  const ssize_t n = ::read(in, events, sizeof events);
  EXPECT_EQ(n, -1) << "the bait folder saw " << n << " bytes of inotify events";
  ::close(in);
  EXPECT_TRUE(eventually([&] { return fd_count(d.pid()) <= fds_before; }, 10s))
      << "fds before " << fds_before << ", now " << fd_count(d.pid());
  for (const std::string& target : fd_targets(d.pid())) {
    EXPECT_EQ(target.find(bait.path()), std::string::npos) << target;
  }
}

}  // namespace
}  // namespace minfer::test
