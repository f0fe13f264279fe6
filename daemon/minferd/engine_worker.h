// The engine thread: the only thread that touches the Engine (and, with CUDA,
// the GPU). It loads the model, runs a warm-up generation, then serves jobs
// from the bounded queue one at a time. Sessions hand it jobs and never wait
// for it; results go back through each job's sink.
//
// The heartbeat ticks while idle (the queue wait times out every tick) and on
// every generated token, so a hung step stops it; the watchdog and /health
// read its age.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "daemon/minferd/config.h"
#include "daemon/minferd/health_state.h"
#include "daemon/minferd/job.h"
#include "daemon/minferd/metrics.h"
#include "daemon/minferd/request_queue.h"
#include "engine/api.h"

namespace minfer::daemon {

class EngineWorker {
 public:
  struct Hooks {
    std::function<void(const std::string& status)> on_progress;  // "loading model …", "warming up …"
    std::function<void(const ModelInfo& info)> on_ready;          // after load and a warm-up with tokens
    std::function<void(const std::string& error)> on_failed;      // load or warm-up failed
  };

  EngineWorker(const DaemonConfig& config, Metrics& metrics, std::chrono::milliseconds heartbeat_timeout, Hooks hooks);
  ~EngineWorker();
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  void start();

  enum class Admit { kQueued, kFull, kNotReady, kStopping, kFailed };
  Admit submit(std::shared_ptr<Job> job);

  // Shutdown, in order: refuse new jobs; cancel what waits and what runs; end the loop.
  void stop_accepting();
  void cancel_all(CancelReason reason);
  void stop();
  // Waits for the thread to end; false when it did not (a hung engine).
  bool join_for(std::chrono::milliseconds timeout);
  bool idle() const;  // nothing queued or running

  DaemonPhase phase() const { return phase_.load(); }
  HealthInputs health_inputs() const;
  // The engine's own report (EngineHealth: its phase, heartbeat and KV
  // cache); absent until the engine is loaded.
  std::optional<EngineHealth> engine_health() const {
    if (!loaded_.load(std::memory_order_acquire)) return std::nullopt;
    return engine_->health();
  }
  // Set once loaded; stable afterwards.
  const ModelInfo* info() const { return loaded_.load(std::memory_order_acquire) ? &info_ : nullptr; }
  ModelLimits limits() const { return limits_; }
  size_t queue_depth() const { return queue_.depth(); }
  size_t queue_capacity() const { return queue_.capacity(); }
  std::string failure() const;

 private:
  void run();
  bool load_and_warm_up();
  void serve(const std::shared_ptr<Job>& job);
  void run_generation(Job& job, JobOutcome& out);
  // One choice of a generation into c (its result, its reply taken apart);
  // the job's engine time, and an error or cancellation that ends it, into out.
  void run_choice(Job& job, const GenerationRequest& req, int choice, JobOutcome& out, ChoiceOutcome& c);
  void run_tokenize(Job& job, JobOutcome& out);
  void run_detokenize(Job& job, JobOutcome& out);
  void beat();
  void on_generated_token();  // the stall test hook
  void finish_cancelled(const std::shared_ptr<Job>& job);
  void fail(std::string error);

  const DaemonConfig config_;
  Metrics& metrics_;
  const std::chrono::milliseconds heartbeat_timeout_;
  const std::chrono::milliseconds idle_tick_;
  Hooks hooks_;

  RequestQueue queue_;
  std::unique_ptr<Engine> engine_;
  ModelInfo info_;
  ModelLimits limits_;
  std::atomic<bool> loaded_{false};
  std::atomic<DaemonPhase> phase_{DaemonPhase::kLoading};
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> heartbeat_ns_{0};  // steady clock, since its epoch
  uint64_t tokens_generated_ = 0;         // for the stall hook (engine thread only)

  mutable std::mutex mutex_;  // running_, failure_, thread_done_
  std::shared_ptr<Job> running_;
  std::string failure_;
  bool thread_done_ = false;
  std::condition_variable done_cv_;
  std::thread thread_;
};

}  // namespace minfer::daemon
