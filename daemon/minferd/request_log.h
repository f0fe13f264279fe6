// The one log line per request (info; warn for 5xx). On journald every value
// is also a structured field (REQUEST_ID, PROMPT_TOKENS, CACHED_TOKENS, GEN_TOKENS, CHOICES, TTFT_MS,
// TOKENS_PER_S, FINISH_REASON, BACKEND, PEER_PID/UID/GID, ...) so that
// `journalctl -o json` and filters like `journalctl FINISH_REASON=cancelled`
// work; on stderr they follow the message as KEY=value.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/minferd/routes.h"
#include "platform/peer_credentials.h"

namespace minfer::daemon {

struct RequestRecord {
  uint64_t id = 0;
  std::string method, target;
  Endpoint endpoint = Endpoint::kNone;
  int status = 0;  // 499: the client went away before an answer
  platform::PeerCredentials peer;
  double total_ms = 0, queue_ms = -1, prep_ms = -1, engine_ms = -1;
  int prompt_tokens = -1, cached_tokens = -1, gen_tokens = -1;
  int choices = -1;     // generation: the choices generated (n for each prompt), their tokens all in gen_tokens
  int tool_calls = -1;  // chat with tools: the calls the reply made
  double ttft_ms = -1, tokens_per_s = -1;
  std::string finish_reason;  // stop | length | cancelled | deadline | error
  std::string cancel_reason;  // client_gone | slow_reader | shutdown | deadline
  std::string error_code;
  std::string backend;
};

void log_request(const RequestRecord& r);

}  // namespace minfer::daemon
