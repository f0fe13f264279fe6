// Response bodies in the OpenAI shapes: the completion and chat completion
// objects, their streamed chunks, and the SSE framing of a chunk.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "daemon/minferd/generation_spec.h"
#include "engine/api.h"
#include "engine/chat/tool_calls.h"

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
// The same, but "tool_calls" for a reply that ended (EOS or stop) having called tools.
const char* openai_finish_reason(FinishReason r, bool called_tools);

// The id of choice `choice`'s index-th tool call: "call_", the response's
// id and the index (and the choice, after the first), so unique across the
// daemon's life and restarts.
std::string tool_call_id(const ResponseIdentity& id, int choice, int index);

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens whose KV the prefix cache reused (OpenAI's prompt_tokens_details)
};

// A choice's (or a chunk's) log-probabilities, when the request asked for
// them: its tokens', in OpenAI's shape for the endpoint — completions
// {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}],
// "text_offset"}, chat {"content": [{"token", "logprob", "bytes",
// "top_logprobs": [{"token", "logprob", "bytes"}]}], "refusal": null}. Token
// strings are the tokens' bytes with any byte that is not UTF-8 as U+FFFD
// ("bytes" keeps them exact: a character split over tokens).
struct ChoiceLogprobs {
  std::span<const TokenLogprobs> tokens;
  int64_t text_offset = 0;  // characters of the choice's tokens before the first of these
};
// Characters the tokens' bytes hold (UTF-8 lead bytes): what text_offset
// advances by from one chunk to the next.
int64_t logprobs_text_chars(std::span<const TokenLogprobs> tokens);

// One choice of a whole answer. `tools` (chat with tools or a thinking
// model): the message is its content (null when empty and there are calls)
// and its tool_calls; `text` is then unused. `reasoning`, when not empty: the
// message's reasoning_content.
struct ChoiceBody {
  std::string_view text;
  const char* finish_reason = nullptr;
  const ChoiceLogprobs* logprobs = nullptr;
  const ToolReply* tools = nullptr;
  std::string_view reasoning;
};
// The answer with its choices, indexed in order (n of them; OpenAI's n).
std::string completion_body(const ResponseIdentity& id, std::span<const ChoiceBody> choices, const Usage& usage);
// The answer with one choice.
std::string completion_body(const ResponseIdentity& id, std::string_view text, const char* finish_reason,
                            const Usage& usage, const ChoiceLogprobs* logprobs = nullptr,
                            const ToolReply* tools = nullptr, std::string_view reasoning = {});

// Streamed chunks, each for one choice (its "index"). `usage_null`: with
// stream_options.include_usage every chunk carries "usage": null and a last
// chunk (usage_chunk) carries the counts.
std::string role_chunk(const ResponseIdentity& id, int choice, bool usage_null);  // chat's first chunk: the assistant role
std::string text_chunk(const ResponseIdentity& id, int choice, std::string_view text, bool usage_null,
                       const ChoiceLogprobs* logprobs = nullptr);
// A chat chunk whose delta is a piece of a thinking model's reasoning
// ({"reasoning_content": ...}, as OpenAI-compatible servers stream it).
std::string reasoning_chunk(const ResponseIdentity& id, int choice, std::string_view text, bool usage_null);
// A chat chunk whose delta is one whole tool call (OpenAI streams a call's
// arguments in pieces; one piece holding all of them is the same stream).
std::string tool_call_chunk(const ResponseIdentity& id, int choice, int index, const ToolCall& call, bool usage_null);
std::string finish_chunk(const ResponseIdentity& id, int choice, const char* finish_reason, bool usage_null,
                         const ChoiceLogprobs* logprobs = nullptr);
std::string usage_chunk(const ResponseIdentity& id, const Usage& usage);

// One server-sent event carrying `data`, and the terminator.
std::string sse_event(std::string_view data);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace minfer::daemon
