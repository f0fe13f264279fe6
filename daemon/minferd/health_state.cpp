#include "daemon/minferd/health_state.h"

#include <fmt/format.h>

namespace minfer::daemon {

HealthVerdict judge_health(const HealthInputs& in) {
  HealthVerdict v;
  switch (in.phase) {
    case DaemonPhase::kLoading:
      v.state = "loading";
      v.feed_watchdog = true;
      v.reason = "the model is loading";
      return v;
    case DaemonPhase::kWarmingUp:
      v.state = "warming_up";
      v.feed_watchdog = true;
      v.reason = "the engine is warming up";
      return v;
    case DaemonPhase::kFailed:
      v.state = "failed";
      v.reason = in.engine_reason.empty() ? "the engine failed to start" : in.engine_reason;
      return v;
    case DaemonPhase::kReady:
    case DaemonPhase::kStopping: break;
  }
  if (in.engine_phase && (*in.engine_phase == EnginePhase::kWedged || *in.engine_phase == EnginePhase::kFailed)) {
    v.state = "wedged";
    v.reason = in.engine_reason.empty() ? "the engine reports itself wedged" : in.engine_reason;
    return v;
  }
  if (in.heartbeat_age > in.heartbeat_timeout) {
    v.state = "stalled";
    v.reason = fmt::format("the engine thread shows no progress for {} ms (limit {} ms)",
                           std::chrono::duration_cast<std::chrono::milliseconds>(in.heartbeat_age).count(),
                           std::chrono::duration_cast<std::chrono::milliseconds>(in.heartbeat_timeout).count());
    return v;
  }
  v.feed_watchdog = true;
  if (in.phase == DaemonPhase::kStopping) {
    v.state = "stopping";
    v.reason = "minferd is shutting down";
    return v;
  }
  v.state = "ready";
  v.serving = true;
  return v;
}

}  // namespace minfer::daemon
