#include "daemon/minferd/request_log.h"

#include <fmt/format.h>

#include "platform/log.h"

namespace minfer::daemon {

void log_request(const RequestRecord& r) {
  const log::Level level = r.status >= 500 ? log::Level::kWarn : log::Level::kInfo;
  if (!log::enabled(level)) return;
  std::string message = fmt::format("request {} {} {} {} {:.1f} ms", r.id, r.method, r.target, r.status, r.total_ms);
  if (r.gen_tokens >= 0) {
    message += fmt::format(" prompt {}", r.prompt_tokens);
    if (r.cached_tokens > 0) message += fmt::format(" ({} cached)", r.cached_tokens);
    message += fmt::format(" gen {}", r.gen_tokens);
    if (r.choices > 1) message += fmt::format(" in {} choices", r.choices);
  }
  if (!r.finish_reason.empty()) message += " " + r.finish_reason;
  if (!r.cancel_reason.empty()) message += " (" + r.cancel_reason + ")";

  log::Fields f;
  f.reserve(20);
  f.emplace_back("REQUEST_ID", std::to_string(r.id));
  f.emplace_back("HTTP_METHOD", r.method);
  f.emplace_back("HTTP_PATH", endpoint_label(r.endpoint));
  f.emplace_back("HTTP_STATUS", std::to_string(r.status));
  f.emplace_back("DURATION_MS", fmt::format("{:.3f}", r.total_ms));
  if (r.peer.valid) {
    f.emplace_back("PEER_PID", std::to_string(r.peer.pid));
    f.emplace_back("PEER_UID", std::to_string(r.peer.uid));
    f.emplace_back("PEER_GID", std::to_string(r.peer.gid));
  }
  if (r.queue_ms >= 0) f.emplace_back("QUEUE_MS", fmt::format("{:.3f}", r.queue_ms));
  if (r.prep_ms >= 0) f.emplace_back("PREP_MS", fmt::format("{:.3f}", r.prep_ms));
  if (r.engine_ms >= 0) f.emplace_back("ENGINE_MS", fmt::format("{:.3f}", r.engine_ms));
  if (r.prompt_tokens >= 0) f.emplace_back("PROMPT_TOKENS", std::to_string(r.prompt_tokens));
  if (r.cached_tokens >= 0) f.emplace_back("CACHED_TOKENS", std::to_string(r.cached_tokens));
  if (r.tool_calls >= 0) f.emplace_back("TOOL_CALLS", std::to_string(r.tool_calls));
  if (r.gen_tokens >= 0) f.emplace_back("GEN_TOKENS", std::to_string(r.gen_tokens));
  if (r.choices >= 0) f.emplace_back("CHOICES", std::to_string(r.choices));
  if (r.ttft_ms >= 0) f.emplace_back("TTFT_MS", fmt::format("{:.3f}", r.ttft_ms));
  if (r.tokens_per_s >= 0) f.emplace_back("TOKENS_PER_S", fmt::format("{:.1f}", r.tokens_per_s));
  if (!r.finish_reason.empty()) f.emplace_back("FINISH_REASON", r.finish_reason);
  if (!r.cancel_reason.empty()) f.emplace_back("CANCEL_REASON", r.cancel_reason);
  if (!r.error_code.empty()) f.emplace_back("ERROR_CODE", r.error_code);
  if (!r.backend.empty()) f.emplace_back("BACKEND", r.backend);
  log::write(level, message, f);
}

}  // namespace minfer::daemon
