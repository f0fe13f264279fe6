#include "daemon/minferd/infill_response.h"

#include <nlohmann/json.hpp>

namespace minfer::daemon {
namespace {

using Json = nlohmann::json;

// Generated text can hold invalid UTF-8 (a byte-level vocabulary): replace
// it rather than throw, as the OpenAI bodies do.
std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

const char* infill_stop_type(const GenerationResult& r) {
  switch (r.finish) {
    case FinishReason::kEos: return "eos";
    case FinishReason::kStop: return r.stop_string.empty() ? "eos" : "word";
    case FinishReason::kLength: return "limit";
    case FinishReason::kCancelled:
    case FinishReason::kDeadline:
    case FinishReason::kError: return "none";  // never answered: the request ends in an error
  }
  return "none";
}

std::string infill_body(std::string_view model, const GenerationResult& r, bool truncated, bool streamed) {
  const Json timings = {{"prompt_n", r.n_prompt - r.n_cached},
                        {"prompt_ms", r.prefill_ms},
                        {"prompt_per_second", r.prefill_tokens_per_s()},
                        {"predicted_n", r.n_generated},
                        {"predicted_ms", r.decode_ms},
                        {"predicted_per_second", r.decode_tokens_per_s()}};
  return dump(Json{{"index", 0},
                   {"content", streamed ? std::string() : r.text},
                   {"tokens", Json::array()},
                   {"id_slot", 0},
                   {"stop", true},
                   {"model", std::string(model)},
                   {"tokens_predicted", r.n_generated},
                   {"tokens_evaluated", r.n_prompt},
                   {"tokens_cached", r.n_cached},
                   {"truncated", truncated},
                   {"stop_type", infill_stop_type(r)},
                   {"stopping_word", r.stop_string},
                   {"timings", timings}});
}

std::string infill_chunk(std::string_view piece, int tokens_predicted) {
  return dump(Json{{"index", 0}, {"content", std::string(piece)}, {"stop", false}, {"tokens_predicted", tokens_predicted}});
}

}  // namespace minfer::daemon
