// The Qwen tokenizer through `minfer synth --tokenizer`'s code path:
// synth::write_model with tokenizer_json writes a (tiny) model file whose
// vocabulary must tokenize exactly like the in-memory import, and whose chat
// template is recognised.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "engine/chat/chat_template.h"
#include "engine/gguf/gguf.h"
#include "engine/synth/synth.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace minfer {
namespace {

TEST(QwenSynth, WrittenModelCarriesTheTokenizer) {
  auto preset = synth::find_preset("qwen3-0.6b");
  ASSERT_TRUE(preset);
  synth::Options o;
  o.preset = *preset;
  // Tiny: the tokenizer is what is under test, not the weights.
  o.preset.d_model = 64;
  o.preset.n_heads = 2;
  o.preset.n_kv_heads = 1;
  o.preset.head_dim = 32;
  o.preset.d_ff = 64;
  o.layers = 1;
  o.type = "q8_0";
  o.tokenizer_json = test::data_path("qwen-tokenizer/tokenizer.json");
  const auto path = std::filesystem::temp_directory_path() /
                    ("minfer-qwen-synth-" + std::to_string(::getpid()) + ".gguf");
  o.output_path = path.string();
  auto written = synth::write_model(o);
  ASSERT_TRUE(written) << written.error().message;

  {
    auto file = gguf::File::open(o.output_path);
    ASSERT_TRUE(file) << file.error().message;
    auto tok = Tokenizer::from_gguf(**file);
    ASSERT_TRUE(tok) << tok.error().message;
    EXPECT_EQ((*tok)->vocab_size(), preset->vocab_size);  // padded to the embedding rows
    EXPECT_EQ((*tok)->pre(), "qwen2");
    EXPECT_EQ((*tok)->special().eos, 151645);
    test::expect_vectors(**tok, test::load_vectors("qwen2"), /*parse_special=*/false, /*check_decode=*/true,
                         "synth qwen2");
    test::expect_vectors(**tok, test::load_qwen_reference_vectors(), /*parse_special=*/true,
                         /*check_decode=*/true, "synth reference");

    const ChatTemplate chat = ChatTemplate::from_gguf(**file);
    EXPECT_EQ(chat.kind(), ChatTemplateKind::kChatMl);
    auto prompt = chat.apply({{"system", "You are a helpful assistant."}, {"user", "Hi!"}}, true);
    ASSERT_TRUE(prompt);
    EXPECT_EQ((*tok)->encode(*prompt, {.parse_special = true}),
              test::load_qwen_reference_vectors().at(3).ids);  // the rendered prompt is reference text 4
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace minfer
