#include "daemon/minferd/openai_response.h"

#include <nlohmann/json.hpp>

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

// A choice of a chunk: chat carries a delta, completions carry text.
Json chunk_choice(const ResponseIdentity& id, Json delta, std::string_view text, const char* finish_reason) {
  Json c = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_json(finish_reason)}};
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

std::string completion_body(const ResponseIdentity& id, std::string_view text, const char* finish_reason,
                            const Usage& usage) {
  Json j = head(id, false);
  Json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_json(finish_reason)}};
  if (id.kind == ApiKind::kChat) {
    choice["message"] = Json{{"role", "assistant"}, {"content", std::string(text)}};
  } else {
    choice["text"] = std::string(text);
  }
  j["choices"] = Json::array({std::move(choice)});
  j["usage"] = usage_json(usage);
  return dump(j);
}

std::string role_chunk(const ResponseIdentity& id, bool usage_null) {
  return chunk(id, chunk_choice(id, Json{{"role", "assistant"}, {"content", ""}}, "", nullptr), usage_null);
}

std::string text_chunk(const ResponseIdentity& id, std::string_view text, bool usage_null) {
  return chunk(id, chunk_choice(id, Json{{"content", std::string(text)}}, text, nullptr), usage_null);
}

std::string finish_chunk(const ResponseIdentity& id, const char* finish_reason, bool usage_null) {
  return chunk(id, chunk_choice(id, Json::object(), "", finish_reason), usage_null);
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
