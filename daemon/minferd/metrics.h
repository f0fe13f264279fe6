// The daemon's counters and histograms, rendered as Prometheus text for
// GET /metrics. Observed from the Asio threads and the engine thread; every
// update is an atomic or a short mutex section, never per-token allocation.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "daemon/minferd/histogram.h"
#include "daemon/minferd/routes.h"

namespace minfer::daemon {

// Why a request ended without a completion. Labels of minfer_cancellations_total.
enum class CancelReason : int { kNone = 0, kClientGone, kSlowReader, kShutdown, kDeadline };
const char* cancel_reason_name(CancelReason r);

// Values the registry does not own, read when /metrics is rendered.
struct MetricsGauges {
  size_t queue_depth = 0;
  size_t queue_capacity = 0;
  size_t connections_active = 0;
  const char* state = "loading";   // daemon_state_name
  double heartbeat_age_s = 0;
  double uptime_s = 0;
  std::string model, backend, chat_template;
  // The engine's KV cache between requests (EngineHealth): cells, cells
  // holding kept histories, histories; absent (not rendered) while loading.
  std::optional<int> kv_cells, kv_cells_kept, prefix_histories;
};

class Metrics {
 public:
  Metrics();

  // One per answered request (status: the HTTP status sent; 499 when the
  // client went away first, as nginx logs it).
  void count_request(Endpoint endpoint, int status);
  void count_cancellation(CancelReason reason);
  // Live counts: prompt tokens when a generation starts, each token as it is made.
  void count_prompt_tokens(int n) { prompt_tokens_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed); }
  // Prompt tokens whose KV the prefix cache reused, when a generation ends.
  void count_cached_prompt_tokens(int n) { cached_tokens_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed); }
  void count_tool_calls(int n) { tool_calls_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed); }
  void count_generated_token() { generated_tokens_.fetch_add(1, std::memory_order_relaxed); }
  void count_connection(bool accepted);
  void count_watchdog(bool fed);  // fed: a ping sent; !fed: a ping withheld (a trip)

  Histogram& ttft() { return ttft_; }                        // receipt → first token, seconds
  Histogram& token_latency() { return token_latency_; }      // between consecutive tokens
  Histogram& queue_wait() { return queue_wait_; }
  Histogram& request_duration() { return request_duration_; }
  Histogram& overhead() { return overhead_; }                // request time not in the engine
  void set_decode_rate(double tokens_per_s) { decode_rate_.store(tokens_per_s, std::memory_order_relaxed); }

  uint64_t cancellations(CancelReason reason) const;
  uint64_t watchdog_trips() const { return watchdog_trips_.load(); }

  std::string render(const MetricsGauges& g) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<Endpoint, int>, uint64_t> requests_;
  std::atomic<uint64_t> cancellations_[5] = {};
  std::atomic<uint64_t> prompt_tokens_{0}, cached_tokens_{0}, generated_tokens_{0}, tool_calls_{0};
  std::atomic<uint64_t> connections_accepted_{0}, connections_rejected_{0};
  std::atomic<uint64_t> watchdog_pings_{0}, watchdog_trips_{0};
  std::atomic<double> decode_rate_{0.0};
  Histogram ttft_, token_latency_, queue_wait_, request_duration_, overhead_;
};

}  // namespace minfer::daemon
