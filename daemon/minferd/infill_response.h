// /infill's answers, in llama.cpp's native /completion shape (not OpenAI's):
// one object with the text, how it stopped, the counts and the timings; or,
// streamed, an object per piece of text and the whole object last with an
// empty content. Its errors are the daemon's usual ones (api_error.h).
#pragma once

#include <string>
#include <string_view>

#include "engine/api.h"

namespace minfer::daemon {

// llama.cpp's stop_type: "eos" (the model ended it, or a constrained output
// closed), "word" (a stop string), "limit" (n_predict, a full context, or a
// line limit: n_indent, t_max_predict_ms).
const char* infill_stop_type(const GenerationResult& r);

// The answer: {"index": 0, "content", "tokens": [], "id_slot": 0, "stop":
// true, "model", "tokens_predicted", "tokens_evaluated" (the prompt's
// tokens), "tokens_cached" (those the prefix cache reused), "truncated"
// (extra context cut to fit), "stop_type", "stopping_word" (the stop string,
// or ""), "timings"}. The timings are the engine's own (GenerationResult):
// prompt_n the prompt tokens evaluated (not reused), prompt_ms their prefill;
// predicted_n the tokens generated, predicted_ms the decode loop that handed
// them out (the first comes from the prefill's logits), and the rates as the
// daemon's logs and metrics give them (predicted_per_second counts the
// predicted_n − 1 tokens that decode steps produced). `streamed`: the
// stream's last event, whose content is "" (the pieces carried the text).
std::string infill_body(std::string_view model, const GenerationResult& r, bool truncated, bool streamed);

// A streamed piece: {"index": 0, "content", "stop": false,
// "tokens_predicted": the tokens so far}.
std::string infill_chunk(std::string_view piece, int tokens_predicted);

}  // namespace minfer::daemon
