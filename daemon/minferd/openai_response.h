// Response bodies in the OpenAI shapes: the completion and chat completion
// objects, their streamed chunks, and the SSE framing of a chunk.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "daemon/minferd/generation_spec.h"
#include "engine/api.h"

namespace minfer::daemon {

// What every object of one response shares.
struct ResponseIdentity {
  ApiKind kind = ApiKind::kCompletion;
  std::string id;       // "cmpl-…" / "chatcmpl-…"
  int64_t created = 0;  // unix seconds
  std::string model;
};

// "length" for max tokens (or a full context), "stop" for EOS or a stop
// string; nullptr for finishes that are not completions (cancel, deadline, error).
const char* openai_finish_reason(FinishReason r);

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens whose KV the prefix cache reused (OpenAI's prompt_tokens_details)
};

std::string completion_body(const ResponseIdentity& id, std::string_view text, const char* finish_reason,
                             const Usage& usage);

// Streamed chunks. `usage_null`: with stream_options.include_usage every chunk
// carries "usage": null and a last chunk (usage_chunk) carries the counts.
std::string role_chunk(const ResponseIdentity& id, bool usage_null);  // chat's first chunk: the assistant role
std::string text_chunk(const ResponseIdentity& id, std::string_view text, bool usage_null);
std::string finish_chunk(const ResponseIdentity& id, const char* finish_reason, bool usage_null);
std::string usage_chunk(const ResponseIdentity& id, const Usage& usage);

// One server-sent event carrying `data`, and the terminator.
std::string sse_event(std::string_view data);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace minfer::daemon
