#include "engine/chat/tool_calls.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "engine/chat/markers.h"
#include "engine/chat/tojson.h"
#include "engine/sampling/json_schema.h"

namespace minfer {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kSpace = " \t\r\n";
constexpr std::string_view kPythonTag = "<|python_tag|>";

// The call a block's JSON holds, or nothing when it is not one.
std::optional<ToolCall> parse_call(std::string_view inner) {
  const Json j = Json::parse(inner, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  if (args == j.end()) return std::nullopt;
  Json object = *args;
  if (object.is_string()) object = Json::parse(args->get<std::string>(), nullptr, false);
  if (!object.is_object()) return std::nullopt;
  auto text = python_json_dumps(object.dump(-1, ' ', false, Json::error_handler_t::replace));
  if (!text) return std::nullopt;
  return ToolCall{"", name->get<std::string>(), std::move(*text)};
}


}  // namespace

ToolCallStream::ToolCallStream(ToolStyle style, bool inside_call) : whole_reply_(style == ToolStyle::kLlama3) {
  if (whole_reply_) {
    reply_ = inside_call ? Reply::kCall : Reply::kUndecided;
  } else {
    in_block_ = inside_call;
    block_from_prompt_ = inside_call;
  }
}

std::string_view tool_arguments_key(ToolStyle style) {
  return style == ToolStyle::kLlama3 ? "parameters" : "arguments";
}

std::vector<ToolCallStream::Event> ToolCallStream::feed_whole_reply(std::string_view piece) {
  std::vector<Event> out;
  if (reply_ == Reply::kText) {
    emit_text(std::string(piece), out);
    return out;
  }
  held_ += piece;
  if (reply_ == Reply::kUndecided) {
    const size_t b = held_.find_first_not_of(kSpace);
    if (b == std::string::npos) return out;  // only whitespace so far
    const std::string_view start = std::string_view(held_).substr(b);
    if (start[0] == '{' || start.substr(0, kPythonTag.size()) == kPythonTag) {
      reply_ = Reply::kCall;
    } else if (start.size() < kPythonTag.size() && kPythonTag.substr(0, start.size()) == start) {
      return out;  // may still become the tag
    } else {
      reply_ = Reply::kText;
      emit_text(std::exchange(held_, {}), out);
    }
  }
  return out;
}

std::vector<ToolCallStream::Event> ToolCallStream::finish_whole_reply() {
  std::vector<Event> out;
  std::string_view body = held_;
  body.remove_prefix(std::min(body.size(), body.find_first_not_of(kSpace)));
  if (body.substr(0, kPythonTag.size()) == kPythonTag) body.remove_prefix(kPythonTag.size());
  std::optional<ToolCall> call = reply_ == Reply::kCall ? parse_call(body) : std::nullopt;
  if (call) {
    out.push_back(Event{"", std::move(*call)});
    ++calls_;
  } else {
    emit_text(std::move(held_), out);
  }
  held_.clear();
  return out;
}

void ToolCallStream::emit_text(std::string text, std::vector<Event>& out) {
  if (text.empty()) return;
  if (!out.empty() && !out.back().call) {
    out.back().text += text;
  } else {
    out.push_back(Event{std::move(text), std::nullopt});
  }
}

void ToolCallStream::close_block(std::string_view inner, bool closed, std::vector<Event>& out) {
  if (auto call = parse_call(inner)) {
    out.push_back(Event{"", std::move(*call)});
    ++calls_;
    after_call_ = true;
  } else {
    // Not a call: the block goes on as the text it was (the model's: an
    // opener the prompt wrote is not).
    emit_text(space_before_block_ + std::string(block_from_prompt_ ? "" : kOpen) + std::string(inner) +
                  std::string(closed ? kClose : ""),
              out);
  }
  block_from_prompt_ = false;
  space_before_block_.clear();
  block_.clear();
  in_block_ = false;
}

std::vector<ToolCallStream::Event> ToolCallStream::feed(std::string_view piece) {
  if (whole_reply_) return feed_whole_reply(piece);
  std::vector<Event> out;
  std::string buf = std::exchange(held_, {});
  buf += piece;
  for (;;) {
    if (in_block_) {
      block_ += buf;
      const size_t end = block_.find(kClose);
      if (end == std::string::npos) return out;
      buf = block_.substr(end + kClose.size());
      const std::string inner = block_.substr(0, end);
      close_block(inner, /*closed=*/true, out);
      continue;
    }
    if (after_call_) {
      const size_t b = buf.find_first_not_of(kSpace);
      if (b == std::string::npos) return out;  // only whitespace so far
      buf.erase(0, b);
      after_call_ = false;
    }
    const size_t open = buf.find(kOpen);
    const size_t keep = open != std::string::npos ? open : buf.size() - partial_suffix(buf, kOpen);
    // Whitespace right before what may be a block is held with it.
    const size_t last = buf.find_last_not_of(kSpace, keep == 0 ? std::string::npos : keep - 1);
    const size_t text_end = keep == 0 || last == std::string::npos ? 0 : last + 1;
    emit_text(buf.substr(0, text_end), out);
    if (open == std::string::npos) {
      held_ = buf.substr(text_end);
      return out;
    }
    space_before_block_ = buf.substr(text_end, open - text_end);
    in_block_ = true;
    buf.erase(0, open + kOpen.size());
  }
}

std::vector<ToolCallStream::Event> ToolCallStream::finish(bool close_open) {
  if (whole_reply_) return finish_whole_reply();
  std::vector<Event> out;
  if (in_block_) {
    if (close_open) {
      close_block(std::string(block_), /*closed=*/false, out);
    } else {
      emit_text(space_before_block_ + std::string(block_from_prompt_ ? "" : kOpen) + block_, out);
      in_block_ = false;
      block_from_prompt_ = false;
    }
  }
  std::string rest = std::exchange(held_, {});
  if (after_call_ && rest.find_first_not_of(kSpace) == std::string::npos) rest.clear();
  emit_text(std::move(rest), out);
  return out;
}

ToolReply parse_tool_calls(std::string_view text, ToolStyle style, bool inside_call, bool close_open) {
  ToolCallStream stream(style, inside_call);
  ToolReply reply;
  auto take = [&](std::vector<ToolCallStream::Event> events) {
    for (ToolCallStream::Event& e : events) {
      if (e.call) {
        reply.calls.push_back(std::move(*e.call));
      } else {
        reply.content += e.text;
      }
    }
  };
  take(stream.feed(text));
  take(stream.finish(close_open));
  return reply;
}

// A tool's parameters moved to `at` in the call schema's document: its local
// references ("#/$defs/Address", "#") made to point where it now lies.
void move_references(Json& schema, const std::string& at) {
  if (schema.is_object()) {
    for (auto& [key, value] : schema.items()) {
      if (key == "$ref" && value.is_string() && value.get<std::string>().rfind('#', 0) == 0) {
        value = at + value.get<std::string>().substr(1);
      } else {
        move_references(value, at);
      }
    }
  } else if (schema.is_array()) {
    for (Json& item : schema) move_references(item, at);
  }
}

Expected<std::shared_ptr<const JsonSchema>> compile_tool_call_schema(const std::vector<std::string>& tools,
                                                                     std::string_view only_name,
                                                                     std::string_view arguments_key) {
  struct Taken {
    size_t index;
    std::string name;
    Json parameters;
  };
  std::vector<Taken> taken;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json tool = Json::parse(tools[i], nullptr, false);
    const Json* fn = tool.is_object() && tool.contains("function") ? &tool["function"] : nullptr;
    if (fn == nullptr || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
      return unexpected(ErrorCode::kInvalidArgument, fmt::format("tools[{}] has no function name", i));
    std::string name = (*fn)["name"].get<std::string>();
    if (!only_name.empty() && name != only_name) continue;
    taken.push_back({i, std::move(name), fn->contains("parameters") ? (*fn)["parameters"] : Json{{"type", "object"}}});
  }
  if (taken.empty())
    return unexpected(ErrorCode::kInvalidArgument,
                      only_name.empty() ? std::string("no tools to call")
                                        : fmt::format("no declared tool is named '{}'", only_name));
  // Each tool's parameters a definition of the call schema ("#/$defs/tool_<i>"),
  // so that the references inside them ("$ref": "#/$defs/...") still resolve.
  const std::string key(arguments_key);
  Json alternatives = Json::array();
  Json definitions = Json::object();
  for (const Taken& t : taken) {
    const std::string name = fmt::format("tool_{}", t.index);
    Json parameters = t.parameters;
    move_references(parameters, "#/$defs/" + name);
    definitions[name] = std::move(parameters);
    alternatives.push_back(Json{{"type", "object"},
                                {"properties", {{"name", {{"const", t.name}}}, {key, {{"$ref", "#/$defs/" + name}}}}},
                                {"required", {"name", key}}});
  }
  Json schema = alternatives.size() == 1 ? alternatives[0] : Json{{"anyOf", std::move(alternatives)}};
  schema["$defs"] = std::move(definitions);
  auto compiled = JsonSchema::compile(schema.dump());
  if (compiled) return compiled;
  // Which tool's parameters: each compiled alone, so that the error names it.
  for (const Taken& t : taken) {
    if (auto own = JsonSchema::compile(t.parameters.dump()); !own) {
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("tools[{}].function.parameters ({}): {}", t.index, t.name, own.error().message));
    }
  }
  return compiled;
}

}  // namespace minfer
