// Chat templates: the model's `tokenizer.chat_template` recognised by its text
// as one of the common families and applied by C++ code (no Jinja engine).
// A template that is not recognised falls back to ChatML with a warning; the
// choice is reported so that `minfer gguf info` and /v1/models can show it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/common/expected.h"

namespace minfer::gguf {
class File;
}

namespace minfer {

struct ChatMessage {
  std::string role;     // system | user | assistant
  std::string content;
};

enum class ChatTemplateKind { kChatMl, kLlama3, kLlama2, kFallbackChatMl };

class ChatTemplate {
 public:
  // From the GGUF's tokenizer.chat_template (absent or unrecognised: ChatML,
  // with `fallback_reason()` saying why).
  static ChatTemplate from_gguf(const gguf::File& file);
  static ChatTemplate from_text(std::string_view template_text);
  static ChatTemplate of_kind(ChatTemplateKind kind);

  ChatTemplateKind kind() const { return kind_; }
  std::string_view name() const;  // "chatml", "llama3", "llama2", "chatml (fallback)"
  const std::string& fallback_reason() const { return fallback_reason_; }

  // Renders the conversation; with add_generation_prompt the text ends where
  // the assistant's reply begins. Errors on an unknown role or an empty list.
  Expected<std::string> apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

 private:
  ChatTemplateKind kind_ = ChatTemplateKind::kChatMl;
  std::string fallback_reason_;
  std::string bos_text_;  // e.g. "<s>" / "<|begin_of_text|>" where the template emits it
};

}  // namespace minfer
