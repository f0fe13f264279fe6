// Metrics rendering and histogram quantiles; the health verdict driven by
// explicit heartbeat ages (an injected clock: no sleeping).
#include <gtest/gtest.h>

#include "daemon/minferd/health_state.h"
#include "daemon/minferd/metrics.h"

namespace minfer::daemon {
namespace {

using namespace std::chrono_literals;

TEST(Histogram, BucketsSumCountAndQuantiles) {
  Histogram h({0.001, 0.01, 0.1});
  for (int i = 0; i < 10; ++i) h.observe(0.0005);  // 10 in the first bucket
  for (int i = 0; i < 10; ++i) h.observe(0.005);   // 10 in the second
  h.observe(5.0);                                   // +Inf
  EXPECT_EQ(h.count(), 21u);
  EXPECT_NEAR(h.sum(), 10 * 0.0005 + 10 * 0.005 + 5.0, 1e-9);
  std::string out;
  h.render(&out, "x_seconds", "help");
  EXPECT_NE(out.find("x_seconds_bucket{le=\"0.001\"} 10\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{le=\"0.01\"} 20\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{le=\"0.1\"} 20\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{le=\"+Inf\"} 21\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_count 21\n"), std::string::npos) << out;
  // Rank 10.5 of 21 falls at 0.5/10 into the second bucket (0.001..0.01).
  EXPECT_NEAR(h.quantile(0.5), 0.001 + 0.009 * 0.05, 1e-12);
}

TEST(Metrics, RendersCountersByLabel) {
  Metrics m;
  m.count_request(Endpoint::kCompletions, 200);
  m.count_request(Endpoint::kCompletions, 200);
  m.count_request(Endpoint::kNone, 404);
  m.count_cancellation(CancelReason::kClientGone);
  m.count_prompt_tokens(5);
  m.count_cached_prompt_tokens(3);
  for (int i = 0; i < 7; ++i) m.count_generated_token();
  m.count_watchdog(true);
  m.count_watchdog(false);
  MetricsGauges g;
  g.queue_depth = 3;
  g.state = "stalled";
  g.model = "a\"b";
  const std::string out = m.render(g);
  for (const char* line : {"minfer_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 2\n",
                           "minfer_requests_total{endpoint=\"other\",status=\"404\"} 1\n",
                           "minfer_cancellations_total{reason=\"client_gone\"} 1\n",
                           "minfer_cancellations_total{reason=\"slow_reader\"} 0\n",
                           "minfer_prompt_tokens_total 5\n", "minfer_prompt_tokens_cached_total 3\n",
                           "minfer_generated_tokens_total 7\n",
                           "minfer_watchdog_trips_total 1\n", "minfer_watchdog_pings_total 1\n",
                           "minfer_queue_depth 3\n", "minfer_engine_state{state=\"stalled\"} 1\n",
                           "minfer_engine_state{state=\"ready\"} 0\n", "model=\"a\\\"b\"",
                           "# TYPE minfer_time_to_first_token_seconds histogram\n",
                           "# TYPE minfer_token_latency_seconds histogram\n",
                           "# TYPE minfer_request_overhead_seconds histogram\n"}) {
    EXPECT_NE(out.find(line), std::string::npos) << "missing: " << line;
  }
  EXPECT_EQ(out.find("minfer_kv_cells"), std::string::npos) << "no engine yet, no cache figures";
  g.kv_cells = 256;
  g.kv_cells_kept = 40;
  g.prefix_histories = 3;
  const std::string with_cache = m.render(g);
  for (const char* line : {"minfer_kv_cells{state=\"kept\"} 40\n", "minfer_kv_cells{state=\"free\"} 216\n",
                           "minfer_prefix_cache_histories 3\n"}) {
    EXPECT_NE(with_cache.find(line), std::string::npos) << "missing: " << line;
  }
}

HealthInputs ready_with_age(std::chrono::milliseconds age) {
  HealthInputs in;
  in.phase = DaemonPhase::kReady;
  in.engine_phase = EnginePhase::kReady;
  in.heartbeat_age = age;
  in.heartbeat_timeout = 500ms;
  return in;
}

TEST(HealthState, FreshHeartbeatServesAndFeedsTheWatchdog) {
  const HealthVerdict v = judge_health(ready_with_age(100ms));
  EXPECT_STREQ(v.state, "ready");
  EXPECT_TRUE(v.serving);
  EXPECT_TRUE(v.feed_watchdog);
}

TEST(HealthState, StaleHeartbeatIsStalled) {
  const HealthVerdict v = judge_health(ready_with_age(501ms));
  EXPECT_STREQ(v.state, "stalled");
  EXPECT_FALSE(v.serving);
  EXPECT_FALSE(v.feed_watchdog);
  EXPECT_NE(v.reason.find("501 ms"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("500 ms"), std::string::npos) << v.reason;
}

TEST(HealthState, WedgedEngineStopsTheWatchdogEvenWithAFreshHeartbeat) {
  HealthInputs in = ready_with_age(1ms);
  in.engine_phase = EnginePhase::kWedged;
  in.engine_reason = "step 12 missed its deadline";
  const HealthVerdict v = judge_health(in);
  EXPECT_STREQ(v.state, "wedged");
  EXPECT_FALSE(v.feed_watchdog);
  EXPECT_EQ(v.reason, "step 12 missed its deadline");
}

TEST(HealthState, LoadingIsUnavailableButFedStoppingIsUnavailable) {
  HealthInputs in = ready_with_age(10s);  // no heartbeat while loading: still fed
  in.phase = DaemonPhase::kLoading;
  HealthVerdict v = judge_health(in);
  EXPECT_STREQ(v.state, "loading");
  EXPECT_FALSE(v.serving);
  EXPECT_TRUE(v.feed_watchdog);
  in = ready_with_age(1ms);
  in.phase = DaemonPhase::kStopping;
  v = judge_health(in);
  EXPECT_STREQ(v.state, "stopping");
  EXPECT_FALSE(v.serving);
  EXPECT_TRUE(v.feed_watchdog);
  in.phase = DaemonPhase::kFailed;
  EXPECT_FALSE(judge_health(in).feed_watchdog);
}

}  // namespace
}  // namespace minfer::daemon
