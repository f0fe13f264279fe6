#include "daemon/minferd/metrics.h"

#include <fmt/format.h>

namespace minfer::daemon {
namespace {

// Latency buckets in seconds. Token latency spans 10 µs (a tiny model on
// CPU) to seconds (a large one); the overhead buckets are fine below 1 ms,
// the bar the daemon is measured against.
std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}
std::vector<double> token_buckets() {
  return {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
          0.5, 1};
}
std::vector<double> overhead_buckets() {
  return {0.00005, 0.0001, 0.0002, 0.0003, 0.0005, 0.00075, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1};
}

// Prometheus label values escape backslash, quote and newline.
std::string label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

const char* cancel_reason_name(CancelReason r) {
  switch (r) {
    case CancelReason::kNone: return "none";
    case CancelReason::kClientGone: return "client_gone";
    case CancelReason::kSlowReader: return "slow_reader";
    case CancelReason::kShutdown: return "shutdown";
    case CancelReason::kDeadline: return "deadline";
  }
  return "none";
}

Metrics::Metrics()
    : ttft_(latency_buckets()),
      token_latency_(token_buckets()),
      queue_wait_(latency_buckets()),
      request_duration_(latency_buckets()),
      overhead_(overhead_buckets()) {}

void Metrics::count_request(Endpoint endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, status}];
}

void Metrics::count_cancellation(CancelReason reason) {
  cancellations_[static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
}

uint64_t Metrics::cancellations(CancelReason reason) const {
  return cancellations_[static_cast<int>(reason)].load(std::memory_order_relaxed);
}

void Metrics::count_connection(bool accepted) {
  (accepted ? connections_accepted_ : connections_rejected_).fetch_add(1, std::memory_order_relaxed);
}

void Metrics::count_watchdog(bool fed) { (fed ? watchdog_pings_ : watchdog_trips_).fetch_add(1); }

std::string Metrics::render(const MetricsGauges& g) const {
  std::string out;
  out.reserve(8192);
  out += "# HELP minfer_requests_total Requests answered, by endpoint and HTTP status (499: client went away).\n"
         "# TYPE minfer_requests_total counter\n";
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, n] : requests_) {
      out += fmt::format("minfer_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", endpoint_label(key.first),
                         key.second, n);
    }
  }
  out += "# HELP minfer_cancellations_total Requests that ended without a completion, by reason.\n"
         "# TYPE minfer_cancellations_total counter\n";
  for (CancelReason r : {CancelReason::kClientGone, CancelReason::kSlowReader, CancelReason::kShutdown,
                         CancelReason::kDeadline}) {
    out += fmt::format("minfer_cancellations_total{{reason=\"{}\"}} {}\n", cancel_reason_name(r), cancellations(r));
  }
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, v);
  };
  counter("minfer_prompt_tokens_total", "Prompt tokens of generation requests.", prompt_tokens_.load());
  counter("minfer_prompt_tokens_cached_total", "Prompt tokens whose KV the prefix cache reused.", cached_tokens_.load());
  counter("minfer_generated_tokens_total", "Tokens generated.", generated_tokens_.load());
  counter("minfer_tool_calls_total", "Tool calls returned in chat replies.", tool_calls_.load());
  counter("minfer_connections_total", "Connections accepted.", connections_accepted_.load());
  counter("minfer_connections_rejected_total", "Connections refused at the connection cap.",
          connections_rejected_.load());
  counter("minfer_watchdog_pings_total", "WATCHDOG=1 pings sent to systemd.", watchdog_pings_.load());
  counter("minfer_watchdog_trips_total",
          "Watchdog pings withheld because the engine heartbeat was stale or the engine wedged.",
          watchdog_trips_.load());
  gauge("minfer_queue_depth", "Requests waiting for the engine.", static_cast<double>(g.queue_depth));
  gauge("minfer_queue_capacity", "Most requests that may wait (--queue-size).", static_cast<double>(g.queue_capacity));
  gauge("minfer_connections_active", "Open client connections.", static_cast<double>(g.connections_active));
  gauge("minfer_decode_tokens_per_second", "Decode speed of the last generation.", decode_rate_.load());
  gauge("minfer_engine_heartbeat_age_seconds", "Time since the engine thread last showed progress.",
        g.heartbeat_age_s);
  gauge("minfer_uptime_seconds", "Time since minferd started.", g.uptime_s);
  if (g.kv_cells && g.kv_cells_kept && g.prefix_histories) {
    out += "# HELP minfer_kv_cells KV cache cells between requests: holding earlier requests' histories for prefix "
           "reuse (kept), or free.\n# TYPE minfer_kv_cells gauge\n";
    out += fmt::format("minfer_kv_cells{{state=\"kept\"}} {}\nminfer_kv_cells{{state=\"free\"}} {}\n", *g.kv_cells_kept,
                       *g.kv_cells - *g.kv_cells_kept);
    gauge("minfer_prefix_cache_histories", "Earlier requests' histories kept in the KV cache for prefix reuse.",
          *g.prefix_histories);
  }
  out += "# HELP minfer_engine_state The daemon's phase (1 for the current one).\n# TYPE minfer_engine_state gauge\n";
  for (const char* s : {"loading", "warming_up", "ready", "stalled", "wedged", "failed", "stopping"}) {
    out += fmt::format("minfer_engine_state{{state=\"{}\"}} {}\n", s, std::string_view(s) == g.state ? 1 : 0);
  }
  out += fmt::format("# HELP minfer_model_info The loaded model.\n# TYPE minfer_model_info gauge\n"
                     "minfer_model_info{{model=\"{}\",backend=\"{}\",chat_template=\"{}\"}} 1\n",
                     label(g.model), label(g.backend), label(g.chat_template));
  ttft_.render(&out, "minfer_time_to_first_token_seconds", "From request receipt to the first generated token.");
  token_latency_.render(&out, "minfer_token_latency_seconds", "Time between consecutive generated tokens.");
  queue_wait_.render(&out, "minfer_queue_wait_seconds", "Time a request waited for the engine thread.");
  request_duration_.render(&out, "minfer_request_duration_seconds",
                           "Generation requests, receipt to the last byte written.");
  overhead_.render(&out, "minfer_request_overhead_seconds",
                   "Daemon time per generation request: neither queued nor in an Engine call.");
  return out;
}

}  // namespace minfer::daemon
