// Chat templates: the model's `tokenizer.chat_template` recognised by its text
// as one of the common families and applied by C++ code (no Jinja engine).
// A template that is not recognised falls back to ChatML with a warning; the
// choice is reported so that `minfer gguf info` and /v1/models can show it.
//
// Each family renders what its real template renders for plain conversations
// (system, user and assistant turns):
//   ChatML   — Qwen2/2.5/3 and others. A default system prompt written into the
//              template (Qwen2.5's "You are Qwen, ...") is used when the
//              conversation has none. Qwen3-style templates (they mention
//              <think>) also drop the reasoning from earlier assistant turns and
//              give a final assistant turn an empty <think></think> block, as
//              the template does when enable_thinking is not set; with
//              add_generation_prompt nothing follows "<|im_start|>assistant\n"
//              then (the model decides whether to think) — unless enable_thinking
//              is false (where the template reads it): then an empty think block
//              follows, as the template writes it.
//   Llama-3  — 3.0, and 3.1+ whose template always writes a system header with
//              "Cutting Knowledge Date: December 2023" and the template's
//              fallback date "26 Jul 2024" (fixed, so prompts are reproducible).
//   [INST]   — Llama-2-chat (<<SYS>> block inside the first [INST]) and
//              Mistral/Mixtral (no system role: an error, as the template raises).
// Tools (OpenAI's function calling) where the template has them: Qwen2.5's
// and Qwen3's ChatML templates (they mention <tool_call>) declare the tools
// in the system turn, write an assistant's calls as <tool_call> blocks and
// the tool role's results as <tool_response> blocks in a user turn (tool
// calls are parsed back out of the reply by engine/chat/tool_calls.h).
// Qwen2.5's template prints a call's arguments with `tojson`, so they are
// parsed and written as Python's json.dumps would; Qwen3's prints a string
// as it is. Llama 3.1+ templates (they mention "Environment: ipython") put
// the tools, indented, into the first user turn, write a call as the whole
// assistant turn {"name": ..., "parameters": ...} (one per turn) and a tool
// result as an ipython turn holding the result as a JSON string. Other
// templates refuse tools, tool calls and the tool role.
// The rendered text contains the BOS text where the template writes
// bos_token: encode it with parse_special=true and add_bos=false.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/expected.h"

namespace minfer::gguf {
class File;
}

namespace minfer {

// A call an assistant turn made (OpenAI's tool_calls[i]).
struct ToolCall {
  std::string id;         // the API's id ("call_…"); the templates here do not print it
  std::string name;       // the function's
  std::string arguments;  // a JSON text, as the API carries it
};

struct ChatMessage {
  std::string role;     // system | user | assistant | tool
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant: the calls it made (content may be empty)
  std::string tool_call_id;          // tool: which call this is the result of
  // assistant: its reasoning apart from the content (OpenAI-compatible
  // servers' reasoning_content); absent: a thinking template finds it in
  // the content's <think> block.
  std::optional<std::string> reasoning_content;
};

enum class ChatTemplateKind { kChatMl, kLlama3, kLlama2, kFallbackChatMl };

// How a template writes tools, if it does.
enum class ToolStyle {
  kNone,
  kQwen25,  // <tool_call> blocks; a call's arguments through `tojson`
  kQwen3,   // <tool_call> blocks; a call's arguments printed as given
  kLlama3,  // Llama 3.1+: the tools in the first user turn, a call is the whole reply {"name", "parameters"}
};

class ChatTemplate {
 public:
  // From the GGUF's tokenizer.chat_template (absent or unrecognised: ChatML,
  // with `fallback_reason()` saying why). BOS/EOS texts come from the
  // vocabulary's bos/eos token ids when present.
  // `template_text`, when given, stands in for the file's (a chat template
  // file the configuration names).
  static ChatTemplate from_gguf(const gguf::File& file, std::optional<std::string_view> template_text = {});
  static ChatTemplate from_text(std::string_view template_text);
  static ChatTemplate of_kind(ChatTemplateKind kind);

  ChatTemplateKind kind() const { return kind_; }
  std::string_view name() const;  // "chatml", "llama3", "llama2", "chatml (fallback)"
  const std::string& fallback_reason() const { return fallback_reason_; }

  ToolStyle tool_style() const { return tool_style_; }
  // "qwen2.5", "qwen3", "llama3", or "" without tools: for /v1/models and gguf info.
  std::string_view tool_style_name() const;
  // What an assistant turn writes before a call's JSON ("<tool_call>\n"):
  // a prompt that ends with it makes the model write a call. Empty without
  // tools, and for Llama's (a call is the whole turn).
  std::string_view tool_call_opener() const;
  // What closes a call after its JSON ("\n</tool_call>").
  std::string_view tool_call_closer() const;

  // Renders the conversation; with add_generation_prompt the text ends where
  // the assistant's reply begins. `tools` are the declared tools, each a JSON
  // text (OpenAI's {"type": "function", "function": {...}}), written in their
  // key order. Errors on an unknown role, an empty list, an order the
  // template rejects ([INST] templates need user/assistant alternation), or
  // tools, calls or tool results where the template has none.
  // `enable_thinking`: the template variable of that name (Qwen3's), unset
  // when absent.
  Expected<std::string> apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                              const std::vector<std::string>& tools = {},
                              std::optional<bool> enable_thinking = std::nullopt) const;
  // The model writes its reasoning in a <think> block first (Qwen3-style
  // templates), and whether the template takes enable_thinking.
  bool thinks() const { return flavor_ == Flavor::kQwen3Thinking; }
  bool takes_enable_thinking() const { return thinking_switch_; }

 private:
  enum class Flavor {
    kPlain,
    kQwen3Thinking,  // ChatML with Qwen3's <think> handling
    kLlama31,        // Llama-3 with the dated system header
    kMistral,        // [INST] without <<SYS>>
  };
  // Recognition without logging; from_text/from_gguf log a fallback once.
  static ChatTemplate recognise(std::string_view template_text);
  static ChatTemplate make_fallback(std::string reason);

  Expected<std::string> apply_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                     const std::vector<std::string>& tools, std::optional<bool> enable_thinking) const;
  Expected<std::string> chatml_tools_header(const std::vector<ChatMessage>& messages,
                                            const std::vector<std::string>& tools) const;
  std::string chatml_tool_calls(const ChatMessage& m, std::string_view content) const;
  Expected<std::string> apply_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                     const std::vector<std::string>& tools) const;
  Expected<std::string> apply_inst(const std::vector<ChatMessage>& messages) const;

  ChatTemplateKind kind_ = ChatTemplateKind::kChatMl;
  Flavor flavor_ = Flavor::kPlain;
  ToolStyle tool_style_ = ToolStyle::kNone;
  bool thinking_switch_ = false;  // the template reads enable_thinking
  std::string fallback_reason_;
  std::string default_system_;  // ChatML: the template's default system prompt, if any
  std::string bos_text_;  // e.g. "<s>" / "<|begin_of_text|>" where the template emits it
  std::string eos_text_;  // [INST]: ends each assistant turn
};

}  // namespace minfer
