// Chat's tool fields: `tools` (function declarations), `tool_choice` and
// `parallel_tool_calls`, checked against what the model's chat template can
// do. The tools are kept as the client wrote them (key order included: the
// template prints them; the body keeps its order, json_fields.h), and a forced call's schema is compiled here, so
// that a schema outside the subset is this request's 400, naming the tool
// and the keyword.
#include <fmt/format.h>

#include <set>

#include "daemon/minferd/json_fields.h"
#include "daemon/minferd/request_parse.h"
#include "engine/chat/tool_calls.h"
#include "engine/sampling/json_schema.h"

namespace minfer::daemon {
namespace {

// OpenAI's rule for a function name.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::optional<ApiError> check_tool(const Json& tool, size_t i, std::set<std::string>* names) {
  const std::string param = fmt::format("tools[{}]", i);
  if (!tool.is_object()) {
    return invalid_request(param, "invalid_type", fmt::format("'{}' must be an object, got {}", param, json_type_phrase(tool)));
  }
  auto type = tool.find("type");
  if (type == tool.end() || !type->is_string() || type->get<std::string>() != "function") {
    return invalid_request(param + ".type", "invalid_value", fmt::format("'{}.type' must be \"function\"", param));
  }
  auto fn = tool.find("function");
  if (fn == tool.end() || !fn->is_object()) {
    return invalid_request(param + ".function", "missing_field",
                           fmt::format("'{}.function' must be an object with a \"name\"", param));
  }
  auto name = fn->find("name");
  if (name == fn->end() || !name->is_string() || !valid_function_name(name->get<std::string>())) {
    return invalid_request(param + ".function.name", "invalid_value",
                           fmt::format("'{}.function.name' must be 1 to 64 letters, digits, '_' or '-'", param));
  }
  if (!names->insert(name->get<std::string>()).second) {
    return invalid_request(param + ".function.name", "invalid_value",
                           fmt::format("'{}.function.name' '{}' is declared twice", param, name->get<std::string>()));
  }
  if (auto d = fn->find("description"); d != fn->end() && !d->is_null() && !d->is_string()) {
    return invalid_request(param + ".function.description", "invalid_type",
                           fmt::format("'{}.function.description' must be a string", param));
  }
  if (auto p = fn->find("parameters"); p != fn->end() && !p->is_object()) {
    return invalid_request(param + ".function.parameters", "invalid_type",
                           fmt::format("'{}.function.parameters' must be a JSON schema object, got {}", param,
                                       json_type_phrase(*p)));
  }
  return std::nullopt;
}

std::optional<ApiError> read_tool_choice(const Json& body, const std::set<std::string>& names, GenerationSpec* out) {
  auto it = body.find("tool_choice");
  out->tool_choice = names.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (it == body.end() || it->is_null()) return std::nullopt;
  constexpr const char* kExpected =
      "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
  if (it->is_string()) {
    const std::string s = it->get<std::string>();
    if (s == "none") {
      out->tool_choice = ToolChoice::kNone;
    } else if (s == "auto") {
      // Without tools there is nothing to call: the same as none.
    } else if (s == "required") {
      out->tool_choice = ToolChoice::kRequired;
    } else {
      return invalid_request("tool_choice", "invalid_value", fmt::format("{}; got \"{}\"", kExpected, s));
    }
  } else if (it->is_object() && it->value("type", Json()) == "function" && it->contains("function") &&
             (*it)["function"].is_object() && (*it)["function"].contains("name") &&
             (*it)["function"]["name"].is_string()) {
    out->tool_choice = ToolChoice::kNamed;
    out->tool_choice_name = (*it)["function"]["name"].get<std::string>();
    if (!names.count(out->tool_choice_name)) {
      return invalid_request("tool_choice", "invalid_value",
                             fmt::format("'tool_choice' names the function '{}', which 'tools' does not declare",
                                         out->tool_choice_name));
    }
  } else {
    return invalid_request("tool_choice", "invalid_value", kExpected);
  }
  if (names.empty() && out->tool_choice != ToolChoice::kNone) {
    return invalid_request("tool_choice", "invalid_value", "'tool_choice' asks for a tool call, but 'tools' declares none");
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_chat_tools(const Json& body, const ModelLimits& limits, GenerationSpec* out) {
  std::optional<bool> parallel;
  if (auto e = read_bool(body, "parallel_tool_calls", &parallel)) return e;
  out->parallel_tool_calls = parallel.value_or(true);

  std::set<std::string> names;
  auto it = body.find("tools");
  if (it != body.end() && !it->is_null()) {
    if (!it->is_array()) {
      return invalid_request("tools", "invalid_type",
                             fmt::format("'tools' must be an array of functions, got {}", json_type_phrase(*it)));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      if (auto e = check_tool((*it)[i], i, &names)) return e;
    }
  }
  if (auto e = read_tool_choice(body, names, out)) return e;
  if (out->tool_choice == ToolChoice::kNone) return std::nullopt;  // the tools are not shown to the model

  if (limits.tool_style == ToolStyle::kNone) {
    return invalid_request("tools", "unsupported_parameter",
                           fmt::format("'tools' declares functions, but this model's chat template ({}) has no tool "
                                       "calling (Qwen2.5's, Qwen3's and Llama 3.1's and later have; minferd's "
                                       "chat-template-file can name one)",
                                       limits.chat_template));
  }
  if (out->json_object || out->json_schema) {
    return invalid_request("response_format", "invalid_value",
                           "'response_format' and 'tools' both shape the reply; give one (or tool_choice \"none\")");
  }
  for (const Json& tool : body["tools"]) out->tools.push_back(tool.dump());  // in the client's key order

  auto schema = compile_tool_call_schema(out->tools, out->tool_choice_name, tool_arguments_key(limits.tool_style));
  if (!out->forced_tool_call()) {
    // auto: calls the model opens are held to the schema where it compiles;
    // where it does not, they are taken as written.
    if (schema) out->tool_call_schema = std::move(*schema);
  } else {
    if (!schema) {
      return invalid_request("tools", "invalid_value",
                             fmt::format("{}; a forced call (tool_choice {}) is held to its tool's schema, and this "
                                         "part of it cannot be (with tool_choice \"auto\" such calls are taken as written)",
                                         schema.error().message,
                                         out->tool_choice == ToolChoice::kRequired ? "\"required\"" : "naming it"));
    }
    out->tool_call_schema = std::move(*schema);
  }
  return std::nullopt;
}

}  // namespace minfer::daemon
