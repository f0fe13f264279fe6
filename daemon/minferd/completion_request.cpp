// POST /v1/completions: the prompt is a string, or token ids, or a one-element
// array of either (OpenAI's batch form with one prompt). Several prompts are a
// 400: one request is one generation here.
#include <fmt/format.h>

#include "daemon/minferd/json_fields.h"
#include "daemon/minferd/request_parse.h"

namespace minfer::daemon {
namespace {

std::optional<ApiError> read_prompt(const Json& body, const ModelLimits& limits, GenerationSpec* out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) {
    return invalid_request("prompt", "missing_field", "'prompt' is required (a string or an array of token ids)");
  }
  const Json* p = &*it;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    out->prompt_text = p->get<std::string>();
    return std::nullopt;
  }
  if (p->is_array()) {
    if (p->empty()) return invalid_request("prompt", "invalid_value", "'prompt' is an empty array");
    if ((*p)[0].is_string() || (*p)[0].is_array()) {
      return invalid_request("prompt", "invalid_value",
                             fmt::format("'prompt' holds {} prompts; one request generates for one prompt", p->size()));
    }
    out->prompt_is_tokens = true;
    return read_token_ids(*p, "prompt", limits.vocab_size, &out->prompt_tokens);
  }
  return invalid_request("prompt", "invalid_type",
                         fmt::format("'prompt' must be a string or an array of token ids, got {}", json_type_phrase(*p)));
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
