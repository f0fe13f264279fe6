// spdlog behind platform/log.h: a stderr sink by default, journald (with
// structured fields and syslog priorities) when configured.
#include "platform/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#ifdef MINFER_HAVE_SYSTEMD
#include <syslog.h>
#include <systemd/sd-journal.h>
#endif

namespace minfer::log {
namespace {

std::atomic<Level> g_level{Level::kInfo};
std::atomic<Sink> g_sink{Sink::kStderr};
std::mutex g_mutex;

spdlog::level::level_enum to_spdlog(Level l) {
  switch (l) {
    case Level::kTrace: return spdlog::level::trace;
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: return spdlog::level::err;
    case Level::kCritical: return spdlog::level::critical;
    case Level::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

spdlog::logger& stderr_logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>("minfer", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
    l->set_level(spdlog::level::trace);
    return l;
  }();
  return *logger;
}

#ifdef MINFER_HAVE_SYSTEMD
int syslog_priority(Level l) {
  switch (l) {
    case Level::kTrace:
    case Level::kDebug: return LOG_DEBUG;
    case Level::kInfo: return LOG_INFO;
    case Level::kWarn: return LOG_WARNING;
    case Level::kError: return LOG_ERR;
    case Level::kCritical: return LOG_CRIT;
    case Level::kOff: return LOG_DEBUG;
  }
  return LOG_INFO;
}

void write_journal(Level level, std::string_view message, const Fields& fields) {
  // sd_journal_sendv takes "KEY=value" iovecs; MESSAGE, PRIORITY and
  // SYSLOG_IDENTIFIER first, then the caller's fields.
  std::vector<std::string> lines;
  lines.reserve(fields.size() + 3);
  lines.push_back("MESSAGE=" + std::string(message));
  lines.push_back("PRIORITY=" + std::to_string(syslog_priority(level)));
  lines.push_back("SYSLOG_IDENTIFIER=minferd");
  for (const auto& [k, v] : fields) lines.push_back(k + "=" + v);
  std::vector<iovec> iov(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    iov[i].iov_base = lines[i].data();
    iov[i].iov_len = lines[i].size();
  }
  sd_journal_sendv(iov.data(), static_cast<int>(iov.size()));
}
#endif

}  // namespace

void write(Level level, std::string_view message, const Fields& fields) {
  if (!enabled(level)) return;
#ifdef MINFER_HAVE_SYSTEMD
  if (g_sink.load() == Sink::kJournald) {
    write_journal(level, message, fields);
    return;
  }
#endif
  if (fields.empty()) {
    stderr_logger().log(to_spdlog(level), "{}", message);
    return;
  }
  std::string line(message);
  for (const auto& [k, v] : fields) line += fmt::format(" {}={}", k, v);
  stderr_logger().log(to_spdlog(level), "{}", line);
}

void set_level(Level level) { g_level.store(level); }
Level level() { return g_level.load(); }
bool enabled(Level l) { return l != Level::kOff && static_cast<int>(l) >= static_cast<int>(g_level.load()); }

bool parse_level(std::string_view name, Level* out) {
  static constexpr std::pair<std::string_view, Level> kNames[] = {
      {"trace", Level::kTrace}, {"debug", Level::kDebug}, {"info", Level::kInfo},
      {"warn", Level::kWarn},   {"warning", Level::kWarn}, {"error", Level::kError},
      {"critical", Level::kCritical}, {"off", Level::kOff}};
  for (const auto& [n, l] : kNames) {
    if (n == name) {
      *out = l;
      return true;
    }
  }
  return false;
}

void configure(Sink sink, Level lvl) {
  std::lock_guard lock(g_mutex);
  set_level(lvl);
#ifdef MINFER_HAVE_SYSTEMD
  g_sink.store(sink);
#else
  g_sink.store(Sink::kStderr);
  if (sink == Sink::kJournald) {
    write(Level::kWarn, "journald logging requested but this build has no libsystemd; logging to stderr");
  }
#endif
}

Sink sink() { return g_sink.load(); }

bool stderr_is_journal() {
  const char* v = std::getenv("JOURNAL_STREAM");
  if (v == nullptr) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(v, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  if (::fstat(2, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == dev && static_cast<unsigned long long>(st.st_ino) == ino;
}

void flush() { stderr_logger().flush(); }

}  // namespace minfer::log
