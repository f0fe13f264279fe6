// POST /v1/chat/completions: `messages` is a non-empty array of
// {role, content}; content is a string or an array of text parts. Roles are
// system, developer (OpenAI's newer name for system), user and assistant;
// anything else (tool, function, a typo) is a 400 here rather than a surprise
// in the template.
#include <fmt/format.h>

#include "daemon/minferd/json_fields.h"
#include "daemon/minferd/request_parse.h"

namespace minfer::daemon {
namespace {

std::optional<ApiError> read_content(const Json& msg, size_t i, std::string* out) {
  const std::string param = fmt::format("messages[{}].content", i);
  auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) {
    return invalid_request(param, "missing_field", fmt::format("'{}' is required", param));
  }
  if (it->is_string()) {
    *out = it->get<std::string>();
    return std::nullopt;
  }
  if (!it->is_array()) {
    return invalid_request(param, "invalid_type",
                           fmt::format("'{}' must be a string or an array of text parts, got {}", param,
                                       json_type_phrase(*it)));
  }
  out->clear();
  for (size_t k = 0; k < it->size(); ++k) {
    const Json& part = (*it)[k];
    const std::string part_param = fmt::format("{}[{}]", param, k);
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return invalid_request(part_param, "invalid_type", fmt::format("'{}' must be an object with a \"type\"", part_param));
    }
    const std::string type = part["type"].get<std::string>();
    if (type != "text") {
      return invalid_request(part_param, "unsupported_parameter",
                             fmt::format("'{}' has type '{}'; only text parts are supported", part_param, type));
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      return invalid_request(part_param, "invalid_type", fmt::format("'{}.text' must be a string", part_param));
    }
    *out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> read_messages(const Json& body, GenerationSpec* out) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) {
    return invalid_request("messages", "missing_field", "'messages' is required (an array of {role, content})");
  }
  if (!it->is_array()) {
    return invalid_request("messages", "invalid_type",
                           fmt::format("'messages' must be an array, got {}", json_type_phrase(*it)));
  }
  if (it->empty()) return invalid_request("messages", "invalid_value", "'messages' must not be empty");
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& m = (*it)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) {
      return invalid_request(param, "invalid_type", fmt::format("'{}' must be an object, got {}", param, json_type_phrase(m)));
    }
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return invalid_request(param + ".role", role == m.end() ? "missing_field" : "invalid_type",
                             fmt::format("'{}.role' must be a string", param));
    }
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant") {
      return invalid_request(param + ".role", "invalid_value",
                             fmt::format("'{}.role' is '{}'; expected system, developer, user or assistant", param,
                                         role->get<std::string>()));
    }
    ChatMessage cm;
    cm.role = std::move(r);
    if (auto e = read_content(m, i, &cm.content)) return e;
    out->messages.push_back(std::move(cm));
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_chat_request(std::string_view body, const ModelLimits& limits, GenerationSpec* out) {
  Json j;
  if (auto e = parse_json_object(body, &j)) return e;
  *out = GenerationSpec{};
  out->kind = ApiKind::kChat;
  if (auto e = read_messages(j, out)) return e;
  return parse_generation_fields(j, limits, out);
}

}  // namespace minfer::daemon
