// What a client asked for, parsed and validated from the request body with no
// engine at hand: the prompt (text, token ids, chat messages or infill's code
// around a cursor), limits and sampling. The engine thread later turns the
// prompt into tokens and calls make_generation_request (request_parse.h) to
// check it against the context.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/api.h"
#include "engine/chat/chat_template.h"
#include "engine/sampling/json_schema.h"
#include "engine/sampling/sampler.h"

namespace minfer::daemon {

// The model's limits, as plain data (the parser never sees an Engine).
struct ModelLimits {
  int n_ctx = 0;
  int vocab_size = 0;
  std::string chat_template;  // its name (ModelInfo::chat_template)
  ToolStyle tool_style = ToolStyle::kNone;  // how the chat template writes tools, if it does
  bool fill_in_middle = false;  // the vocabulary has FIM markers (ModelInfo::fill_in_middle)
};

// Which endpoint's request and answer: OpenAI's completions and chat
// completions, or llama.cpp's /infill (its native answer shape).
enum class ApiKind { kCompletion, kChat, kInfill };

// The field that errors about a kind's prompt name: chat's messages,
// completions' prompt; an infill prompt too long for the context is its FIM
// part (the extra context is cut first), most often its prefix.
inline const char* prompt_param(ApiKind kind) {
  switch (kind) {
    case ApiKind::kCompletion: return "prompt";
    case ApiKind::kChat: return "messages";
    case ApiKind::kInfill: return "input_prefix";
  }
  return "prompt";
}

inline constexpr int kMaxChoices = 128;  // OpenAI's limit on n; here on prompts × n

// Chat's tool_choice: none (the default without tools: tools are not even
// shown to the model), auto (the default with tools: the model may call
// them), required (it must call one), or one named function.
enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

// A completion's prompt: its text, or token ids taken exactly as given.
struct CompletionPrompt {
  std::string text;
  bool is_tokens = false;
  std::vector<int32_t> tokens;
};

// /infill's prompt, as an editor plugin sends it; the engine thread builds
// the tokens (Engine::infill_prompt).
struct InfillInput {
  std::string prefix;   // input_prefix: the code before the cursor's line
  std::string suffix;   // input_suffix: the code after the cursor
  std::string prompt;   // prompt: the cursor's line up to the cursor
  std::vector<InfillChunk> extra;  // input_extra: other files
};

struct GenerationSpec {
  ApiKind kind = ApiKind::kCompletion;
  // Completions: one prompt, or several (OpenAI's batch form), each given n
  // choices in turn. Chat: the messages. Infill: its input.
  std::vector<CompletionPrompt> prompts;
  std::vector<ChatMessage> messages;
  InfillInput infill;
  int n_prompts() const { return kind == ApiKind::kCompletion ? static_cast<int>(prompts.size()) : 1; }

  // Absent: completion 16 (OpenAI), chat and infill (n_predict -1) the rest
  // of the context.
  std::optional<int> max_tokens;
  // Choices (OpenAI's n) of each prompt: generated one after another, choice
  // i sampled with the seed + i; each after a prompt's first reuses its KV
  // through the prefix cache where it is on. A request holds at most
  // kMaxChoices choices in all (prompts × n).
  int n = 1;
  // Completions' best_of (OpenAI's): each prompt's candidates, generated as
  // choices are (candidate i with the seed + i); the n with the highest
  // log-probability per generated token are answered, best first. 0 (or n):
  // the n choices themselves. Never with a stream: the best are known at the
  // end. Counts against kMaxChoices in place of n.
  int best_of = 0;
  SamplingParams sampling;                // seed filled below when given
  std::optional<uint64_t> seed;           // absent: a random seed per request (OpenAI semantics)
  std::vector<std::string> stop;
  // Infill's n_indent and t_max_predict_ms, as llama.cpp's editor plugins
  // send them (GenerationRequest::min_indent, max_predict_ms); 0: off.
  int min_indent = 0;
  int max_predict_ms = 0;
  bool stream = false;
  bool include_usage = false;             // stream_options.include_usage
  // Log-probabilities (GenerationRequest::top_logprobs): -1 none; else each
  // token's and this many alternatives (completions' "logprobs": N, chat's
  // "logprobs": true with "top_logprobs": N).
  int top_logprobs = -1;
  // Completions' echo: the answer's text starts with the prompt, and with
  // logprobs its tokens are listed first (the first one with none).
  bool echo = false;
  // Completions' suffix (not empty): each prompt is the prefix of a
  // fill-in-the-middle prompt (Engine::fill_in_middle_prompt) and the reply
  // what goes between it and the suffix.
  std::optional<std::string> suffix;
  bool json_object = false;  // response_format {"type": "json_object"}
  std::shared_ptr<const JsonSchema> json_schema;  // response_format {"type": "json_schema"}, compiled

  // Chat tools (OpenAI's function calling): the declared tools, each a JSON
  // text in the client's key order (what the template prints), and how the
  // reply may use them. A forced call (required, named) is the prompt ending
  // in the template's call opener and the reply held to tool_call_schema;
  // with auto, the calls the model opens are held to it (when the tools'
  // schemas are in the supported subset; else it is null).
  std::vector<std::string> tools;
  ToolChoice tool_choice = ToolChoice::kNone;
  std::string tool_choice_name;  // kNamed
  bool parallel_tool_calls = true;  // false: the reply ends after its first call
  std::shared_ptr<const JsonSchema> tool_call_schema;
  // Chat: the template's enable_thinking (chat_template_kwargs; unset when
  // not given), and whether a thinking model's reasoning comes back apart as
  // reasoning_content (reasoning_format "auto"/"deepseek", the default) or
  // stays in the content ("none").
  std::optional<bool> enable_thinking;
  bool split_reasoning = true;
  bool forced_tool_call() const { return tool_choice == ToolChoice::kRequired || tool_choice == ToolChoice::kNamed; }
};

// POST /tokenize: {"content", "add_special" (false), "parse_special" (true), "with_pieces" (false)}
// as llama.cpp's server.
struct TokenizeSpec {
  std::string content;
  bool add_special = false;
  bool parse_special = true;
  bool with_pieces = false;
};

// POST /detokenize: {"tokens": [ids]}.
struct DetokenizeSpec {
  std::vector<int32_t> tokens;
};

}  // namespace minfer::daemon
