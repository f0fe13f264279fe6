#include "daemon/minferd/openai_response.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/unicode.h"

namespace minfer::daemon {
namespace {

using Json = nlohmann::json;

// Generated text is UTF-8 by construction (the stream decoder never splits a
// character), but a byte-level vocabulary can still produce invalid
// sequences: replace them rather than throw.
std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json head(const ResponseIdentity& id, bool chunk) {
  const bool chat = id.kind == ApiKind::kChat;
  return Json{{"id", id.id},
              {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
              {"created", id.created},
              {"model", id.model},
              {"system_fingerprint", nullptr}};
}

Json usage_json(const Usage& u) {
  return Json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

Json finish_json(const char* finish_reason) { return finish_reason ? Json(finish_reason) : Json(nullptr); }

Json logprobs_json(ApiKind kind, const ChoiceLogprobs* lp) {
  if (lp == nullptr) return nullptr;
  auto text_of = [](const TokenLogprob& t) { return unicode::sanitize_utf8(t.bytes); };
  if (kind == ApiKind::kChat) {
    auto entry = [&](const TokenLogprob& t) {
      Json bytes = Json::array();
      for (const unsigned char b : t.bytes) bytes.push_back(static_cast<int>(b));
      return Json{{"token", text_of(t)}, {"logprob", t.logprob}, {"bytes", std::move(bytes)}};
    };
    Json content = Json::array();
    for (const TokenLogprobs& tl : lp->tokens) {
      Json e = entry(tl.chosen);
      Json top = Json::array();
      for (const TokenLogprob& t : tl.top) top.push_back(entry(t));
      e["top_logprobs"] = std::move(top);
      content.push_back(std::move(e));
    }
    return Json{{"content", std::move(content)}, {"refusal", nullptr}};
  }
  Json tokens = Json::array(), token_logprobs = Json::array(), top_logprobs = Json::array(), offsets = Json::array();
  int64_t offset = lp->text_offset;
  for (const TokenLogprobs& tl : lp->tokens) {
    tokens.push_back(text_of(tl.chosen));
    // An echoed prompt's first token has no context: null, as OpenAI's.
    const bool none = std::isnan(tl.chosen.logprob);
    token_logprobs.push_back(none ? Json(nullptr) : Json(tl.chosen.logprob));
    Json top = none ? Json(nullptr) : Json::object();
    // Two tokens can decode to the same string (a byte-fallback and a merged
    // piece): the more likely one, listed first, keeps the key.
    for (const TokenLogprob& t : tl.top) top.emplace(text_of(t), t.logprob);
    top_logprobs.push_back(std::move(top));
    offsets.push_back(offset);
    offset += logprobs_text_chars(std::span<const TokenLogprobs>(&tl, 1));
  }
  return Json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(token_logprobs)},
              {"top_logprobs", std::move(top_logprobs)},
              {"text_offset", std::move(offsets)}};
}

Json tool_call_json(const ResponseIdentity& id, int choice, int index, const ToolCall& call) {
  return Json{{"id", tool_call_id(id, choice, index)},
              {"type", "function"},
              {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

// A choice of a chunk: chat carries a delta, completions carry text.
Json chunk_choice(const ResponseIdentity& id, int choice, Json delta, std::string_view text,
                  const char* finish_reason, const ChoiceLogprobs* logprobs = nullptr) {
  Json c = {{"index", choice}, {"logprobs", logprobs_json(id.kind, logprobs)}, {"finish_reason", finish_json(finish_reason)}};
  if (id.kind == ApiKind::kChat) {
    c["delta"] = std::move(delta);
  } else {
    c["text"] = std::string(text);
  }
  return c;
}

std::string chunk(const ResponseIdentity& id, Json choice, bool usage_null) {
  Json j = head(id, true);
  j["choices"] = Json::array({std::move(choice)});
  if (usage_null) j["usage"] = nullptr;
  return dump(j);
}

}  // namespace

const char* openai_finish_reason(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return "length";
    case FinishReason::kStop:
    case FinishReason::kEos: return "stop";
    case FinishReason::kCancelled:
    case FinishReason::kDeadline:
    case FinishReason::kError: return nullptr;
  }
  return nullptr;
}

const char* openai_finish_reason(FinishReason r, bool called_tools) {
  if (called_tools && (r == FinishReason::kStop || r == FinishReason::kEos)) return "tool_calls";
  return openai_finish_reason(r);
}

std::string tool_call_id(const ResponseIdentity& id, int choice, int index) {
  const size_t dash = id.id.find('-');
  const std::string_view base = dash == std::string::npos ? std::string_view(id.id) : std::string_view(id.id).substr(dash + 1);
  if (choice == 0) return fmt::format("call_{}_{}", base, index);
  return fmt::format("call_{}_{}_{}", base, choice, index);
}

int64_t logprobs_text_chars(std::span<const TokenLogprobs> tokens) {
  int64_t n = 0;
  for (const TokenLogprobs& t : tokens) {
    for (const unsigned char b : t.chosen.bytes) n += (b & 0xC0) != 0x80;
  }
  return n;
}

std::string completion_body(const ResponseIdentity& id, std::span<const ChoiceBody> choices, const Usage& usage) {
  Json j = head(id, false);
  Json list = Json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceBody& b = choices[i];
    const int index = static_cast<int>(i);
    Json choice = {{"index", index},
                   {"logprobs", logprobs_json(id.kind, b.logprobs)},
                   {"finish_reason", finish_json(b.finish_reason)}};
    if (id.kind == ApiKind::kChat && b.tools != nullptr) {
      Json message = {{"role", "assistant"}};
      message["content"] = b.tools->content.empty() && !b.tools->calls.empty() ? Json(nullptr) : Json(b.tools->content);
      if (!b.tools->calls.empty()) {
        Json calls = Json::array();
        for (size_t k = 0; k < b.tools->calls.size(); ++k) {
          calls.push_back(tool_call_json(id, index, static_cast<int>(k), b.tools->calls[k]));
        }
        message["tool_calls"] = std::move(calls);
      }
      if (!b.reasoning.empty()) message["reasoning_content"] = std::string(b.reasoning);
      choice["message"] = std::move(message);
    } else if (id.kind == ApiKind::kChat) {
      choice["message"] = Json{{"role", "assistant"}, {"content", std::string(b.text)}};
    } else {
      choice["text"] = std::string(b.text);
    }
    list.push_back(std::move(choice));
  }
  j["choices"] = std::move(list);
  j["usage"] = usage_json(usage);
  return dump(j);
}

std::string completion_body(const ResponseIdentity& id, std::string_view text, const char* finish_reason,
                            const Usage& usage, const ChoiceLogprobs* logprobs, const ToolReply* tools,
                            std::string_view reasoning) {
  const ChoiceBody one{text, finish_reason, logprobs, tools, reasoning};
  return completion_body(id, std::span<const ChoiceBody>(&one, 1), usage);
}

std::string role_chunk(const ResponseIdentity& id, int choice, bool usage_null) {
  return chunk(id, chunk_choice(id, choice, Json{{"role", "assistant"}, {"content", ""}}, "", nullptr), usage_null);
}

std::string text_chunk(const ResponseIdentity& id, int choice, std::string_view text, bool usage_null,
                       const ChoiceLogprobs* logprobs) {
  return chunk(id, chunk_choice(id, choice, Json{{"content", std::string(text)}}, text, nullptr, logprobs), usage_null);
}

std::string reasoning_chunk(const ResponseIdentity& id, int choice, std::string_view text, bool usage_null) {
  return chunk(id, chunk_choice(id, choice, Json{{"reasoning_content", std::string(text)}}, "", nullptr), usage_null);
}

std::string tool_call_chunk(const ResponseIdentity& id, int choice, int index, const ToolCall& call, bool usage_null) {
  Json entry = tool_call_json(id, choice, index, call);
  entry["index"] = index;
  return chunk(id, chunk_choice(id, choice, Json{{"tool_calls", Json::array({std::move(entry)})}}, "", nullptr),
               usage_null);
}

std::string finish_chunk(const ResponseIdentity& id, int choice, const char* finish_reason, bool usage_null,
                         const ChoiceLogprobs* logprobs) {
  return chunk(id, chunk_choice(id, choice, Json::object(), "", finish_reason, logprobs), usage_null);
}

std::string usage_chunk(const ResponseIdentity& id, const Usage& usage) {
  Json j = head(id, true);
  j["choices"] = Json::array();
  j["usage"] = usage_json(usage);
  return dump(j);
}

std::string sse_event(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 8);
  out += "data: ";
  out += data;
  out += "\n\n";
  return out;
}

}  // namespace minfer::daemon
