// The fields /v1/completions and /v1/chat/completions share. Ranges follow
// the OpenAI API where it defines one (temperature 0..2, penalties -2..2,
// logit bias -100..100) and the sampler's otherwise (top_p, min_p, top_k).
#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "daemon/minferd/json_fields.h"
#include "daemon/minferd/request_parse.h"
#include "engine/sampling/json_schema.h"

namespace minfer::daemon {
namespace {

std::optional<ApiError> out_of_range(const char* name, double v, const char* range) {
  return invalid_request(name, "invalid_value", fmt::format("'{}' is {}; allowed {}", name, v, range));
}

// Infill's token limit: llama.cpp's n_predict, -1 (its default) for none —
// until the end of generation or of the context — with max_tokens as its
// alias (both given: the same value).
std::optional<ApiError> read_n_predict(const Json& body, std::optional<int64_t>* out) {
  std::optional<int64_t> n_predict, max_tokens;
  if (auto e = read_integer(body, "n_predict", &n_predict)) return e;
  if (auto e = read_integer(body, "max_tokens", &max_tokens)) return e;
  if (n_predict && max_tokens && *n_predict != *max_tokens) {
    return invalid_request("max_tokens", "invalid_value",
                           fmt::format("'max_tokens' is {} and 'n_predict' is {}; max_tokens is n_predict's other name: "
                                       "give one, or the same value",
                                       *max_tokens, *n_predict));
  }
  const std::optional<int64_t> n = n_predict ? n_predict : max_tokens;
  if (n && *n < -1) {
    return invalid_request("n_predict", "invalid_value",
                           fmt::format("'n_predict' is {}; it must be -1 (until the end of generation) or at least 1",
                                       *n));
  }
  if (n && *n != -1) *out = n;
  return std::nullopt;
}

std::optional<ApiError> read_stop(const Json& body, std::vector<std::string>* out) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return std::nullopt;
  std::vector<std::string> stops;
  if (it->is_string()) {
    stops.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    if (it->size() > kMaxStopStrings) {
      return invalid_request("stop", "invalid_value",
                             fmt::format("'stop' has {} strings; at most {} are allowed", it->size(), kMaxStopStrings));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_string()) {
        return invalid_request("stop", "invalid_type",
                               fmt::format("'stop'[{}] must be a string, got {}", i, json_type_phrase((*it)[i])));
      }
      stops.push_back((*it)[i].get<std::string>());
    }
  } else {
    return invalid_request("stop", "invalid_type",
                           fmt::format("'stop' must be a string or an array of strings, got {}", json_type_phrase(*it)));
  }
  for (const std::string& s : stops) {
    if (s.empty()) return invalid_request("stop", "invalid_value", "'stop' strings must not be empty");
    if (s.size() > kMaxStopBytes) {
      return invalid_request("stop", "invalid_value",
                             fmt::format("a 'stop' string has {} bytes; at most {} are allowed", s.size(), kMaxStopBytes));
    }
  }
  *out = std::move(stops);
  return std::nullopt;
}

std::optional<ApiError> read_logit_bias(const Json& body, int vocab_size, SamplingParams* sp) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) {
    return invalid_request("logit_bias", "invalid_type",
                           fmt::format("'logit_bias' must be an object mapping token ids to numbers, got {}",
                                       json_type_phrase(*it)));
  }
  for (const auto& [key, value] : it->items()) {
    // Keys are decimal token ids, as in the OpenAI API.
    char* end = nullptr;
    errno = 0;
    const long long id = std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || end != key.c_str() + key.size() || errno != 0 || id < 0 || id >= vocab_size) {
      return invalid_request("logit_bias", "invalid_value",
                             fmt::format("'logit_bias' key '{}' is not a token id in [0, {})", key, vocab_size));
    }
    if (!value.is_number()) {
      return invalid_request("logit_bias", "invalid_type",
                             fmt::format("'logit_bias'[\"{}\"] must be a number, got {}", key, json_type_phrase(value)));
    }
    const double bias = value.get<double>();
    if (!(bias >= -100.0 && bias <= 100.0)) return out_of_range("logit_bias", bias, "[-100, 100]");
    sp->logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
  }
  return std::nullopt;
}

// Log-probabilities, in each endpoint's form: completions "logprobs": N (the
// N most likely tokens listed too; OpenAI allows 5, minferd up to
// kMaxTopLogprobs; false or null: none); chat "logprobs": true and
// "top_logprobs": N (only with logprobs, as OpenAI requires).
std::optional<ApiError> read_logprobs(const Json& body, ApiKind kind, int* out) {
  const std::string range = fmt::format("[0, {}]", kMaxTopLogprobs);
  if (kind == ApiKind::kCompletion) {
    auto it = body.find("logprobs");
    if (it == body.end() || it->is_null() || (it->is_boolean() && !it->get<bool>())) return std::nullopt;
    if (!it->is_number_integer()) {
      return invalid_request("logprobs", "invalid_type",
                             fmt::format("'logprobs' must be an integer (how many of the most likely tokens to list, "
                                         "{}), got {}",
                                         range, json_type_phrase(*it)));
    }
    const int64_t n = it->get<int64_t>();
    if (n < 0 || n > kMaxTopLogprobs) return out_of_range("logprobs", static_cast<double>(n), range.c_str());
    *out = static_cast<int>(n);
    return std::nullopt;
  }
  std::optional<bool> wanted;
  if (auto e = read_bool(body, "logprobs", &wanted)) return e;
  std::optional<int64_t> n;
  if (auto e = read_integer(body, "top_logprobs", &n)) return e;
  if (n && (*n < 0 || *n > kMaxTopLogprobs)) return out_of_range("top_logprobs", static_cast<double>(*n), range.c_str());
  if (n && !wanted.value_or(false)) {
    return invalid_request("top_logprobs", "invalid_value", "'top_logprobs' needs \"logprobs\": true");
  }
  if (wanted.value_or(false)) *out = static_cast<int>(n.value_or(0));
  return std::nullopt;
}

// Features we do not implement are refused, not ignored: a client that asks
// for them would otherwise silently get something else. (Chat's tools are
// read by chat_tools.cpp; completions and infill have none.)
std::optional<ApiError> refuse_unsupported(const Json& body, ApiKind kind) {
  auto unsupported = [](const char* name, const std::string& why) {
    return invalid_request(name, "unsupported_parameter", fmt::format("'{}' {}; minferd does not support it", name, why));
  };
  auto given = [&](const char* name) {
    auto it = body.find(name);
    return it != body.end() && !it->is_null();
  };
  if (kind != ApiKind::kCompletion && given("echo") && !(body["echo"].is_boolean() && !body["echo"].get<bool>())) {
    return unsupported("echo", "asks for the prompt to be echoed (completions only)");
  }
  if (kind != ApiKind::kCompletion && given("best_of") &&
      !(body["best_of"].is_number_integer() && body["best_of"].get<int64_t>() == 1)) {
    return unsupported("best_of", "asks for several candidates (completions only)");
  }
  if (kind != ApiKind::kCompletion && given("suffix") &&
      !(body["suffix"].is_string() && body["suffix"].get<std::string>().empty())) {
    return unsupported("suffix", kind == ApiKind::kInfill ? "is /v1/completions' fill-in-the-middle (use 'input_suffix')"
                                                          : "asks for fill-in-the-middle (completions only)");
  }
  if (given("functions") && !(body["functions"].is_array() && body["functions"].empty())) {
    return unsupported("functions", "declares functions the deprecated way (use 'tools')");
  }
  if (kind == ApiKind::kInfill) {
    // llama.cpp's native answer carries one text and the counts: no place
    // for more choices, log-probabilities or OpenAI's usage chunk.
    if (given("n") && body["n"].is_number_integer() && body["n"] > 1) {
      return unsupported("n", "asks for several choices (/infill answers one)");
    }
    if (given("logprobs") && !(body["logprobs"].is_boolean() && !body["logprobs"].get<bool>())) {
      return unsupported("logprobs", "asks for log-probabilities, which /infill's answer has no place for");
    }
    if (given("n_probs") && !(body["n_probs"].is_number_integer() && body["n_probs"] == 0)) {
      return unsupported("n_probs", "asks for token probabilities, which /infill's answer has no place for");
    }
    if (given("stream_options")) {
      return unsupported("stream_options", "is OpenAI's (/infill's last streamed event carries the counts)");
    }
    if (given("messages")) {
      return unsupported("messages", "is chat's prompt (/infill takes input_prefix, prompt and input_suffix)");
    }
  }
  if (kind != ApiKind::kChat) {
    if (given("tools") && !(body["tools"].is_array() && body["tools"].empty())) {
      return unsupported("tools", "declares tools (chat completions only)");
    }
    if (given("tool_choice") && !(body["tool_choice"].is_string() && body["tool_choice"].get<std::string>() == "none")) {
      return unsupported("tool_choice", "asks for tool calls (chat completions only)");
    }
  }
  return std::nullopt;
}

// response_format: {"type": "text"} (the default), {"type": "json_object"}
// (JSON mode: GenerationRequest::json_object) or {"type": "json_schema",
// "json_schema": {"name", "schema", "strict", "description"}} (structured
// output: the schema compiled here, so that a schema outside the subset is
// this request's 400, naming the keyword).
std::optional<ApiError> read_response_format(const Json& body, GenerationSpec* out) {
  auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) {
    return invalid_request("response_format", "invalid_type",
                           fmt::format("'response_format' must be an object, got {}", json_type_phrase(*it)));
  }
  auto type = it->find("type");
  if (type == it->end() || !type->is_string()) {
    return invalid_request("response_format", "invalid_value",
                           "'response_format' needs a \"type\": \"text\" or \"json_object\"");
  }
  const std::string t = type->get<std::string>();
  if (t == "text") return std::nullopt;
  if (t == "json_object") {
    out->json_object = true;
    return std::nullopt;
  }
  if (t == "json_schema") {
    auto js = it->find("json_schema");
    if (js == it->end() || !js->is_object() || !js->contains("schema")) {
      return invalid_request("response_format.json_schema", "missing_field",
                             "'response_format' of type json_schema needs \"json_schema\": {\"name\", \"schema\"}");
    }
    auto schema = JsonSchema::compile((*js)["schema"].dump());
    if (!schema) return invalid_request("response_format.json_schema.schema", "invalid_value", schema.error().message);
    out->json_schema = std::move(*schema);
    return std::nullopt;
  }
  return invalid_request("response_format", "invalid_value",
                         fmt::format("'response_format' type '{}'; expected text, json_object or json_schema", t));
}

}  // namespace

std::optional<ApiError> parse_generation_fields(const Json& body, const ModelLimits& limits, GenerationSpec* out) {
  if (auto e = refuse_unsupported(body, out->kind)) return e;

  std::optional<int64_t> n;
  if (auto e = read_integer(body, "n", &n)) return e;
  if (n && (*n < 1 || *n > kMaxChoices)) {
    return invalid_request("n", "invalid_value", fmt::format("'n' is {}; allowed 1 to {} choices", *n, kMaxChoices));
  }
  if (n) out->n = static_cast<int>(*n);
  if (const int prompts = out->n_prompts(); prompts * out->n > kMaxChoices) {
    return invalid_request("n", "invalid_value",
                           fmt::format("'prompt' holds {} prompts and 'n' is {}: {} choices; a request holds at most {}",
                                       prompts, out->n, prompts * out->n, kMaxChoices));
  }
  std::optional<int64_t> best_of;  // completions (refused above for chat)
  if (auto e = read_integer(body, "best_of", &best_of)) return e;
  if (best_of) {
    if (*best_of < out->n || *best_of > kMaxChoices) {
      return invalid_request("best_of", "invalid_value",
                             fmt::format("'best_of' is {}; allowed n ({}) to {} candidates", *best_of, out->n, kMaxChoices));
    }
    out->best_of = static_cast<int>(*best_of);
    if (const int prompts = out->n_prompts(); prompts * out->best_of > kMaxChoices) {
      return invalid_request("best_of", "invalid_value",
                             fmt::format("'prompt' holds {} prompts and 'best_of' is {}: {} candidates; a request holds "
                                         "at most {}",
                                         prompts, out->best_of, prompts * out->best_of, kMaxChoices));
    }
  }
  std::optional<std::string> model;
  if (auto e = read_string(body, "model", &model)) return e;  // any name: this appliance serves one model

  // Chat's max_completion_tokens supersedes the deprecated max_tokens;
  // infill's limit is n_predict.
  const char* max_name = out->kind == ApiKind::kInfill ? "n_predict" : "max_tokens";
  std::optional<int64_t> max_tokens;
  if (out->kind == ApiKind::kChat) {
    if (auto e = read_integer(body, "max_completion_tokens", &max_tokens)) return e;
    if (max_tokens) max_name = "max_completion_tokens";
  }
  if (out->kind == ApiKind::kInfill) {
    if (auto e = read_n_predict(body, &max_tokens)) return e;
  } else if (!max_tokens) {
    if (auto e = read_integer(body, "max_tokens", &max_tokens)) return e;
  }
  if (max_tokens) {
    if (*max_tokens < 0) {
      return invalid_request(max_name, "invalid_value", fmt::format("'{}' is {}; it must be at least 1", max_name, *max_tokens));
    }
    if (*max_tokens > limits.n_ctx - 1) {
      return invalid_request(max_name, "context_length_exceeded",
                             fmt::format("'{}' is {} but the context holds {} tokens, prompt included (at most {})",
                                         max_name, *max_tokens, limits.n_ctx, limits.n_ctx - 1));
    }
    out->max_tokens = static_cast<int>(*max_tokens);
  }

  SamplingParams& sp = out->sampling;
  // Float parameters: name, bounds (open or closed at each end), destination.
  struct FloatField {
    const char* name;
    double lo, hi;
    bool lo_open, hi_open;
    const char* range;
    float* dest;
  };
  const FloatField floats[] = {
      {"temperature", 0.0, 2.0, false, false, "[0, 2]", &sp.temperature},
      {"top_p", 0.0, 1.0, true, false, "(0, 1]", &sp.top_p},
      {"min_p", 0.0, 1.0, false, true, "[0, 1)", &sp.min_p},
      {"presence_penalty", -2.0, 2.0, false, false, "[-2, 2]", &sp.presence_penalty},
      {"frequency_penalty", -2.0, 2.0, false, false, "[-2, 2]", &sp.frequency_penalty},
      {"repeat_penalty", 0.0, 10.0, true, false, "(0, 10]", &sp.repeat_penalty},
  };
  for (const FloatField& f : floats) {
    std::optional<double> d;
    if (auto e = read_number(body, f.name, &d)) return e;
    if (!d) continue;
    const bool above = f.lo_open ? *d > f.lo : *d >= f.lo;
    const bool below = f.hi_open ? *d < f.hi : *d <= f.hi;
    if (!above || !below) return out_of_range(f.name, *d, f.range);
    *f.dest = static_cast<float>(*d);
  }
  std::optional<int64_t> i;
  if (auto e = read_integer(body, "top_k", &i)) return e;
  if (i) {
    if (*i < 0 || *i > limits.vocab_size) return out_of_range("top_k", static_cast<double>(*i), "[0, vocabulary size]");
    sp.top_k = static_cast<int>(*i);
  }
  i.reset();
  // llama.cpp's name for the penalties' window: the last N tokens, prompt
  // included; -1 the whole context, 0 none.
  if (auto e = read_integer(body, "repeat_last_n", &i)) return e;
  if (i) {
    if (*i < -1 || *i > limits.n_ctx) {
      return out_of_range("repeat_last_n", static_cast<double>(*i),
                          fmt::format("[-1, {}] (-1: the context size)", limits.n_ctx).c_str());
    }
    sp.penalty_last_n = *i == -1 ? limits.n_ctx : static_cast<int>(*i);
  }
  i.reset();
  if (auto e = read_integer(body, "seed", &i)) return e;
  if (i) out->seed = static_cast<uint64_t>(*i);  // negative seeds are seeds too
  if (auto e = read_logit_bias(body, limits.vocab_size, &sp)) return e;
  if (out->kind != ApiKind::kInfill) {  // refused above for infill
    if (auto e = read_logprobs(body, out->kind, &out->top_logprobs)) return e;
  }
  if (auto e = read_response_format(body, out)) return e;
  if (out->kind == ApiKind::kCompletion) {
    std::optional<bool> echo;
    if (auto e = read_bool(body, "echo", &echo)) return e;
    out->echo = echo.value_or(false);
    // suffix: fill-in-the-middle, where the vocabulary has its markers ("":
    // none, as OpenAI's default).
    std::optional<std::string> suffix;
    if (auto e = read_string(body, "suffix", &suffix)) return e;
    if (suffix && !suffix->empty()) {
      if (!limits.fill_in_middle) {
        return invalid_request("suffix", "unsupported_parameter",
                               "'suffix' asks for fill-in-the-middle, and the model's vocabulary has no FIM markers "
                               "(a code model's <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|> or the like)");
      }
      if (out->echo) {
        return invalid_request("suffix", "unsupported_parameter", "'suffix' with echo; minferd does not support both");
      }
      out->suffix = std::move(*suffix);
    }
  }
  if (out->max_tokens == 0 && out->kind == ApiKind::kInfill) {
    return invalid_request(max_name, "invalid_value",
                           "'n_predict' is 0; it must be -1 (until the end of generation) or at least 1");
  }
  // max_tokens 0 scores the prompt without generating: only with echo and
  // logprobs, which say what to answer.
  if (out->max_tokens == 0 && !(out->echo && out->top_logprobs >= 0)) {
    return invalid_request(max_name, "invalid_value",
                           fmt::format("'{}' is 0; it must be at least 1 (0 only with echo and logprobs, to score the "
                                       "prompt)",
                                       max_name));
  }
  if (auto e = read_stop(body, &out->stop)) return e;

  std::optional<bool> stream;
  if (auto e = read_bool(body, "stream", &stream)) return e;
  out->stream = stream.value_or(false);
  if (out->stream && out->best_of > out->n) {
    return invalid_request("best_of", "unsupported_parameter",
                           "'best_of' above 'n' with \"stream\": true; the best candidates are known only at the end");
  }
  if (out->stream && out->echo) {
    // The prompt's log-probabilities exist only once the prefill is done,
    // after a stream's head: echo answers whole.
    return invalid_request("echo", "unsupported_parameter",
                           "'echo' with \"stream\": true; minferd echoes only in whole answers");
  }
  auto so = body.find("stream_options");
  if (so != body.end() && !so->is_null()) {
    if (!so->is_object()) {
      return invalid_request("stream_options", "invalid_type",
                             fmt::format("'stream_options' must be an object, got {}", json_type_phrase(*so)));
    }
    if (!out->stream) {
      return invalid_request("stream_options", "invalid_value", "'stream_options' is only allowed with \"stream\": true");
    }
    std::optional<bool> usage;
    if (auto e = read_bool(*so, "include_usage", &usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
    out->include_usage = usage.value_or(false);
  }
  // The sampler's own check is the last word on ranges it owns.
  if (Status st = sp.validate(limits.vocab_size); !st) return invalid_request("", "invalid_value", st.error().message);
  return std::nullopt;
}

std::optional<ApiError> make_generation_request(const GenerationSpec& spec, std::vector<int32_t> prompt,
                                                const ModelLimits& limits, uint64_t seed, GenerationRequest* out) {
  const int n_prompt = static_cast<int>(prompt.size());
  const char* param = prompt_param(spec.kind);
  if (n_prompt == 0) return invalid_request(param, "invalid_value", "the prompt is empty (no tokens)");
  if (n_prompt >= limits.n_ctx) {
    return invalid_request(param, "context_length_exceeded",
                           fmt::format("the prompt has {} tokens but the context holds {} (the prompt must leave room "
                                       "for at least one generated token)",
                                       n_prompt, limits.n_ctx));
  }
  const int room = limits.n_ctx - n_prompt;
  int max_tokens = 0;
  if (spec.max_tokens) {
    if (*spec.max_tokens > room) {
      const char* max_param = spec.kind == ApiKind::kChat     ? "max_completion_tokens"
                              : spec.kind == ApiKind::kInfill ? "n_predict"
                                                              : "max_tokens";
      return invalid_request(max_param, "context_length_exceeded",
                             fmt::format("the prompt has {} tokens and {} is {}: {} exceeds the context of {} tokens",
                                         n_prompt, spec.kind == ApiKind::kInfill ? "n_predict" : "max_tokens",
                                         *spec.max_tokens, n_prompt + *spec.max_tokens, limits.n_ctx));
    }
    max_tokens = *spec.max_tokens;
  } else {
    constexpr int kOpenAiCompletionDefault = 16;  // OpenAI's default for /v1/completions
    max_tokens = spec.kind == ApiKind::kCompletion ? std::min(kOpenAiCompletionDefault, room) : room;
  }
  out->prompt = std::move(prompt);
  out->max_tokens = max_tokens;
  out->sampling = spec.sampling;
  out->sampling.seed = spec.seed.value_or(seed);
  out->stop = spec.stop;
  out->min_indent = spec.min_indent;
  out->max_predict_ms = spec.max_predict_ms;
  out->top_logprobs = spec.top_logprobs;
  out->prompt_logprobs = spec.echo && spec.top_logprobs >= 0;
  out->json_object = spec.json_object;
  out->json_schema = spec.json_schema;
  out->ignore_eos = false;
  return std::nullopt;
}

}  // namespace minfer::daemon
