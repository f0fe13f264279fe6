// POST /v1/chat/completions: `messages` is a non-empty array of
// {role, content}; content is a string or an array of text parts. Roles are
// system, developer (OpenAI's newer name for system), user, assistant (with
// `tool_calls`, its content may be null) and tool (a call's result, with its
// `tool_call_id`); anything else (function, a typo) is a 400 here rather
// than a surprise in the template. The tool fields are in chat_tools.cpp.
#include <fmt/format.h>

#include "daemon/minferd/json_fields.h"
#include "daemon/minferd/request_parse.h"

namespace minfer::daemon {
namespace {

std::optional<ApiError> read_content(const Json& msg, size_t i, bool optional, std::string* out) {
  const std::string param = fmt::format("messages[{}].content", i);
  auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) {
    if (optional) return std::nullopt;
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

// An assistant message's tool_calls: [{id, type: "function", function:
// {name, arguments}}]; arguments is a JSON text (an object is taken too).
std::optional<ApiError> read_tool_calls(const Json& msg, size_t i, std::vector<ToolCall>* out) {
  auto it = msg.find("tool_calls");
  if (it == msg.end() || it->is_null()) return std::nullopt;
  const std::string param = fmt::format("messages[{}].tool_calls", i);
  if (!it->is_array()) {
    return invalid_request(param, "invalid_type", fmt::format("'{}' must be an array, got {}", param, json_type_phrase(*it)));
  }
  for (size_t k = 0; k < it->size(); ++k) {
    const Json& c = (*it)[k];
    const std::string cp = fmt::format("{}[{}]", param, k);
    const Json* fn = c.is_object() && c.contains("function") && c["function"].is_object() ? &c["function"] : nullptr;
    if (fn == nullptr || !fn->contains("name") || !(*fn)["name"].is_string()) {
      return invalid_request(cp, "invalid_value",
                             fmt::format("'{}' must be {{\"id\", \"type\": \"function\", \"function\": {{\"name\", "
                                         "\"arguments\"}}}}",
                                         cp));
    }
    if (auto type = c.find("type"); type != c.end() && !type->is_null() && *type != "function") {
      return invalid_request(cp + ".type", "invalid_value", fmt::format("'{}.type' must be \"function\"", cp));
    }
    ToolCall call;
    if (auto id = c.find("id"); id != c.end() && !id->is_null()) {
      if (!id->is_string()) return invalid_request(cp + ".id", "invalid_type", fmt::format("'{}.id' must be a string", cp));
      call.id = id->get<std::string>();
    }
    call.name = (*fn)["name"].get<std::string>();
    auto args = fn->find("arguments");
    if (args == fn->end() || !(args->is_string() || args->is_object())) {
      return invalid_request(cp + ".function.arguments", "invalid_type",
                             fmt::format("'{}.function.arguments' must be a string of JSON", cp));
    }
    call.arguments = args->is_string() ? args->get<std::string>() : args->dump();
    out->push_back(std::move(call));
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
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      return invalid_request(param + ".role", "invalid_value",
                             fmt::format("'{}.role' is '{}'; expected system, developer, user, assistant or tool",
                                         param, role->get<std::string>()));
    }
    ChatMessage cm;
    cm.role = std::move(r);
    if (cm.role == "assistant") {
      if (auto e = read_tool_calls(m, i, &cm.tool_calls)) return e;
      std::optional<std::string> reasoning;
      if (auto e = read_string(m, "reasoning_content", &reasoning)) {
        e->param = param + ".reasoning_content";
        return e;
      }
      cm.reasoning_content = std::move(reasoning);
    }
    if (cm.role == "tool") {
      if (auto id = m.find("tool_call_id"); id != m.end() && !id->is_null()) {
        if (!id->is_string()) {
          return invalid_request(param + ".tool_call_id", "invalid_type",
                                 fmt::format("'{}.tool_call_id' must be a string", param));
        }
        cm.tool_call_id = id->get<std::string>();
      }
    }
    if (auto e = read_content(m, i, !cm.tool_calls.empty(), &cm.content)) return e;
    out->messages.push_back(std::move(cm));
  }
  return std::nullopt;
}

// chat_template_kwargs {"enable_thinking": bool} (vLLM's and llama.cpp's
// way to switch a Qwen3 model's thinking off) and reasoning_format.
std::optional<ApiError> read_thinking(const Json& body, GenerationSpec* out) {
  if (auto it = body.find("chat_template_kwargs"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) {
      return invalid_request("chat_template_kwargs", "invalid_type",
                             fmt::format("'chat_template_kwargs' must be an object, got {}", json_type_phrase(*it)));
    }
    for (const auto& [key, value] : it->items()) {
      if (key != "enable_thinking") {
        return invalid_request("chat_template_kwargs", "unsupported_parameter",
                               fmt::format("'chat_template_kwargs' has '{}'; minferd's templates take enable_thinking "
                                           "only",
                                           key));
      }
    }
    std::optional<bool> thinking;
    if (auto e = read_bool(*it, "enable_thinking", &thinking)) {
      e->param = "chat_template_kwargs.enable_thinking";
      return e;
    }
    out->enable_thinking = thinking;
  }
  std::optional<std::string> format;
  if (auto e = read_string(body, "reasoning_format", &format)) return e;
  if (format && *format != "none" && *format != "auto" && *format != "deepseek") {
    return invalid_request("reasoning_format", "invalid_value",
                           fmt::format("'reasoning_format' is '{}'; expected auto, deepseek (reasoning_content apart) "
                                       "or none (in the content)",
                                       *format));
  }
  out->split_reasoning = format.value_or("auto") != "none";
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_chat_request(std::string_view body, const ModelLimits& limits, GenerationSpec* out) {
  Json j;
  if (auto e = parse_json_object(body, &j)) return e;
  *out = GenerationSpec{};
  out->kind = ApiKind::kChat;
  if (auto e = read_messages(j, out)) return e;
  if (limits.tool_style == ToolStyle::kNone) {
    // Refused here rather than by the template on the engine thread.
    for (size_t i = 0; i < out->messages.size(); ++i) {
      const ChatMessage& m = out->messages[i];
      if (m.role != "tool" && m.tool_calls.empty()) continue;
      const bool result = m.role == "tool";
      return invalid_request(fmt::format("messages[{}].{}", i, result ? "role" : "tool_calls"), "invalid_value",
                             fmt::format("'messages[{}]' is {}, but this model's chat template ({}) has no tool calling",
                                         i, result ? "a tool result" : "a tool call", limits.chat_template));
    }
  }
  if (auto e = parse_generation_fields(j, limits, out)) return e;
  if (auto e = read_thinking(j, out)) return e;
  return parse_chat_tools(j, limits, out);
}

}  // namespace minfer::daemon
