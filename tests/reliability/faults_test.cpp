// Faults (issue 8, point 5), each against a real minferd:
// - kill -9 in the middle of a generation, then a restart on the same socket
//   path: the stale socket file is replaced and the daemon serves the same
//   text as before;
// - a corrupted, truncated, empty or unreadable model file at start-up: a
//   clear error naming the file and the cause, exit status 1 (not a signal, so
//   no core dump; systemd's restart limits then stop the loop, see README);
// - a model path that is a FIFO (opening it used to wait forever), a
//   directory or a device: refused at once;
// - slowloris: headers (and a body) sent a byte at a time are cut off at
//   --header-timeout-ms in total, however steadily the bytes come, and hold
//   no place in the queue meanwhile;
// - clients that never read their streams: each cancelled once its unsent
//   bytes pass --stream-buffer-bytes, memory bounded (RSS within 8 MiB, in
//   builds without sanitizers), and the daemon serves on.
// tests/daemon covers the single cases these extend (a missing model, one
// non-reading client, headers that stop coming).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/daemon/daemon_process.h"
#include "tests/daemon/http_test_client.h"
#include "tests/daemon/prometheus_text.h"
#include "tests/reliability/proc_stats.h"

namespace minfer::test {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kGreedy27 = ", there was a little girl named Lily. She loved to play outside in the park.";

std::string greedy27(const std::string& sock) {
  const HttpResponse r = post_json(sock, "/v1/completions",
                                   {{"prompt", "Once upon a time"}, {"max_tokens", 27}, {"temperature", 0}});
  return r.status == 200 ? r.json()["choices"][0]["text"].get<std::string>() : "status " + std::to_string(r.status);
}

void write_file(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// The daemon's descriptors once it has served a request and closed every
// connection but the metrics scrape's (what a later count returns to).
int settled_fds(const DaemonProcess& d) {
  greedy27(d.socket());
  eventually([&] { return scrape(d.socket(), "minfer_connections_active") <= 1; }, 10s);
  return settled_fd_count(d.pid());
}

TEST(Faults, KillDashNineMidGenerationThenARestartServes) {
  TempDir dir;
  {
    DaemonProcess d(dir, DaemonSpec{true, {"--debug-token-delay-ms", "20"}, {}, -1});
    ASSERT_TRUE(d.wait_ready()) << d.log();
    TestConnection c(d.socket());
    ASSERT_TRUE(c.send(make_request("POST", "/v1/completions",
                                    Json{{"prompt", "Once upon a time"}, {"max_tokens", 200}, {"stream", true}}.dump())));
    ASSERT_TRUE(c.read_until([](const std::string& b) { return b.find("data: ") != std::string::npos; }));
    const auto st = d.stop(SIGKILL);
    ASSERT_TRUE(st && st->signaled && st->signal == SIGKILL);
    EXPECT_TRUE(c.wait_closed(5s)) << "the client sees the connection end";
  }
  struct stat sb {};
  ASSERT_EQ(::stat(dir.file("minferd.sock").c_str(), &sb), 0) << "kill -9 leaves the socket file behind";
  DaemonProcess again(dir, DaemonSpec{});
  ASSERT_TRUE(again.wait_ready()) << again.log();
  EXPECT_EQ(greedy27(again.socket()), kGreedy27);
  const auto st = again.stop(SIGTERM);
  EXPECT_TRUE(st && st->exited && st->code == 0) << again.log();
}

// Starts minferd on `model` and expects exit status 1 within 20 s, a log
// line naming the model and `cause`, and no socket left listening.
void expect_startup_error(const std::string& model, const std::string& cause) {
  SCOPED_TRACE(model);
  TempDir dir;
  DaemonProcess d(dir, DaemonSpec{true, {"--model", model}, {}, -1});
  const auto st = d.wait_exit(20s);
  ASSERT_TRUE(st.has_value()) << "still running: " << d.log();
  EXPECT_TRUE(st->exited) << "killed by signal " << st->signal << " (a core dump under systemd)";
  EXPECT_EQ(st->code, 1) << d.log();
  const std::string log = d.log();
  EXPECT_NE(log.find("cannot load model " + model), std::string::npos) << log;
  EXPECT_NE(log.find(cause), std::string::npos) << log;
  EXPECT_NE(http_request(d.socket(), "GET", "/health").status, 200);
}

TEST(Faults, ACorruptOrUnreadableModelIsAClearStartupError) {
  TempDir dir;
  const std::string real = file_bytes(stories_model_path());
  ASSERT_GT(real.size(), 100000u);

  // Cut short, as a copy that ran out of disk space leaves it.
  write_file(dir.file("truncated.gguf"), real.substr(0, real.size() / 2));
  expect_startup_error(dir.file("truncated.gguf"), "runs past the end of the file (size 592688): truncated file");
  write_file(dir.file("header-only.gguf"), real.substr(0, 1000));
  expect_startup_error(dir.file("header-only.gguf"), "48 tensor infos of at least 32 bytes each cannot fit");
  write_file(dir.file("empty.gguf"), "");
  expect_startup_error(dir.file("empty.gguf"), "header magic");
  // Not a GGUF file at all, and a flipped byte in the version field.
  write_file(dir.file("text.gguf"), "this is not a model\n");
  expect_startup_error(dir.file("text.gguf"), "header magic");
  std::string flipped = real;
  flipped[4] = 9;
  write_file(dir.file("version.gguf"), flipped);
  expect_startup_error(dir.file("version.gguf"), "version 9 is not supported");
  // Paths that cannot be read as a model.
  expect_startup_error(dir.path(), "not a regular file");
  expect_startup_error("/dev/full", "not a regular file");
  expect_startup_error("/etc/hostname/model.gguf", "Not a directory");
  ASSERT_EQ(::mkfifo(dir.file("fifo.gguf").c_str(), 0600), 0);
  expect_startup_error(dir.file("fifo.gguf"), "not a regular file");
  if (::geteuid() != 0) {  // root reads mode-000 files; CI runs as root, a developer may not
    write_file(dir.file("noperm.gguf"), real);
    ::chmod(dir.file("noperm.gguf").c_str(), 0);
    expect_startup_error(dir.file("noperm.gguf"), "Permission denied");
  }
}

// A client that sends its request a byte at a time, every `gap`; true when
// the daemon closed the connection before it was all sent.
bool trickle(const std::string& sock, const std::string& request, std::chrono::milliseconds gap,
             std::chrono::milliseconds* closed_after) {
  TestConnection c(sock);
  const auto t0 = Clock::now();
  for (char ch : request) {
    if (!c.send(std::string(1, ch))) {
      *closed_after = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
      return true;
    }
    std::this_thread::sleep_for(gap);
  }
  return false;
}

TEST(Faults, SlowlorisIsCutOffInTotalAndHoldsNoQueuePlace) {
  TempDir dir;
  DaemonProcess d(dir, DaemonSpec{true, {"--header-timeout-ms", "1000", "--queue-size", "1"}, {}, -1});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  const int fds_before = settled_fds(d);
  // Six slow clients, each a byte per 50 ms: the head alone (~90 bytes) would
  // take 4.5 s, the body as long again. Each read brings a byte well inside
  // any per-read timeout, so only a total deadline stops them.
  const std::string body = Json{{"prompt", "Once upon a time"}, {"max_tokens", 4}}.dump();
  const std::string head_slow = make_request("POST", "/v1/completions", body);
  std::vector<std::thread> clients;
  std::vector<std::chrono::milliseconds> closed_after(6, std::chrono::milliseconds(-1));
  std::vector<char> cut(6, 0);
  for (int i = 0; i < 6; ++i) {
    clients.emplace_back([&, i] {
      std::string req = head_slow;
      if (i % 2 == 1) {
        // Headers at once, then the body a byte at a time.
        const size_t head_end = req.find("\r\n\r\n") + 4;
        TestConnection c(d.socket());
        c.send(req.substr(0, head_end));
        const auto t0 = Clock::now();
        for (size_t k = head_end; k < req.size(); ++k) {
          if (!c.send(std::string(1, req[k]))) {
            cut[i] = 1;
            closed_after[i] = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
            return;
          }
          std::this_thread::sleep_for(50ms);
        }
        return;
      }
      cut[i] = trickle(d.socket(), req, 50ms, &closed_after[i]);
    });
  }
  // Meanwhile the queue's one place is free: an ordinary request is served
  // at once and the queue stays empty.
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(scrape(d.socket(), "minfer_queue_depth"), 0);
  EXPECT_EQ(greedy27(d.socket()), kGreedy27);
  for (auto& t : clients) t.join();
  for (int i = 0; i < 6; ++i) {
    EXPECT_TRUE(cut[i]) << "slow client " << i << " was never cut off";
    // Cut at the 1 s deadline (a write fails only once the close is seen).
    EXPECT_GE(closed_after[i].count(), 900) << i;
    EXPECT_LT(closed_after[i].count(), 4000) << i;
  }
  EXPECT_TRUE(eventually([&] { return fd_count(d.pid()) <= fds_before; }, 10s))
      << "fds before " << fds_before << ", now " << fd_count(d.pid());
  EXPECT_EQ(greedy27(d.socket()), kGreedy27);
}

TEST(Faults, ClientsThatNeverReadAreCancelledWithBoundedBuffering) {
  // 8 clients ask for 250-token streams (~50 KB each) and read nothing. Each
  // connection buffers at most --stream-buffer-bytes (8 KB) plus the kernel's
  // socket buffers, then its request is cancelled and the connection dropped.
  TempDir dir;
  DaemonProcess d(dir, DaemonSpec{true, {"--stream-buffer-bytes", "8192", "--send-buffer-bytes", "8192"}, {}, -1});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  const int fds_before = settled_fds(d);
  const long rss_before = rss_kib(d.pid());
  std::vector<std::unique_ptr<TestConnection>> sleepers;
  for (int i = 0; i < 8; ++i) {
    sleepers.push_back(std::make_unique<TestConnection>(d.socket(), 4096));
    ASSERT_TRUE(sleepers.back()->send(make_request(
        "POST", "/v1/completions",
        Json{{"prompt", "Once upon a time"}, {"max_tokens", 250}, {"stream", true}, {"seed", i}}.dump())));
  }
  ASSERT_TRUE(eventually([&] { return scrape(d.socket(), "minfer_cancellations_total{reason=\"slow_reader\"}") == 8; },
                         60s))
      << d.log();
  EXPECT_LT(scrape(d.socket(), "minfer_generated_tokens_total"), 8 * 250);
  for (auto& c : sleepers) EXPECT_TRUE(c->wait_closed(10s)) << "the daemon drops a client that does not read";
  sleepers.clear();
  EXPECT_TRUE(eventually([&] { return fd_count(d.pid()) <= fds_before; }, 10s))
      << "fds before " << fds_before << ", now " << fd_count(d.pid());
  if (!kSanitized) {
    EXPECT_LE(rss_kib(d.pid()), rss_before + 8 * 1024) << "buffering is bounded";
  }
  EXPECT_EQ(greedy27(d.socket()), kGreedy27);
}

}  // namespace
}  // namespace minfer::test
