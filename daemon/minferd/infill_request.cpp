// POST /infill: llama.cpp's code completion, as editor plugins (llama.vscode,
// llama.vim) call it. The code before the cursor's line (input_prefix), the
// cursor's line up to the cursor (prompt), the code after it (input_suffix)
// and other files (input_extra), all optional; the token limit is llama.cpp's
// n_predict; sampling and stop strings are the fields /v1/completions takes
// (parse_generation_fields, which refuses what /infill's answer has no place
// for); and llama.cpp's limits on the completion's lines, n_indent and
// t_max_predict_ms (GenerationRequest::min_indent, max_predict_ms). The
// engine thread assembles the prompt (Engine::infill_prompt).
//
// Hints the llama.cpp clients send are ignored, as every field minferd does
// not know is: cache_prompt (the prefix cache is always on), samplers (the
// sampler's order is fixed), t_max_prompt_ms (the daemon's
// --request-timeout-ms bounds a request), response_fields (the whole answer
// is sent) and id_slot (one engine thread is one slot).
#include <fmt/format.h>

#include <limits>
#include <utility>

#include "daemon/minferd/json_fields.h"
#include "daemon/minferd/request_parse.h"

namespace minfer::daemon {
namespace {

// A string field of input_extra's chunk `param` ("input_extra[2]").
std::optional<ApiError> read_chunk_string(const Json& chunk, const char* name, const std::string& param,
                                          std::optional<std::string>* out) {
  auto it = chunk.find(name);
  if (it == chunk.end() || it->is_null()) return std::nullopt;
  const std::string field = fmt::format("{}.{}", param, name);
  if (!it->is_string()) {
    return invalid_request(field, "invalid_type",
                           fmt::format("'{}' must be a string, got {}", field, json_type_phrase(*it)));
  }
  *out = it->get<std::string>();
  return std::nullopt;
}

// input_extra: [{"filename": string (default "tmp"), "text": string}], as
// llama.cpp checks it.
std::optional<ApiError> read_extra(const Json& body, std::vector<InfillChunk>* out) {
  auto it = body.find("input_extra");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) {
    return invalid_request("input_extra", "invalid_type",
                           fmt::format("'input_extra' must be an array of {{\"filename\", \"text\"}} objects, got {}",
                                       json_type_phrase(*it)));
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& c = (*it)[i];
    const std::string param = fmt::format("input_extra[{}]", i);
    if (!c.is_object()) {
      return invalid_request(param, "invalid_type",
                             fmt::format("'{}' must be an object {{\"filename\", \"text\"}}, got {}", param,
                                         json_type_phrase(c)));
    }
    std::optional<std::string> text, filename;
    if (auto e = read_chunk_string(c, "text", param, &text)) return e;
    if (!text) {
      return invalid_request(param + ".text", "missing_field",
                             fmt::format("'{}' has no \"text\" (the chunk's text, a string)", param));
    }
    if (auto e = read_chunk_string(c, "filename", param, &filename)) return e;
    InfillChunk& chunk = out->emplace_back();
    chunk.text = std::move(*text);
    if (filename) chunk.filename = std::move(*filename);
  }
  return std::nullopt;
}

// n_indent, t_max_predict_ms: an integer, 0 (llama.cpp's default) for off.
std::optional<ApiError> read_line_limit(const Json& body, const char* name, int* out) {
  std::optional<int64_t> v;
  if (auto e = read_integer(body, name, &v)) return e;
  if (!v) return std::nullopt;
  constexpr int kMax = std::numeric_limits<int>::max();
  if (*v < 0 || *v > kMax) {
    return invalid_request(name, "invalid_value", fmt::format("'{}' is {}; allowed 0 (off) to {}", name, *v, kMax));
  }
  *out = static_cast<int>(*v);
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_infill_request(std::string_view body, const ModelLimits& limits, GenerationSpec* out) {
  Json j;
  if (auto e = parse_json_object(body, &j)) return e;
  *out = GenerationSpec{};
  out->kind = ApiKind::kInfill;
  if (!limits.fill_in_middle) {
    return invalid_request("input_suffix", "unsupported_parameter",
                           "/infill fills in the middle, and the model's vocabulary has no FIM markers (a code model's "
                           "<|fim_prefix|>, <|fim_suffix|>, <|fim_middle|> or the like)");
  }
  InfillInput& in = out->infill;
  const std::pair<const char*, std::string*> texts[] = {
      {"input_prefix", &in.prefix}, {"input_suffix", &in.suffix}, {"prompt", &in.prompt}};
  for (const auto& [name, dest] : texts) {
    std::optional<std::string> s;
    if (auto e = read_string(j, name, &s)) return e;
    if (s) *dest = std::move(*s);
  }
  if (auto e = read_extra(j, &in.extra)) return e;
  if (auto e = read_line_limit(j, "n_indent", &out->min_indent)) return e;
  if (auto e = read_line_limit(j, "t_max_predict_ms", &out->max_predict_ms)) return e;
  return parse_generation_fields(j, limits, out);
}

}  // namespace minfer::daemon
