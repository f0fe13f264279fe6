// Service-manager notifications (sd_notify(3)) and the watchdog interval the
// manager expects. With libsystemd (MINFER_SYSTEMD=ON) these call it; without,
// the same datagram protocol is spoken directly so that a build without
// libsystemd still runs correctly under systemd.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace minfer::platform {

// Sends newline-separated assignments such as "READY=1\nSTATUS=ready" to
// $NOTIFY_SOCKET. No-op (true) when not started by a service manager; false
// when the send failed (the caller logs it; notifying is never fatal).
bool notify_service_manager(std::string_view state);

// WATCHDOG_USEC when set for this process (WATCHDOG_PID unset or ours);
// nullopt when the manager expects no pings.
std::optional<std::chrono::microseconds> watchdog_interval();

}  // namespace minfer::platform
