// ChatTemplate recognition: which family a template is, by markers in its
// text, and what the renderers need from it (default system prompt, BOS/EOS
// spelling). The renderers are in chat_render.cpp.
#include "engine/chat/chat_template.h"

#include <fmt/format.h>

#include "engine/gguf/gguf.h"
#include "platform/log.h"

namespace minfer {
namespace {

bool contains(std::string_view text, std::string_view needle) { return text.find(needle) != std::string_view::npos; }

// The text between `open` and "<|im_end|>" where it is a plain literal.
std::string default_chatml_system_after(std::string_view tmpl, std::string_view open) {
  constexpr std::string_view kClose = "<|im_end|>";
  for (size_t pos = tmpl.find(open); pos != std::string_view::npos; pos = tmpl.find(open, pos + 1)) {
    const size_t start = pos + open.size();
    const size_t end = tmpl.find(kClose, start);
    if (end == std::string_view::npos || end == start) continue;
    const std::string_view body = tmpl.substr(start, end - start);
    if (body.find_first_of("'\"{}+") != std::string_view::npos) continue;  // not a plain literal
    std::string out;
    for (size_t i = 0; i < body.size(); ++i) {  // undo the Jinja escapes a literal may hold
      if (body[i] == '\\' && i + 1 < body.size() && body[i + 1] == 'n') {
        out.push_back('\n');
        ++i;
      } else {
        out.push_back(body[i]);
      }
    }
    return out;
  }
  return "";
}

// A ChatML default system prompt written as one Jinja string literal:
// '<|im_start|>system\nYou are ...<|im_end|>\n' (Qwen2, Qwen2.5). Qwen3's
// '<|im_start|>system\n' + messages[0].content has none. The literal's line
// break is usually the escape "\n", sometimes a real one.
std::string default_chatml_system(std::string_view tmpl) {
  for (std::string_view open : {"<|im_start|>system\\n", "<|im_start|>system\n"}) {
    if (std::string found = default_chatml_system_after(tmpl, open); !found.empty()) return found;
  }
  return "";
}

// What the template looks like, for the fallback message.
std::string describe_unknown(std::string_view tmpl) {
  if (contains(tmpl, "<|user|>") && contains(tmpl, "<|assistant|>") && contains(tmpl, "<|end|>"))
    return "it looks like Phi-3's (<|user|>, <|assistant|>, <|end|>)";
  if (contains(tmpl, "<start_of_turn>")) return "it looks like Gemma's (<start_of_turn>)";
  return "no <|im_start|>, <|start_header_id|> or [INST] marker found";
}

std::string token_text(const gguf::File& file, std::string_view id_key) {
  const gguf::Value* tokens = file.find("tokenizer.ggml.tokens");
  auto id = file.get_u32_or(id_key, UINT32_MAX);
  if (!tokens || !id || *id == UINT32_MAX) return "";
  const auto* arr = std::get_if<gguf::Array>(&tokens->data);
  if (!arr || *id >= arr->items.size()) return "";
  const auto* s = std::get_if<std::string>(&arr->items[*id].data);
  return s ? *s : "";
}

bool vocab_has(const gguf::File& file, std::string_view piece) {
  const gguf::Value* tokens = file.find("tokenizer.ggml.tokens");
  const auto* arr = tokens ? std::get_if<gguf::Array>(&tokens->data) : nullptr;
  if (!arr) return false;
  for (const gguf::Value& v : arr->items) {
    const auto* s = std::get_if<std::string>(&v.data);
    if (s && *s == piece) return true;
  }
  return false;
}

}  // namespace

ChatTemplate ChatTemplate::of_kind(ChatTemplateKind kind) {
  ChatTemplate t;
  t.kind_ = kind;
  switch (kind) {
    case ChatTemplateKind::kLlama3:
      t.bos_text_ = "<|begin_of_text|>";
      break;
    case ChatTemplateKind::kLlama2:
      t.bos_text_ = "<s>";
      t.eos_text_ = "</s>";
      break;
    case ChatTemplateKind::kChatMl:
      break;
    case ChatTemplateKind::kFallbackChatMl:
      t.fallback_reason_ = "ChatML requested as a fallback";
      break;
  }
  return t;
}

ChatTemplate ChatTemplate::make_fallback(std::string reason) {
  ChatTemplate t = of_kind(ChatTemplateKind::kFallbackChatMl);
  t.fallback_reason_ = std::move(reason);
  return t;
}

ChatTemplate ChatTemplate::recognise(std::string_view tmpl) {
  if (tmpl.empty()) return make_fallback("the model has no chat template");
  if (contains(tmpl, "<|im_start|>")) {
    ChatTemplate t = of_kind(ChatTemplateKind::kChatMl);
    t.default_system_ = default_chatml_system(tmpl);
    if (contains(tmpl, "<think>") && contains(tmpl, "</think>")) t.flavor_ = Flavor::kQwen3Thinking;
    t.thinking_switch_ = t.flavor_ == Flavor::kQwen3Thinking && contains(tmpl, "enable_thinking");
    // Qwen2.5 and Qwen3 (and templates written after them) declare tools and
    // write calls as <tool_call> blocks; Qwen3 prints a string's arguments as
    // they are ("arguments is string"), Qwen2.5 through tojson.
    if (contains(tmpl, "<tool_call>") && contains(tmpl, "<tool_response>")) {
      t.tool_style_ = contains(tmpl, "arguments is string") ? ToolStyle::kQwen3 : ToolStyle::kQwen25;
    }
    return t;
  }
  if (contains(tmpl, "<|start_header_id|>")) {
    ChatTemplate t = of_kind(ChatTemplateKind::kLlama3);
    if (contains(tmpl, "Cutting Knowledge Date")) t.flavor_ = Flavor::kLlama31;
    if (t.flavor_ == Flavor::kLlama31 && contains(tmpl, "Environment: ipython")) t.tool_style_ = ToolStyle::kLlama3;
    return t;
  }
  if (contains(tmpl, "[INST]")) {
    ChatTemplate t = of_kind(ChatTemplateKind::kLlama2);
    if (!contains(tmpl, "<<SYS>>")) t.flavor_ = Flavor::kMistral;
    return t;
  }
  return make_fallback(fmt::format("the chat template is not one we recognise: {}", describe_unknown(tmpl)));
}

ChatTemplate ChatTemplate::from_text(std::string_view tmpl) {
  ChatTemplate t = recognise(tmpl);
  if (t.kind_ == ChatTemplateKind::kFallbackChatMl) log::warn("chat template: {}; using ChatML", t.fallback_reason_);
  return t;
}

ChatTemplate ChatTemplate::from_gguf(const gguf::File& file, std::optional<std::string_view> template_text) {
  auto text = template_text ? Expected<std::string>(std::string(*template_text))
                            : file.get_string_or("tokenizer.chat_template", "");
  ChatTemplate t = text ? recognise(*text)
                        : make_fallback("tokenizer.chat_template is not a string: " + text.error().message);
  if (t.kind_ == ChatTemplateKind::kFallbackChatMl) {
    if (!vocab_has(file, "<|im_start|>"))
      t.fallback_reason_ +=
          "; note the vocabulary has no <|im_start|> token, so the ChatML markers will be tokenized as text";
    log::warn("chat template of {}: {}; using ChatML", file.path(), t.fallback_reason_);
  }
  if (t.kind_ == ChatTemplateKind::kLlama3 || t.kind_ == ChatTemplateKind::kLlama2) {
    if (std::string bos = token_text(file, "tokenizer.ggml.bos_token_id"); !bos.empty()) t.bos_text_ = bos;
    if (std::string eos = token_text(file, "tokenizer.ggml.eos_token_id"); !eos.empty() && !t.eos_text_.empty())
      t.eos_text_ = eos;
  }
  return t;
}

std::string_view ChatTemplate::name() const {
  switch (kind_) {
    case ChatTemplateKind::kChatMl:
      return "chatml";
    case ChatTemplateKind::kLlama3:
      return "llama3";
    case ChatTemplateKind::kLlama2:
      return "llama2";
    case ChatTemplateKind::kFallbackChatMl:
      return "chatml (fallback)";
  }
  return "chatml";
}

std::string_view ChatTemplate::tool_style_name() const {
  switch (tool_style_) {
    case ToolStyle::kNone: return "";
    case ToolStyle::kQwen25: return "qwen2.5";
    case ToolStyle::kQwen3: return "qwen3";
    case ToolStyle::kLlama3: return "llama3";
  }
  return "";
}

std::string_view ChatTemplate::tool_call_opener() const {
  return tool_style_ == ToolStyle::kQwen25 || tool_style_ == ToolStyle::kQwen3 ? "<tool_call>\n" : "";
}

std::string_view ChatTemplate::tool_call_closer() const {
  return tool_style_ == ToolStyle::kQwen25 || tool_style_ == ToolStyle::kQwen3 ? "\n</tool_call>" : "";
}

Expected<std::string> ChatTemplate::apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                          const std::vector<std::string>& tools,
                                          std::optional<bool> enable_thinking) const {
  if (messages.empty()) return unexpected(ErrorCode::kInvalidArgument, "chat template: no messages");
  const bool has_tools = tool_style_ != ToolStyle::kNone;
  auto no_tools = [&](std::string_view what) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("chat template: {}, but this model's template ({}) has no tool calling", what, name()));
  };
  if (!tools.empty() && !has_tools) return no_tools("tools were declared");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool known = m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "tool";
    if (!known)
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("chat template: message {} has role '{}'; supported: system, user, assistant{}", i,
                                    m.role, has_tools ? ", tool" : ""));
    if (m.role == "tool" && !has_tools) return no_tools(fmt::format("message {} is a tool result", i));
    if (!m.tool_calls.empty() && !has_tools) return no_tools(fmt::format("message {} has tool calls", i));
    if (!m.tool_calls.empty() && m.role != "assistant")
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("chat template: message {} has tool calls but role '{}'; only an assistant "
                                    "calls tools",
                                    i, m.role));
  }
  switch (kind_) {
    case ChatTemplateKind::kLlama3:
      return apply_llama3(messages, add_generation_prompt, tools);
    case ChatTemplateKind::kLlama2:
      return apply_inst(messages);
    case ChatTemplateKind::kChatMl:
    case ChatTemplateKind::kFallbackChatMl:
      return apply_chatml(messages, add_generation_prompt, tools, enable_thinking);
  }
  return apply_chatml(messages, add_generation_prompt, tools, enable_thinking);
}

}  // namespace minfer
