// minferd_soak: steady load on a real minferd for a while (issue 8, point 4),
// sampling the daemon every few seconds. Writes a CSV (one row per sample:
// seconds, requests served so far by kind, errors, RSS, descriptors, queue
// depth) and prints a summary with errors by kind and RSS/fd at start, end
// and peak. Exits 1 on any mismatched text, unexpected status or unanswered
// request, or when RSS or descriptors end above their start by more than
// the bounds below. Run by hand: tests/reliability/soak.sh.
//
//   minferd_soak [--seconds 600] [--clients 16] [--csv FILE] [--sample-s 5]
//                [--token-delay-ms 0] [--queue-size 8]
#include <fmt/format.h>
#include <signal.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "tests/daemon/daemon_process.h"
#include "tests/daemon/http_test_client.h"
#include "tests/daemon/prometheus_text.h"
#include "tests/reliability/load_driver.h"
#include "tests/reliability/proc_stats.h"

namespace po = boost::program_options;
using namespace minfer::test;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  int seconds = 600, clients = 16, sample_s = 5, token_delay_ms = 0, queue_size = 8, threads = 1;
  std::string csv = "soak.csv";
  po::options_description desc("minferd_soak options");
  desc.add_options()("help,h", "this help")("seconds", po::value(&seconds)->default_value(seconds), "how long")(
      "clients", po::value(&clients)->default_value(clients), "concurrent clients")(
      "csv", po::value(&csv)->default_value(csv), "samples file")(
      "sample-s", po::value(&sample_s)->default_value(sample_s), "seconds between samples")(
      "token-delay-ms", po::value(&token_delay_ms)->default_value(token_delay_ms),
      "minferd --debug-token-delay-ms (0: full speed)")(
      "queue-size", po::value(&queue_size)->default_value(queue_size), "minferd --queue-size")(
      "threads", po::value(&threads)->default_value(threads), "minferd engine threads");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "minferd_soak: " << e.what() << "\n" << desc;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc;
    return 0;
  }

  TempDir dir;
  DaemonProcess d(dir, DaemonSpec{true,
                                  {"--queue-size", std::to_string(queue_size), "--max-connections", "256",
                                   "--threads", std::to_string(threads), "--debug-token-delay-ms",
                                   std::to_string(token_delay_ms), "--log-level", "warn"},
                                  {},
                                  -1});
  if (!d.wait_ready()) {
    std::cerr << "minferd_soak: the daemon did not start:\n" << d.log();
    return 1;
  }
  const std::string sock = d.socket();
  std::string error;
  const auto jobs = make_load_jobs(sock, 16, &error);
  if (jobs.empty()) {
    std::cerr << "minferd_soak: " << error << "\n";
    return 1;
  }

  LoadTally t;
  const auto t0 = Clock::now();
  const auto until = t0 + std::chrono::seconds(seconds);
  std::thread load([&] { run_load(sock, jobs, clients, 0, until, LoadMix{}, 10, 3, &t); });

  std::ofstream out(csv);
  out << "seconds,sent,plain_ok,stream_ok,rejected_503,cancelled,dropped,mismatched,other_status,no_answer,"
         "rss_kib,fds,queue_depth,daemon_200,daemon_503,daemon_499\n";
  long rss_start = -1, rss_peak = 0, rss_end = 0;
  int fd_start = -1, fd_peak = 0, fd_end = 0;
  auto sample = [&](double s) {
    const std::string m = http_request(sock, "GET", "/metrics").body;
    const long rss = rss_kib(d.pid());
    const int fds = fd_count(d.pid());
    if (rss_start < 0) rss_start = rss, fd_start = fds;
    rss_peak = std::max(rss_peak, rss);
    fd_peak = std::max(fd_peak, fds);
    rss_end = rss;
    fd_end = fds;
    out << fmt::format("{:.1f},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", s, t.sent.load(), t.plain_ok.load(),
                       t.stream_ok.load(), t.rejected_503.load(), t.cancelled.load(), t.dropped.load(),
                       t.mismatched.load(), t.other_status.load(), t.no_answer.load(), rss, fds,
                       metric_value(m, "minfer_queue_depth"),
                       metric_value(m, "minfer_requests_total{endpoint=\"/v1/completions\",status=\"200\"}"),
                       metric_value(m, "minfer_requests_total{endpoint=\"/v1/completions\",status=\"503\"}"),
                       metric_value(m, "minfer_requests_total{endpoint=\"/v1/completions\",status=\"499\"}"));
    out.flush();
  };
  sample(0);
  while (Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::seconds(sample_s));
    sample(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  load.join();
  // Settled: connections closed, queue empty.
  eventually([&] { return scrape(sock, "minfer_connections_active") <= 1; }, 30s);
  std::this_thread::sleep_for(1s);
  sample(std::chrono::duration<double>(Clock::now() - t0).count());
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();

  const bool text_ok = post_json(sock, "/v1/completions",
                                 {{"prompt", jobs[0].prompt}, {"max_tokens", kLoadMaxTokens}, {"temperature", 0.9},
                                  {"seed", jobs[0].seed}})
                           .json()["choices"][0]["text"] == jobs[0].text;
  std::printf("minferd_soak: %d clients for %.0f s (token delay %d ms, queue %d)\n", clients, elapsed, token_delay_ms,
              queue_size);
  std::printf("  %s\n", t.summary().c_str());
  std::printf("  served %ld completions (%.1f/s), %ld rejected 503, %ld cancelled by clients, %ld dropped early\n",
              t.plain_ok + t.stream_ok, (t.plain_ok + t.stream_ok) / elapsed, t.rejected_503.load(),
              t.cancelled.load(), t.dropped.load());
  std::printf("  RSS KiB start %ld, peak %ld, end %ld; fds start %d, peak %d, end %d\n", rss_start, rss_peak, rss_end,
              fd_start, fd_peak, fd_end);
  std::printf("  the job text after the soak is %s\n", text_ok ? "unchanged" : "DIFFERENT");
  for (const std::string& f : t.failures) std::printf("  failure: %s\n", f.c_str());
  const auto st = d.stop(SIGTERM);
  const bool clean = st && st->exited && st->code == 0;
  std::printf("  minferd exit: %s\n", clean ? "0 after SIGTERM" : "NOT CLEAN");
  // Bounds: no error of any kind; memory within 32 MiB and descriptors equal
  // to their level at the start (the CSV shows the trend in between).
  const bool ok = t.mismatched == 0 && t.other_status == 0 && t.no_answer == 0 && text_ok && clean &&
                  rss_end <= rss_start + 32 * 1024 && fd_end <= fd_start;
  std::printf("minferd_soak: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
