#include "daemon/minferd/daemon.h"

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <thread>
#include <vector>

#include "daemon/minferd/engine_worker.h"
#include "daemon/minferd/listen_socket.h"
#include "daemon/minferd/listener.h"
#include "daemon/minferd/metrics.h"
#include "daemon/minferd/server_context.h"
#include "daemon/minferd/session.h"
#include "daemon/minferd/session_registry.h"
#include "platform/log.h"
#include "platform/systemd_notify.h"

namespace minfer::daemon {
namespace net = boost::asio;

namespace {

using namespace std::chrono_literals;

// After the grace period, cancelled requests get this long to come back from
// the engine (one decode step) before their connections are closed anyway.
constexpr auto kCancelWindow = 2s;
// A hung engine thread (a wedged GPU) cannot be joined; we exit without it.
constexpr auto kEngineJoinTimeout = 2s;
constexpr auto kShutdownTick = 20ms;

void notify(const std::string& state) {
  if (!platform::notify_service_manager(state)) log::warn("sd_notify failed for '{}'", state.substr(0, state.find('\n')));
}

std::chrono::milliseconds heartbeat_timeout(const DaemonConfig& c,
                                            const std::optional<std::chrono::microseconds>& watchdog) {
  if (c.heartbeat_timeout_ms > 0) return std::chrono::milliseconds(c.heartbeat_timeout_ms);
  if (watchdog) return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(*watchdog / 2));
  return 30s;
}

class Daemon {
 public:
  Daemon(const DaemonConfig& config, ListenSocket socket)
      : config_(config),
        socket_(std::move(socket)),
        watchdog_(platform::watchdog_interval()),
        worker_(config, metrics_, heartbeat_timeout(config, watchdog_), worker_hooks()),
        ctx_{config_, metrics_, worker_, sessions_, Clock::now(), static_cast<int64_t>(std::time(nullptr)),
             std::filesystem::path(config.model).filename().string()},
        ioc_(config.http_threads),
        strand_(net::make_strand(ioc_)),
        signals_(strand_, SIGTERM, SIGINT),
        monitor_(strand_),
        shutdown_timer_(strand_) {}

  int run() {
    listener_ = std::make_shared<Listener>(ioc_, socket_.fd, ctx_);
    signals_.async_wait([this](boost::system::error_code ec, int signo) {
      if (!ec) begin_shutdown(fmt::format("signal {}", signo == SIGTERM ? "SIGTERM" : "SIGINT"));
    });
    log::info("minferd {} serving on {}; model {}; heartbeat timeout {} ms; watchdog {}", MINFER_VERSION,
              socket_.describe(), config_.model, worker_.health_inputs().heartbeat_timeout.count() / 1000000,
              watchdog_ ? fmt::format("every {} ms", watchdog_->count() / 2000) : std::string("off"));
    listener_->start();
    worker_.start();
    net::dispatch(strand_, [this] { monitor_tick(); });

    std::vector<std::thread> threads;
    for (int i = 1; i < config_.http_threads; ++i) threads.emplace_back([this] { ioc_.run(); });
    ioc_.run();
    for (auto& t : threads) t.join();

    worker_.stop();
    if (!worker_.join_for(kEngineJoinTimeout)) {
      // The engine thread is stuck in a step (a hung GPU, or the stall test
      // hook). It cannot be interrupted; leave without it.
      log::error("the engine thread did not stop within {} ms; exiting without it",
                 std::chrono::duration_cast<std::chrono::milliseconds>(kEngineJoinTimeout).count());
      remove_listen_socket(socket_);
      log::flush();
      std::_Exit(exit_code_);
    }
    remove_listen_socket(socket_);
    log::info("minferd stopped");
    return exit_code_;
  }

 private:
  EngineWorker::Hooks worker_hooks() {
    EngineWorker::Hooks h;
    h.on_progress = [](const std::string& status) { notify("STATUS=" + status); };
    h.on_ready = [this](const ModelInfo& info) {
      const std::string status = fmt::format("ready: {} on {}{} (n_ctx {}, chat template {})", info.name,
                                             info.backend, info.backend_reason.empty() ? "" : ": " + info.backend_reason,
                                             info.n_ctx, info.chat_template);
      log::info("{}", status);
      notify("READY=1\nSTATUS=" + status);
      net::post(strand_, [this, status] { ready_status_ = status; });
    };
    h.on_failed = [this](const std::string& error) {
      notify("STATUS=failed: " + error);
      net::post(strand_, [this] {
        exit_code_ = 1;
        begin_shutdown("the engine failed to start");
      });
    };
    return h;
  }

  // Health, STATUS= on changes, and the watchdog: every half WATCHDOG_USEC
  // when systemd asked for pings, else every second.
  void monitor_tick() {
    const HealthVerdict v = judge_health(worker_.health_inputs());
    if (last_state_ != v.state) {
      const bool trouble = std::string_view(v.state) == "stalled" || std::string_view(v.state) == "wedged";
      if (trouble) {
        log::error("engine {}: {}", v.state, v.reason);
        notify(fmt::format("STATUS={}: {}", v.state, v.reason));
      } else if (std::string_view(v.state) == "ready" && last_state_ != nullptr &&
                 (std::string_view(last_state_) == "stalled" || std::string_view(last_state_) == "wedged")) {
        log::info("engine ready again");
        notify("STATUS=" + ready_status_);
      }
      last_state_ = v.state;
    }
    if (watchdog_) {
      if (v.feed_watchdog) {
        notify("WATCHDOG=1");
        metrics_.count_watchdog(true);
      } else {
        metrics_.count_watchdog(false);  // a trip: systemd will restart us if this persists
      }
    }
    monitor_.expires_after(watchdog_ ? std::chrono::duration_cast<Clock::duration>(*watchdog_ / 2)
                                     : Clock::duration(1s));
    monitor_.async_wait([this](boost::system::error_code ec) {
      if (!ec) monitor_tick();
    });
  }

  void begin_shutdown(const std::string& why) {
    if (shutting_down_) {
      log::warn("{} during shutdown: closing now", why);
      force_close_all();
      return;
    }
    shutting_down_ = true;
    ctx_.draining.store(true);
    const size_t in_flight = sessions_.size();
    log::info("{}: shutting down; {} connections open, grace {} ms", why, in_flight, config_.shutdown_grace_ms);
    notify(fmt::format("STOPPING=1\nSTATUS=stopping: draining {} connections", in_flight));
    signals_.async_wait([this](boost::system::error_code ec, int) {
      if (!ec) begin_shutdown("second signal");
    });
    listener_->stop();
    worker_.stop_accepting();
    sessions_.for_each([](const std::shared_ptr<Session>& s) { s->drain(); });
    grace_end_ = Clock::now() + std::chrono::milliseconds(config_.shutdown_grace_ms);
    shutdown_tick();
  }

  void shutdown_tick() {
    const auto now = Clock::now();
    if (sessions_.size() == 0 && worker_.idle()) return finish();
    if (!cancelled_ && now >= grace_end_) {
      log::warn("shutdown grace of {} ms over: cancelling in-flight requests", config_.shutdown_grace_ms);
      cancelled_ = true;
      worker_.cancel_all(CancelReason::kShutdown);
      cancel_end_ = now + kCancelWindow;
    } else if (cancelled_ && now >= cancel_end_) {
      return force_close_all();
    }
    shutdown_timer_.expires_after(kShutdownTick);
    shutdown_timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec) shutdown_tick();
    });
  }

  void force_close_all() {
    if (forced_) return;
    forced_ = true;
    worker_.cancel_all(CancelReason::kShutdown);
    sessions_.for_each([](const std::shared_ptr<Session>& s) { s->force_close(); });
    // Let the closes run, then stop.
    shutdown_timer_.expires_after(100ms);
    shutdown_timer_.async_wait([this](boost::system::error_code) { finish(); });
  }

  void finish() {
    boost::system::error_code ec;
    signals_.cancel(ec);
    monitor_.cancel();
    ioc_.stop();
  }

  const DaemonConfig& config_;
  ListenSocket socket_;
  std::optional<std::chrono::microseconds> watchdog_;
  Metrics metrics_;
  SessionRegistry sessions_;
  EngineWorker worker_;
  ServerContext ctx_;
  net::io_context ioc_;  // after everything its handlers reference: destroyed first
  // The daemon's own handlers (signals, monitor, shutdown) run on one strand.
  net::strand<net::io_context::executor_type> strand_;
  net::signal_set signals_;
  net::steady_timer monitor_;
  net::steady_timer shutdown_timer_;
  std::shared_ptr<Listener> listener_;

  std::string ready_status_ = "ready";
  const char* last_state_ = nullptr;
  bool shutting_down_ = false;
  bool cancelled_ = false;
  bool forced_ = false;
  Clock::time_point grace_end_{}, cancel_end_{};
  int exit_code_ = 0;
};

}  // namespace

int run_daemon(const DaemonConfig& config) {
  ListenSocket socket = open_listen_socket(config);
  if (socket.fd < 0) {
    log::error("cannot serve: {}", socket.error);
    notify("STATUS=failed: " + socket.error);
    return 1;
  }
  Daemon d(config, std::move(socket));
  return d.run();
}

}  // namespace minfer::daemon
