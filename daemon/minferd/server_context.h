// What every session shares: configuration, metrics, the engine worker, the
// session registry and the request id counter. Owned by the Daemon, which
// outlives every session.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "daemon/minferd/config.h"
#include "daemon/minferd/engine_worker.h"
#include "daemon/minferd/metrics.h"
#include "daemon/minferd/session_registry.h"

namespace minfer::daemon {

struct ServerContext {
  const DaemonConfig& config;
  Metrics& metrics;
  EngineWorker& worker;
  SessionRegistry& sessions;
  std::chrono::steady_clock::time_point started;
  int64_t started_unix = 0;
  std::string model_id;  // the model file's name: the id /v1/models lists
  std::atomic<uint64_t> next_request_id{0};
  std::atomic<bool> draining{false};
};

}  // namespace minfer::daemon
