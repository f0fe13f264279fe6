// ChatTemplate: recognition of the real templates and their output, written
// out by hand from the Jinja text of each (quoted in the test where it
// matters). The Qwen3 template is the one in
// tests/data/qwen-tokenizer/tokenizer_config.json.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/chat/chat_template.h"
#include "engine/gguf/gguf.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace minfer {
namespace {

using Messages = std::vector<ChatMessage>;

std::string qwen3_template() {
  const auto config = nlohmann::json::parse(test::read_file(test::data_path("qwen-tokenizer/tokenizer_config.json")));
  return config.at("chat_template").get<std::string>();
}

std::string render(const ChatTemplate& t, const Messages& m, bool gen = true) {
  auto out = t.apply(m, gen);
  EXPECT_TRUE(out) << out.error().message;
  return out ? *out : std::string();
}

TEST(ChatTemplate, Qwen3PlainConversation) {
  const ChatTemplate t = ChatTemplate::from_text(qwen3_template());
  EXPECT_EQ(t.kind(), ChatTemplateKind::kChatMl);
  EXPECT_EQ(t.name(), "chatml");
  EXPECT_TRUE(t.fallback_reason().empty());
  // The same text as the fourth reference vector of reference-vectors.json;
  // enable_thinking unset: nothing after "<|im_start|>assistant\n".
  EXPECT_EQ(render(t, {{"system", "You are a helpful assistant."}, {"user", "Hi!"}}),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\n");
  // No system message: Qwen3 adds none.
  EXPECT_EQ(render(t, {{"user", "Hi!"}}), "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Qwen3ThinkingInHistory) {
  const ChatTemplate t = ChatTemplate::from_text(qwen3_template());
  // An earlier assistant turn loses its reasoning: content.split('</think>')[-1].lstrip('\n').
  EXPECT_EQ(render(t, {{"user", "2+2?"}, {"assistant", "<think>\nadd them\n</think>\n\n4"}, {"user", "Times 3?"}}),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
            "<|im_start|>user\nTimes 3?<|im_end|>\n<|im_start|>assistant\n");
  // A final assistant turn after the last query gets the (empty) think block.
  EXPECT_EQ(render(t, {{"user", "Hi"}, {"assistant", "Hello"}}, /*gen=*/false),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello<|im_end|>\n");
  EXPECT_EQ(render(t, {{"user", "Hi"}, {"assistant", "<think>\nplan\n\n</think>\n\nHello"}}, false),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nplan\n</think>\n\nHello<|im_end|>\n");
}

TEST(ChatTemplate, ChatMlDefaultSystemPrompt) {
  // Excerpt of Qwen2.5's template: the default system prompt when the
  // conversation has none.
  const std::string qwen25 =
      "{%- if messages[0]['role'] == 'system' %}\n        {{- '<|im_start|>system\\n' + messages[0]['content'] + "
      "'<|im_end|>\\n' }}\n    {%- else %}\n        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba "
      "Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n    {%- endif %}";
  const ChatTemplate t = ChatTemplate::from_text(qwen25);
  EXPECT_EQ(render(t, {{"user", "Hi"}}),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render(t, {{"system", "Be brief."}, {"user", "Hi"}}, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, Llama3) {
  // Meta-Llama-3-8B-Instruct.
  const ChatTemplate t = ChatTemplate::from_text(
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
      "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
      "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
      "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}");
  EXPECT_EQ(t.kind(), ChatTemplateKind::kLlama3);
  EXPECT_EQ(t.name(), "llama3");
  EXPECT_EQ(render(t, {{"system", "You are helpful."}, {"user", " Hi! \n"}}),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Llama31DatedSystemHeader) {
  // Llama-3.1+: always a system header with the dates ("26 Jul 2024" is the
  // template's own fallback for date_string).
  const ChatTemplate t = ChatTemplate::from_text(
      "{{- bos_token }}\n{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n"
      "{%- endif %}\n{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
      "{{- \"Cutting Knowledge Date: December 2023\\n\" }}");
  EXPECT_EQ(t.kind(), ChatTemplateKind::kLlama3);
  EXPECT_EQ(render(t, {{"user", "Hi!"}}),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render(t, {{"system", "Be brief. "}, {"user", "Hi!"}}, false),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>");
}

const char* kLlama2Template =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif "
    "%}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
    "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
    "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] "
    "== 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

TEST(ChatTemplate, Llama2Chat) {
  const ChatTemplate t = ChatTemplate::from_text(kLlama2Template);
  EXPECT_EQ(t.kind(), ChatTemplateKind::kLlama2);
  EXPECT_EQ(t.name(), "llama2");
  // Hugging Face's chat-templating example.
  EXPECT_EQ(render(t, {{"system", "You are a friendly chatbot who always responds in the style of a pirate"},
                       {"user", "Hello, how are you?"},
                       {"assistant", "I'm doing great. How can I help you today?"},
                       {"user", "I'd like to show off how chat templating works!"}}),
            "<s>[INST] <<SYS>>\nYou are a friendly chatbot who always responds in the style of a pirate\n<</SYS>>\n\n"
            "Hello, how are you? [/INST] I'm doing great. How can I help you today? </s><s>[INST] I'd like to show "
            "off how chat templating works! [/INST]");
  auto bad = t.apply({{"user", "a"}, {"user", "b"}}, true);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("message 1"), std::string::npos) << bad.error().message;
}

TEST(ChatTemplate, MistralInst) {
  // mistralai/Mixtral-8x7B-Instruct-v0.1.
  const ChatTemplate t = ChatTemplate::from_text(
      "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
      "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
      "message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
      "'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles "
      "are supported!') }}{% endif %}{% endfor %}");
  EXPECT_EQ(t.kind(), ChatTemplateKind::kLlama2);
  EXPECT_EQ(render(t, {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}}),
            "<s>[INST] Hi [/INST]Hello!</s>[INST] Bye [/INST]");
  auto with_system = t.apply({{"system", "S"}, {"user", "Hi"}}, true);
  ASSERT_FALSE(with_system);
  EXPECT_EQ(with_system.error().code, ErrorCode::kInvalidArgument);
}

TEST(ChatTemplate, Phi3FallsBackToChatMlWithAReason) {
  auto file = gguf::File::open(test::data_path("vocab/ggml-vocab-phi-3.gguf"));
  ASSERT_TRUE(file) << file.error().message;
  const ChatTemplate t = ChatTemplate::from_gguf(**file);
  EXPECT_EQ(t.kind(), ChatTemplateKind::kFallbackChatMl);
  EXPECT_EQ(t.name(), "chatml (fallback)");
  EXPECT_NE(t.fallback_reason().find("Phi-3"), std::string::npos) << t.fallback_reason();
  EXPECT_NE(t.fallback_reason().find("no <|im_start|> token"), std::string::npos) << t.fallback_reason();
  EXPECT_EQ(render(t, {{"user", "Hi"}}), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, MissingTemplateAndBadInput) {
  auto file = gguf::File::open(test::data_path("vocab/ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(file) << file.error().message;
  const ChatTemplate t = ChatTemplate::from_gguf(**file);
  EXPECT_EQ(t.kind(), ChatTemplateKind::kFallbackChatMl);
  EXPECT_NE(t.fallback_reason().find("no chat template"), std::string::npos) << t.fallback_reason();

  const ChatTemplate chatml = ChatTemplate::of_kind(ChatTemplateKind::kChatMl);
  EXPECT_FALSE(chatml.apply({}, true));
  // A role no template knows; the tool role where the template has no tools
  // (more in chat_tools_test.cpp).
  auto function = chatml.apply({{"function", "42"}}, true);
  ASSERT_FALSE(function);
  EXPECT_NE(function.error().message.find("role 'function'"), std::string::npos);
  auto tool = chatml.apply({{"tool", "42"}}, true);
  ASSERT_FALSE(tool);
  EXPECT_NE(tool.error().message.find("message 0 is a tool result"), std::string::npos) << tool.error().message;
}

}  // namespace
}  // namespace minfer
