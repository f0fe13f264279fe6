// The daemon's health as one verdict, from plain inputs (phase, the engine's
// own health, the heartbeat's age) so that tests can drive it with any clock:
// /health's status code, the systemd watchdog and STATUS= all read it, and so
// cannot disagree.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "engine/api.h"

namespace minfer::daemon {

enum class DaemonPhase { kLoading, kWarmingUp, kReady, kFailed, kStopping };

struct HealthInputs {
  DaemonPhase phase = DaemonPhase::kLoading;
  std::optional<EnginePhase> engine_phase;  // absent until the engine is loaded
  std::string engine_reason;
  std::chrono::nanoseconds heartbeat_age{0};
  std::chrono::nanoseconds heartbeat_timeout{0};
};

struct HealthVerdict {
  const char* state = "loading";  // loading | warming_up | ready | stalled | wedged | failed | stopping
  bool serving = false;           // /health 200
  bool feed_watchdog = false;     // send WATCHDOG=1
  std::string reason;             // why not serving
};

// While loading and warming up the watchdog is fed: a hang there is what the
// unit's start timeout catches, and the engine thread gives no heartbeat
// inside Engine::load. Once ready, pings need a fresh heartbeat and an engine
// that is not wedged.
HealthVerdict judge_health(const HealthInputs& in);

}  // namespace minfer::daemon
