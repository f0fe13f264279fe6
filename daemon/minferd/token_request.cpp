// POST /tokenize and /detokenize, in the shapes of llama.cpp's server.
#include <fmt/format.h>

#include "daemon/minferd/json_fields.h"
#include "daemon/minferd/request_parse.h"

namespace minfer::daemon {

std::optional<ApiError> parse_tokenize_request(std::string_view body, TokenizeSpec* out) {
  Json j;
  if (auto e = parse_json_object(body, &j)) return e;
  *out = TokenizeSpec{};
  std::optional<std::string> content;
  if (auto e = read_string(j, "content", &content)) return e;
  if (!content) return invalid_request("content", "missing_field", "'content' is required (the text to tokenize)");
  out->content = std::move(*content);
  std::optional<bool> b;
  if (auto e = read_bool(j, "add_special", &b)) return e;
  out->add_special = b.value_or(false);
  b.reset();
  if (auto e = read_bool(j, "parse_special", &b)) return e;
  out->parse_special = b.value_or(true);
  b.reset();
  if (auto e = read_bool(j, "with_pieces", &b)) return e;
  out->with_pieces = b.value_or(false);
  return std::nullopt;
}

std::optional<ApiError> parse_detokenize_request(std::string_view body, const ModelLimits& limits,
                                                 DetokenizeSpec* out) {
  Json j;
  if (auto e = parse_json_object(body, &j)) return e;
  *out = DetokenizeSpec{};
  auto it = j.find("tokens");
  if (it == j.end() || it->is_null()) {
    return invalid_request("tokens", "missing_field", "'tokens' is required (an array of token ids)");
  }
  return read_token_ids(*it, "tokens", limits.vocab_size, &out->tokens);
}

}  // namespace minfer::daemon
