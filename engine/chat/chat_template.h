// Chat templates: the model's `tokenizer.chat_template` recognised by its text
// as one of the common families and applied by C++ code (no Jinja engine).
// A template that is not recognised falls back to ChatML with a warning; the
// choice is reported so that `minfer gguf info` and /v1/models can show it.
//
// Each family renders what its real template renders for plain conversations
// (system, user and assistant turns; no tools):
//   ChatML   — Qwen2/2.5/3 and others. A default system prompt written into the
//              template (Qwen2.5's "You are Qwen, ...") is used when the
//              conversation has none. Qwen3-style templates (they mention
//              <think>) also drop the reasoning from earlier assistant turns and
//              give a final assistant turn an empty <think></think> block, as
//              the template does when enable_thinking is not set; with
//              add_generation_prompt nothing follows "<|im_start|>assistant\n"
//              then (the model decides whether to think).
//   Llama-3  — 3.0, and 3.1+ whose template always writes a system header with
//              "Cutting Knowledge Date: December 2023" and the template's
//              fallback date "26 Jul 2024" (fixed, so prompts are reproducible).
//   [INST]   — Llama-2-chat (<<SYS>> block inside the first [INST]) and
//              Mistral/Mixtral (no system role: an error, as the template raises).
// The rendered text contains the BOS text where the template writes
// bos_token: encode it with parse_special=true and add_bos=false.
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
  // with `fallback_reason()` saying why). BOS/EOS texts come from the
  // vocabulary's bos/eos token ids when present.
  static ChatTemplate from_gguf(const gguf::File& file);
  static ChatTemplate from_text(std::string_view template_text);
  static ChatTemplate of_kind(ChatTemplateKind kind);

  ChatTemplateKind kind() const { return kind_; }
  std::string_view name() const;  // "chatml", "llama3", "llama2", "chatml (fallback)"
  const std::string& fallback_reason() const { return fallback_reason_; }

  // Renders the conversation; with add_generation_prompt the text ends where
  // the assistant's reply begins. Errors on an unknown role, an empty list, or
  // an order the template rejects ([INST] templates need user/assistant
  // alternation).
  Expected<std::string> apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

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

  Expected<std::string> apply_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  Expected<std::string> apply_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  Expected<std::string> apply_inst(const std::vector<ChatMessage>& messages) const;

  ChatTemplateKind kind_ = ChatTemplateKind::kChatMl;
  Flavor flavor_ = Flavor::kPlain;
  std::string fallback_reason_;
  std::string default_system_;  // ChatML: the template's default system prompt, if any
  std::string bos_text_;  // e.g. "<s>" / "<|begin_of_text|>" where the template emits it
  std::string eos_text_;  // [INST]: ends each assistant turn
};

}  // namespace minfer
