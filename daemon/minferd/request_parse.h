// The request → validated generation request path, with no engine: request
// bodies become specs (generation_spec.h), and a spec plus its prompt tokens
// becomes the engine's GenerationRequest. Everything here is a pure function
// of its arguments, so the fuzzer of the later reliability issue drives it
// directly. Each error is a 400 naming the field, the value and the limit.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "daemon/minferd/api_error.h"
#include "daemon/minferd/generation_spec.h"
#include "engine/api.h"

namespace minfer::daemon {

// Limits on what a request may carry, beyond the model's.
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopBytes = 256;

// POST /v1/completions.
std::optional<ApiError> parse_completion_request(std::string_view body, const ModelLimits& limits,
                                                 GenerationSpec* out);
// POST /v1/chat/completions.
std::optional<ApiError> parse_chat_request(std::string_view body, const ModelLimits& limits, GenerationSpec* out);
// POST /infill (llama.cpp's, for editor plugins; infill_request.cpp).
std::optional<ApiError> parse_infill_request(std::string_view body, const ModelLimits& limits, GenerationSpec* out);
// POST /tokenize and /detokenize.
std::optional<ApiError> parse_tokenize_request(std::string_view body, TokenizeSpec* out);
std::optional<ApiError> parse_detokenize_request(std::string_view body, const ModelLimits& limits,
                                                 DetokenizeSpec* out);

// The fields the generation endpoints share (sampling, limits, stop, stream,
// n and the features we refuse rather than ignore). Used by the three above.
std::optional<ApiError> parse_generation_fields(const nlohmann::ordered_json& body, const ModelLimits& limits,
                                                GenerationSpec* out);

// Chat's tools, tool_choice and parallel_tool_calls (chat_tools.cpp), after
// the shared fields.
std::optional<ApiError> parse_chat_tools(const nlohmann::ordered_json& body, const ModelLimits& limits,
                                         GenerationSpec* out);

// After tokenization: the prompt must leave room in the context for
// max_tokens (OpenAI's rule: prompt + max_tokens ≤ context, else 400
// context_length_exceeded). Fills `out` for Engine::generate; `seed` is used
// when the request gave none.
std::optional<ApiError> make_generation_request(const GenerationSpec& spec, std::vector<int32_t> prompt,
                                                const ModelLimits& limits, uint64_t seed, GenerationRequest* out);

}  // namespace minfer::daemon
