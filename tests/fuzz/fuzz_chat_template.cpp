// libFuzzer target: chat template recognition and application. The input is
// a template text, then messages, separated by 0xFF bytes (each message:
// one role byte, then its content); a role byte below 0x80 picks one of the
// real roles (with 0x40 set the message also carries a tool call whose
// arguments are its content, with 0x20 its content is declared as a tool
// too), above it the role is the content's first line (any bytes).
// Every recognised family and every ChatTemplateKind renders the messages,
// with and without the tools; an error (unknown role, bad order, a template
// without tools) is fine, a crash or a report is not. The content is also
// fed to the tool-call parser, whole and byte by byte, and to the tool-call
// constraint (a byte goes in when it accepts it, else the rest at once).
// Seeds: tests/fuzz/corpus/chat_template (the templates of the shipped
// vocabularies and of the Qwen tokenizer, with conversations).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/chat/tool_calls.h"
#include "engine/sampling/output_constraint.h"
#include "platform/log.h"

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  minfer::log::set_level(minfer::log::Level::kOff);  // an unrecognised template logs its fallback each time
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace minfer;
  static constexpr const char* kRoles[] = {"system", "user", "assistant", "developer", "tool"};
  const std::vector<std::string_view> parts = split({reinterpret_cast<const char*>(data), size}, '\xFF');
  std::vector<ChatMessage> messages;
  std::vector<std::string> tools;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string_view p = parts[i];
    if (p.empty()) continue;
    const auto role_byte = static_cast<unsigned char>(p[0]);
    p.remove_prefix(1);
    if (role_byte < 0x80) {
      messages.push_back({kRoles[(role_byte & 0x1F) % 5], std::string(p)});
      if (role_byte & 0x40) messages.back().tool_calls.push_back({"call_1", "f", std::string(p)});
      if (role_byte & 0x20) tools.emplace_back(p);
      for (ToolStyle style : {ToolStyle::kQwen25, ToolStyle::kLlama3}) {
        (void)parse_tool_calls(p, style);
        ToolCallStream stream(style, role_byte & 1);
        for (const char c : p) (void)stream.feed(std::string_view(&c, 1));
        (void)stream.finish(role_byte & 2);
      }
      static const auto call_schema = *compile_tool_call_schema(
          {R"({"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}})"});
      for (CallShape shape : {CallShape::kBlocks, CallShape::kWholeReply}) {
        auto c = tool_call_constraint(call_schema, shape);
        for (size_t k = 0; k < p.size(); ++k) {
          if (c->accepts(p.substr(k, 1))) {
            c->advance(p.substr(k, 1));
          } else {
            c->advance(p.substr(k));  // a token the pick would not take: the constraint lets it go as text
            break;
          }
          (void)c->accepts_end();
          (void)c->complete();
        }
      }
    } else {
      const size_t nl = p.find('\n');
      messages.push_back({std::string(p.substr(0, nl)), nl == std::string_view::npos ? "" : std::string(p.substr(nl + 1))});
    }
  }
  const ChatTemplate recognised = ChatTemplate::from_text(parts[0]);
  for (bool gen : {false, true}) {
    (void)recognised.apply(messages, gen);
    (void)recognised.apply(messages, gen, tools);
    for (ChatTemplateKind k : {ChatTemplateKind::kChatMl, ChatTemplateKind::kLlama3, ChatTemplateKind::kLlama2,
                               ChatTemplateKind::kFallbackChatMl}) {
      (void)ChatTemplate::of_kind(k).apply(messages, gen);
    }
  }
  return 0;
}
