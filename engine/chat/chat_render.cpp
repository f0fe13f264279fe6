// ChatTemplate renderers: what each family's Jinja template writes for a
// plain conversation, transcribed (the templates are quoted in the comments
// where the logic is not obvious). Strings are built exactly; whitespace
// handling follows the template's own filters (trim, strip, lstrip).
#include <fmt/format.h>

#include "engine/chat/chat_template.h"
#include "engine/chat/tojson.h"

namespace minfer {
namespace {

// Python's str.strip() whitespace, ASCII part (non-ASCII spaces are kept;
// they do not occur around chat messages in practice).
constexpr std::string_view kSpaces = " \t\n\r\v\f\x1c\x1d\x1e\x1f";

std::string_view strip(std::string_view s, std::string_view chars = kSpaces) {
  const size_t b = s.find_first_not_of(chars);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(chars) - b + 1);
}
std::string_view lstrip(std::string_view s, std::string_view chars) {
  const size_t b = s.find_first_not_of(chars);
  return b == std::string_view::npos ? std::string_view() : s.substr(b);
}
std::string_view rstrip(std::string_view s, std::string_view chars) {
  const size_t e = s.find_last_not_of(chars);
  return e == std::string_view::npos ? std::string_view() : s.substr(0, e + 1);
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// [INST] templates raise unless roles alternate user/assistant from the start.
Status check_alternation(const std::vector<ChatMessage>& loop, size_t first_index) {
  for (size_t i = 0; i < loop.size(); ++i) {
    if ((loop[i].role == "user") != (i % 2 == 0))
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("chat template: message {} has role '{}', but this model's template needs "
                                    "user/assistant/user/... after an optional first system message",
                                    first_index + i, loop[i].role));
  }
  return ok_status();
}

}  // namespace

// The system turn that declares the tools. Qwen2.5:
//   '<|im_start|>system\n' + (messages[0]['content'] if system else the default)
//   + "\n\n# Tools\n\n..." ; Qwen3: (messages[0].content + '\n\n' if system) + "# Tools\n\n..."
// then each tool as "\n" + tool | tojson, and the instructions.
Expected<std::string> ChatTemplate::chatml_tools_header(const std::vector<ChatMessage>& messages,
                                                        const std::vector<std::string>& tools) const {
  const bool system = messages[0].role == "system";
  std::string out = "<|im_start|>system\n";
  if (tool_style_ == ToolStyle::kQwen25) {
    out += system ? messages[0].content : default_system_;
    out += "\n\n";
  } else if (system) {
    out += messages[0].content;
    out += "\n\n";
  }
  out +=
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
      "function signatures within <tools></tools> XML tags:\n<tools>";
  for (size_t i = 0; i < tools.size(); ++i) {
    auto json = python_json_dumps(tools[i]);
    if (!json) return unexpected(ErrorCode::kInvalidArgument, fmt::format("chat template: tool {} is not JSON", i));
    out += "\n";
    out += *json;
  }
  out +=
      "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call><|im_end|>\n";
  return out;
}

// An assistant turn's calls, after its content. Qwen2.5:
//   for tool_call: '\n<tool_call>\n{"name": "' + name + '", "arguments": ' + arguments | tojson + '}\n</tool_call>'
// Qwen3: a '\n' before each but a first one that follows no content, and
// the arguments as they are when they are a string (they are, here).
std::string ChatTemplate::chatml_tool_calls(const ChatMessage& m, std::string_view content) const {
  std::string out;
  for (size_t k = 0; k < m.tool_calls.size(); ++k) {
    const ToolCall& call = m.tool_calls[k];
    if (tool_style_ == ToolStyle::kQwen25 || k > 0 || !content.empty()) out += "\n";
    out += "<tool_call>\n{\"name\": \"";
    out += call.name;
    out += "\", \"arguments\": ";
    if (tool_style_ == ToolStyle::kQwen25) {
      // tojson of the parsed arguments; of the string itself when they are not JSON.
      auto json = python_json_dumps(call.arguments);
      out += json ? *json : python_json_string(call.arguments);
    } else {
      out += call.arguments;
    }
    out += "}\n</tool_call>";
  }
  return out;
}

Expected<std::string> ChatTemplate::apply_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                                 const std::vector<std::string>& tools,
                                                 std::optional<bool> enable_thinking) const {
  std::string out;
  // With tools the system turn declares them and holds the first system
  // message; without, a default system prompt stands in for a missing one.
  size_t first = 0;
  if (!tools.empty()) {
    MINFER_ASSIGN_OR_RETURN(out, chatml_tools_header(messages, tools));
    if (messages[0].role == "system") first = 1;
  } else if (messages[0].role != "system" && !default_system_.empty()) {
    out.append("<|im_start|>system\n").append(default_system_).append("<|im_end|>\n");
  }

  // Qwen3: the last user query (messages that merely wrap a tool response do
  // not count); assistant turns after it keep their <think> block.
  size_t last_query = messages.size() - 1;
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string& c = messages[i].content;
    if (messages[i].role == "user" && !(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>"))) {
      last_query = i;
      break;
    }
  }

  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      // Consecutive results share one user turn.
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out.append("\n<tool_response>\n").append(m.content).append("\n</tool_response>");
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
      continue;
    }
    if (m.role != "assistant") {
      out.append("<|im_start|>").append(m.role).append("\n").append(m.content).append("<|im_end|>\n");
      continue;
    }
    if (flavor_ != Flavor::kQwen3Thinking) {
      if (m.tool_calls.empty()) {
        out.append("<|im_start|>assistant\n").append(m.content).append("<|im_end|>\n");
        continue;
      }
      // Qwen2.5: '<|im_start|>' + role, then '\n' + content if any, then the calls.
      out += "<|im_start|>assistant";
      if (!m.content.empty()) out.append("\n").append(m.content);
      out.append(chatml_tool_calls(m, m.content)).append("<|im_end|>\n");
      continue;
    }
    // {%- set content = message.content %} ... reasoning_content when the
    // message has one, else if '</think>' in content:
    //   content = content.split('</think>')[-1].lstrip('\n')
    //   reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
    std::string_view content = m.content;
    std::string_view reasoning;
    const size_t last_close = content.rfind("</think>");
    if (m.reasoning_content) {
      reasoning = *m.reasoning_content;
    } else if (last_close != std::string_view::npos) {
      std::string_view before = rstrip(content.substr(0, content.find("</think>")), "\n");
      const size_t open = before.rfind("<think>");
      reasoning = lstrip(open == std::string_view::npos ? before : before.substr(open + 7), "\n");
      content = lstrip(content.substr(last_close + 8), "\n");
    }
    const bool last = i + 1 == messages.size();
    if (i > last_query && (last || !reasoning.empty())) {
      out += "<|im_start|>assistant\n<think>\n";
      out += strip(reasoning, "\n");
      out += "\n</think>\n\n";
      out += lstrip(content, "\n");
    } else {
      out += "<|im_start|>assistant\n";
      out += content;
    }
    out.append(chatml_tool_calls(m, content)).append("<|im_end|>\n");
  }
  if (add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (thinking_switch_ && enable_thinking == false) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

Expected<std::string> ChatTemplate::apply_llama3(const std::vector<ChatMessage>& messages,
                                                 bool add_generation_prompt,
                                                 const std::vector<std::string>& tools) const {
  auto turn = [](std::string_view role, std::string_view content) {
    return fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>", role, strip(content));
  };
  std::string out = bos_text_;
  size_t first = 0;
  if (flavor_ == Flavor::kLlama31) {
    // 3.1+: a system header always, with the knowledge and "today" dates,
    // then the (trimmed) system message if the conversation starts with one.
    std::string_view system;
    if (messages[0].role == "system") {
      system = messages[0].content;
      first = 1;
    }
    out += "<|start_header_id|>system<|end_header_id|>\n\n";
    if (!tools.empty()) out += "Environment: ipython\n";
    out += "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
    out += strip(system);
    out += "<|eot_id|>";
  }
  if (!tools.empty()) {
    // tools_in_user_message: the first message after the system one (a user
    // turn, the template assumes) gets the tools, each tojson(indent=4).
    if (first == messages.size())
      return unexpected(ErrorCode::kInvalidArgument,
                        "chat template: this model's template declares tools in the first user message, and there "
                        "is none");
    out +=
        "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for "
        "a function call with its proper arguments that best answers the given prompt.\n\nRespond in the format "
        "{\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use "
        "variables.\n\n";
    for (size_t i = 0; i < tools.size(); ++i) {
      auto json = python_json_dumps(tools[i], 4);
      if (!json) return unexpected(ErrorCode::kInvalidArgument, fmt::format("chat template: tool {} is not JSON", i));
      out.append(*json).append("\n\n");
    }
    out.append(strip(messages[first].content)).append("<|eot_id|>");
    ++first;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      // `message.content is iterable` holds for a string: tojson of it.
      out.append("<|start_header_id|>ipython<|end_header_id|>\n\n")
          .append(python_json_string(m.content))
          .append("<|eot_id|>");
    } else if (!m.tool_calls.empty()) {
      if (m.tool_calls.size() != 1)
        return unexpected(ErrorCode::kInvalidArgument,
                          fmt::format("chat template: message {} has {} tool calls; this model's template writes one "
                                      "an assistant turn (\"This model only supports single tool-calls at once!\")",
                                      i, m.tool_calls.size()));
      // The turn is the call alone (a content beside it is not written).
      const ToolCall& call = m.tool_calls[0];
      auto args = python_json_dumps(call.arguments);
      out.append("<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"")
          .append(call.name)
          .append("\", \"parameters\": ")
          .append(args ? *args : python_json_string(call.arguments))
          .append("}<|eot_id|>");
    } else {
      out += turn(m.role, m.content);
    }
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

Expected<std::string> ChatTemplate::apply_inst(const std::vector<ChatMessage>& messages) const {
  const bool has_system = messages[0].role == "system";
  if (has_system && flavor_ == Flavor::kMistral)
    return unexpected(ErrorCode::kInvalidArgument,
                      "chat template: this model's [INST] template (Mistral style) has no system role");
  const std::vector<ChatMessage> loop(messages.begin() + (has_system ? 1 : 0), messages.end());
  MINFER_TRY(check_alternation(loop, has_system ? 1 : 0));

  std::string out;
  if (flavor_ == Flavor::kMistral) {
    // {{ bos_token }} ... '[INST] ' + content + ' [/INST]' | content + eos_token
    out = bos_text_;
    for (const ChatMessage& m : loop) {
      if (m.role == "user") {
        out.append("[INST] ").append(m.content).append(" [/INST]");
      } else {
        out.append(m.content).append(eos_text_);
      }
    }
    return out;
  }
  // Llama-2-chat: the system message goes in a <<SYS>> block at the start of
  // the first user turn; every user turn opens with BOS; contents are strip()ped.
  for (size_t i = 0; i < loop.size(); ++i) {
    std::string content = loop[i].content;
    if (i == 0 && has_system) content = fmt::format("<<SYS>>\n{}\n<</SYS>>\n\n{}", messages[0].content, content);
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on chains of
    // std::string operator+ here.
    if (loop[i].role == "user") {
      out.append(bos_text_).append("[INST] ").append(strip(content)).append(" [/INST]");
    } else {
      out.append(" ").append(strip(content)).append(" ").append(eos_text_);
    }
  }
  return out;
}

}  // namespace minfer
