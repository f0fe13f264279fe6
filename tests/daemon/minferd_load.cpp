// minferd_load: the daemon benchmark. N concurrent clients, each on its own
// keep-alive connection, send short completions for a while; reports
// requests/s, latency percentiles, and the daemon's own overhead per request
// (time not spent in the queue or in Engine::generate) two ways: from the
// Server-Timing header each response carries (client-side: includes the
// socket and this tool's parsing) and from minferd's
// minfer_request_overhead_seconds histogram (daemon-side).
//
//   minferd_load [--socket PATH | spawn a daemon with the shipped model]
//                [--clients 16] [--seconds 10] [--max-tokens 8]
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/daemon/daemon_process.h"
#include "tests/daemon/http_test_client.h"
#include "tests/daemon/prometheus_text.h"

namespace po = boost::program_options;
using namespace minfer::test;
using Clock = std::chrono::steady_clock;

namespace {

struct Sample {
  double latency_ms;
  double overhead_ms;  // latency - queue - prep - engine, as the daemon reported them
  double prep_ms;      // template and tokenization (Engine calls, not the daemon's own time)
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

// "queue;dur=0.012, prep;dur=0.010, engine;dur=0.153" → the three durations.
bool server_timing(const std::string& h, double* queue_ms, double* prep_ms, double* engine_ms) {
  const size_t q = h.find("queue;dur="), p = h.find("prep;dur="), e = h.find("engine;dur=");
  if (q == std::string::npos || p == std::string::npos || e == std::string::npos) return false;
  *queue_ms = std::strtod(h.c_str() + q + 10, nullptr);
  *prep_ms = std::strtod(h.c_str() + p + 9, nullptr);
  *engine_ms = std::strtod(h.c_str() + e + 11, nullptr);
  return true;
}

// The q-quantile of a Prometheus histogram in the text, interpolated as
// histogram_quantile does.
double histogram_quantile(const std::string& text, const std::string& name, double q) {
  std::vector<std::pair<double, double>> buckets;  // (le, cumulative)
  size_t pos = 0;
  const std::string key = name + "_bucket{le=\"";
  while ((pos = text.find(key, pos)) != std::string::npos) {
    pos += key.size();
    const size_t end = text.find('"', pos);
    const std::string le = text.substr(pos, end - pos);
    const double count = std::strtod(text.c_str() + text.find(' ', end) + 1, nullptr);
    buckets.emplace_back(le == "+Inf" ? 1e300 : std::strtod(le.c_str(), nullptr), count);
  }
  if (buckets.empty() || buckets.back().second == 0) return 0;
  const double rank = q * buckets.back().second;
  double prev_le = 0, prev_count = 0;
  for (const auto& [le, count] : buckets) {
    if (count >= rank) {
      if (le > 1e299) return prev_le;
      return prev_le + (le - prev_le) * (count == prev_count ? 0 : (rank - prev_count) / (count - prev_count));
    }
    prev_le = le;
    prev_count = count;
  }
  return prev_le;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket;
  int clients = 16, seconds = 10, max_tokens = 8, threads = 0;
  std::string log_level = "info";
  std::string prompt = "Once upon a time";
  po::options_description desc("minferd_load options");
  desc.add_options()
      ("help,h", "this help")
      ("socket", po::value(&socket), "a running minferd's socket (default: start one with the shipped model)")
      ("clients", po::value(&clients)->default_value(clients), "concurrent clients")
      ("seconds", po::value(&seconds)->default_value(seconds), "how long to run")
      ("max-tokens", po::value(&max_tokens)->default_value(max_tokens), "tokens per completion")
      ("prompt", po::value(&prompt)->default_value(prompt), "prompt text")
      ("threads", po::value(&threads)->default_value(threads), "engine threads of a started daemon (0: all cores)")
      ("log-level", po::value(&log_level)->default_value(log_level),
       "log level of a started daemon (info: one line per request, as shipped)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "minferd_load: " << e.what() << "\n" << desc;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc;
    return 0;
  }

  std::unique_ptr<TempDir> dir;
  std::unique_ptr<DaemonProcess> daemon;
  if (socket.empty()) {
    dir = std::make_unique<TempDir>();
    DaemonSpec spec;
    spec.args = {"--threads", std::to_string(threads), "--queue-size", std::to_string(std::max(16, clients * 2)),
                 "--log-level", log_level};
    daemon = std::make_unique<DaemonProcess>(*dir, spec);
    if (!daemon->wait_ready()) {
      std::cerr << "minferd_load: the daemon did not start:\n" << daemon->log();
      return 1;
    }
    socket = daemon->socket();
  }

  const std::string body = nlohmann::json{{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}}.dump();
  const std::string request = make_request("POST", "/v1/completions", body, true);
  std::mutex mutex;
  std::vector<Sample> samples;
  std::atomic<int> errors{0};
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::seconds(seconds);
  std::vector<std::thread> pool;
  for (int c = 0; c < clients; ++c) {
    pool.emplace_back([&] {
      std::vector<Sample> mine;
      auto conn = std::make_unique<TestConnection>(socket);
      while (Clock::now() < end) {
        const auto start = Clock::now();
        std::optional<HttpResponse> r;
        if (conn->send(request)) r = conn->read_response(60s);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        double queue_ms = 0, prep_ms = 0, engine_ms = 0;
        if (!r || r->status != 200 || !server_timing(r->header("server-timing"), &queue_ms, &prep_ms, &engine_ms)) {
          ++errors;
          conn = std::make_unique<TestConnection>(socket);
          continue;
        }
        mine.push_back({ms, ms - queue_ms - prep_ms - engine_ms, prep_ms});
      }
      std::lock_guard lock(mutex);
      samples.insert(samples.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : pool) t.join();
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();

  std::vector<double> latency, overhead, prep;
  for (const Sample& s : samples) {
    latency.push_back(s.latency_ms);
    overhead.push_back(s.overhead_ms);
    prep.push_back(s.prep_ms);
  }
  const std::string metrics = http_request(socket, "GET", "/metrics").body;
  std::printf("minferd_load: %d clients, %d s, max_tokens %d, prompt \"%s\"\n", clients, seconds, max_tokens,
              prompt.c_str());
  std::printf("  requests      %zu ok, %d errors\n", samples.size(), errors.load());
  std::printf("  throughput    %.1f requests/s, %.0f generated tokens/s\n", samples.size() / elapsed_s,
              samples.size() * max_tokens / elapsed_s);
  std::printf("  latency       p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms\n", percentile(latency, 0.5),
              percentile(latency, 0.9), percentile(latency, 0.99), percentile(latency, 1.0));
  std::printf("  overhead      client-seen (latency - queue - prep - engine): p50 %.3f ms, p99 %.3f ms\n",
              percentile(overhead, 0.5), percentile(overhead, 0.99));
  std::printf("  prep          tokenization on the engine thread: p50 %.3f ms, p99 %.3f ms\n", percentile(prep, 0.5),
              percentile(prep, 0.99));
  const double count = metric_value(metrics, "minfer_request_overhead_seconds_count");
  const double sum = metric_value(metrics, "minfer_request_overhead_seconds_sum");
  std::printf("  overhead      daemon-measured (minfer_request_overhead_seconds): p50 %.3f ms, p99 %.3f ms, mean "
              "%.3f ms over %.0f requests\n",
              histogram_quantile(metrics, "minfer_request_overhead_seconds", 0.5) * 1e3,
              histogram_quantile(metrics, "minfer_request_overhead_seconds", 0.99) * 1e3,
              count > 0 ? sum / count * 1e3 : 0.0, count);
  std::printf("  engine        decode %.0f tokens/s (last request), ttft p50 %.3f ms (queue included)\n",
              metric_value(metrics, "minfer_decode_tokens_per_second"),
              histogram_quantile(metrics, "minfer_time_to_first_token_seconds", 0.5) * 1e3);
  if (daemon) daemon->stop(SIGTERM);
  return errors.load() == 0 ? 0 : 1;
}
