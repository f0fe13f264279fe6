// Logging for every module: a thin face over spdlog so that only platform/
// includes spdlog. Messages are formatted with {fmt}.
//
// Destinations are configured once by the program (stderr by default; the
// journald sink when running under systemd, see log.cpp).
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace minfer::log {

enum class Level { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };

// Structured fields attached to a line (journald keys such as REQUEST_ID);
// on stderr they are appended as KEY=value.
using Fields = std::vector<std::pair<std::string, std::string>>;

void write(Level level, std::string_view message, const Fields& fields = {});
void set_level(Level level);
Level level();
bool enabled(Level level);
// Parses "trace|debug|info|warn|error|critical|off".
bool parse_level(std::string_view name, Level* out);

enum class Sink { kStderr, kJournald };
// Chooses the destination. kJournald falls back to stderr, with a warning, when
// the build has no systemd support.
void configure(Sink sink, Level level);
Sink sink();
// True when stderr is a stream into the journal: JOURNAL_STREAM names the
// device and inode of our stderr (systemd.exec(5)). A child that inherited the
// variable but not the stream (redirected stderr) gets false.
bool stderr_is_journal();
// Flushes buffered lines (before a deliberate _exit).
void flush();

template <class... Args>
void trace(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::kTrace)) write(Level::kTrace, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::kDebug)) write(Level::kDebug, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::kInfo)) write(Level::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::kWarn)) write(Level::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::kError)) write(Level::kError, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace minfer::log
