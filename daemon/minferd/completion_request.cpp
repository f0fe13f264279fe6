// POST /v1/completions: the prompt is a string, or token ids, or an array of
// either (OpenAI's batch form: every prompt gets its n choices, in order).
#include <fmt/format.h>

#include "daemon/minferd/json_fields.h"
#include "daemon/minferd/request_parse.h"

namespace minfer::daemon {
namespace {

std::optional<ApiError> read_one_prompt(const Json& p, const std::string& param, const ModelLimits& limits,
                                        CompletionPrompt* out) {
  if (p.is_string()) {
    out->text = p.get<std::string>();
    return std::nullopt;
  }
  if (p.is_array()) {
    if (p.empty()) return invalid_request(param, "invalid_value", fmt::format("'{}' is an empty array", param));
    out->is_tokens = true;
    return read_token_ids(p, param, limits.vocab_size, &out->tokens);
  }
  return invalid_request(param, "invalid_type",
                         fmt::format("'{}' must be a string or an array of token ids, got {}", param, json_type_phrase(p)));
}

std::optional<ApiError> read_prompt(const Json& body, const ModelLimits& limits, GenerationSpec* out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) {
    return invalid_request("prompt", "missing_field", "'prompt' is required (a string or an array of token ids)");
  }
  const Json& p = *it;
  // An array of strings or of token-id arrays is several prompts; an array
  // of numbers is one prompt's token ids.
  const bool several = p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array());
  if (!several) return read_one_prompt(p, "prompt", limits, &out->prompts.emplace_back());
  if (p.size() > static_cast<size_t>(kMaxChoices)) {
    return invalid_request("prompt", "invalid_value",
                           fmt::format("'prompt' holds {} prompts; a request holds at most {}", p.size(), kMaxChoices));
  }
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i].is_string() != p[0].is_string()) {
      return invalid_request("prompt", "invalid_type",
                             fmt::format("'prompt' mixes strings and token arrays (prompt {} is {})", i,
                                         json_type_phrase(p[i])));
    }
    if (auto e = read_one_prompt(p[i], fmt::format("prompt[{}]", i), limits, &out->prompts.emplace_back())) return e;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_completion_request(std::string_view body, const ModelLimits& limits,
                                                 GenerationSpec* out) {
  Json j;
  if (auto e = parse_json_object(body, &j)) return e;
  *out = GenerationSpec{};
  out->kind = ApiKind::kCompletion;
  if (auto e = read_prompt(j, limits, out)) return e;
  return parse_generation_fields(j, limits, out);
}

}  // namespace minfer::daemon
