// Special tokens: recognised in text only with parse_special (user-defined
// ones always, as llama.cpp), BOS/EOS per kind and metadata, the
// end-of-generation sets, Phi-3's whitespace stripping, rendering.
#include <gtest/gtest.h>

#include "engine/gguf/gguf.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace minfer {
namespace {

using Ids = std::vector<TokenId>;

TEST(SpecialTokens, ParseSpecialOnAndOff) {
  const Tokenizer& tok = test::qwen_tokenizer();
  EXPECT_EQ(tok.encode("<|im_start|>user", {.parse_special = true}), (Ids{151644, 872}));
  const Ids plain = tok.encode("<|im_start|>user", {.parse_special = false});
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151644), 0);
  EXPECT_GT(plain.size(), 3u);
  EXPECT_EQ(tok.decode(plain), "<|im_start|>user");
  // <think> is user-defined: recognised either way.
  EXPECT_EQ(tok.encode("<think>", {.parse_special = false}), (Ids{151667}));
  EXPECT_EQ(tok.encode("a<think>b", {.parse_special = true}), (Ids{64, 151667, 65}));
  // Longer special tokens win: <|im_end|> is not <|im_end + |>.
  EXPECT_EQ(tok.encode("<|im_end|><|endoftext|>", {.parse_special = true}), (Ids{151645, 151643}));
}

// Fill-in-the-middle markers, found by their text where the file names no
// ids (tokenizer.ggml.fim_pre_token_id and its kin): Qwen2.5's, StarCoder's,
// Refact's and DeepSeek-Coder's; none in a vocabulary without them.
TEST(SpecialTokens, FillInTheMiddleMarkersOfCodeVocabularies) {
  const Tokenizer& qwen = test::qwen_tokenizer();
  EXPECT_EQ(qwen.special().fim_pre, 151659);
  EXPECT_EQ(qwen.special().fim_suf, 151661);
  EXPECT_EQ(qwen.special().fim_mid, 151660);
  // And its repository-level markers, <|repo_name|> and <|file_sep|>.
  EXPECT_EQ(qwen.special().fim_rep, 151663);
  EXPECT_EQ(qwen.special().fim_sep, 151664);
  struct Case {
    const char* vocab;
    const char *pre, *suf, *mid;
  };
  const Case cases[] = {
      {"starcoder", "<fim_prefix>", "<fim_suffix>", "<fim_middle>"},
      {"refact", "<fim_prefix>", "<fim_suffix>", "<fim_middle>"},
      {"deepseek-coder", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
       "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>"},
  };
  for (const Case& c : cases) {
    auto tok = test::load_vocab(c.vocab);
    ASSERT_TRUE(tok) << c.vocab;
    const SpecialTokens& s = tok->special();
    ASSERT_TRUE(s.fim_pre && s.fim_suf && s.fim_mid) << c.vocab;
    EXPECT_EQ(tok->piece(*s.fim_pre), c.pre) << c.vocab;
    EXPECT_EQ(tok->piece(*s.fim_suf), c.suf) << c.vocab;
    EXPECT_EQ(tok->piece(*s.fim_mid), c.mid) << c.vocab;
    EXPECT_EQ(tok->token_type(*s.fim_pre), TokenType::kControl) << c.vocab;
  }
  auto gpt2 = test::load_vocab("gpt-2");
  ASSERT_TRUE(gpt2);
  EXPECT_FALSE(gpt2->special().fim_pre || gpt2->special().fim_suf || gpt2->special().fim_mid);
  EXPECT_FALSE(gpt2->special().fim_rep || gpt2->special().fim_sep);
}

TEST(SpecialTokens, SpmBosAndSpacePrefix) {
  auto tok = test::load_vocab("llama-spm");
  ASSERT_TRUE(tok);
  EXPECT_TRUE(tok->special().add_bos);
  EXPECT_FALSE(tok->special().add_eos);
  EXPECT_EQ(tok->special().bos, 1);
  EXPECT_EQ(tok->special().eos, 2);
  EXPECT_EQ(tok->special().unk, 0);
  EXPECT_EQ(tok->encode("Hello", {.add_bos = false}), (Ids{15043}));  // ▁Hello
  EXPECT_EQ(tok->encode("Hello", {.add_bos = true}), (Ids{1, 15043}));
  EXPECT_EQ(tok->encode("Hello", {.add_bos = true, .add_eos = true}), (Ids{1, 15043, 2}));
  EXPECT_EQ(tok->encode("", {.add_bos = true}), (Ids{1}));
  EXPECT_EQ(tok->encode("", {}), (Ids{}));
  // After a special token the text gets the space prefix again.
  EXPECT_EQ(tok->encode("<s>Hello", {.parse_special = true}), (Ids{1, 15043}));
  EXPECT_NE(tok->encode("<s>Hello", {.parse_special = false}), (Ids{1, 15043}));
  EXPECT_EQ(tok->decode({1, 15043}), "Hello");
  EXPECT_EQ(tok->decode({1, 15043}, /*render_special=*/true), "<s> Hello");
  EXPECT_EQ(tok->end_of_generation_ids(), (Ids{2}));
}

TEST(SpecialTokens, BpeDefaultsFromMetadata) {
  auto gpt2 = test::load_vocab("gpt-2");
  ASSERT_TRUE(gpt2);
  EXPECT_FALSE(gpt2->special().add_bos);
  EXPECT_EQ(gpt2->special().bos, 50256);
  EXPECT_EQ(gpt2->end_of_generation_ids(), (Ids{50256}));
  EXPECT_EQ(gpt2->encode("Hello", {.add_bos = true}), (Ids{50256, 15496}));

  auto deepseek = test::load_vocab("deepseek-llm");
  ASSERT_TRUE(deepseek);
  EXPECT_TRUE(deepseek->special().add_bos);  // tokenizer.ggml.add_bos_token = true
  EXPECT_EQ(deepseek->special().bos, 100000);
  EXPECT_EQ(deepseek->special().eos, 100001);
  EXPECT_TRUE(deepseek->is_end_of_generation(100001));
}

TEST(SpecialTokens, WordPieceClsAndSep) {
  auto bert = test::load_vocab("bert-bge");
  ASSERT_TRUE(bert);
  EXPECT_EQ(bert->special().bos, 101);  // [CLS]
  EXPECT_EQ(bert->special().sep, 102);
  EXPECT_EQ(bert->special().unk, 100);
  const Ids ids = bert->encode("Hello World!", {.add_bos = true, .add_eos = true});
  EXPECT_EQ(ids, (Ids{101, 7592, 2088, 999, 102}));
  EXPECT_EQ(bert->decode(ids), "hello world !");  // lower-cased, split at punctuation
}

TEST(SpecialTokens, Phi3EatsWhitespaceAfterItsMarkers) {
  auto phi3 = test::load_vocab("phi-3");
  ASSERT_TRUE(phi3);
  // general.name "Phi3": llama.cpp gives its special tokens rstrip.
  EXPECT_EQ(phi3->encode("<|user|>\nHello", {.parse_special = true}), (Ids{32010, 15043}));
  EXPECT_EQ(phi3->special().eot, 32007);  // <|end|>
  EXPECT_EQ(phi3->end_of_generation_ids(), (Ids{32000, 32007}));
}

TEST(SpecialTokens, RenderingAndBadIds) {
  const Tokenizer& tok = test::qwen_tokenizer();
  EXPECT_EQ(tok.token_bytes(151644), "");
  EXPECT_EQ(tok.token_bytes(151644, /*render_special=*/true), "<|im_start|>");
  EXPECT_EQ(tok.token_bytes(151667), "<think>");  // user-defined: always text
  EXPECT_EQ(tok.token_bytes(-1), "\xEF\xBF\xBD");
  EXPECT_EQ(tok.token_bytes(tok.vocab_size()), "\xEF\xBF\xBD");
  EXPECT_EQ(tok.find_piece("<|im_end|>"), 151645);
  EXPECT_FALSE(tok.find_piece("no such piece").has_value());
  EXPECT_EQ(tok.token_type(151645), TokenType::kControl);
}

TEST(SpecialTokens, Stories260KDefaults) {
  // The default model: no add_bos_token key (SPM default: add BOS), and
  // separator/padding ids of 0xFFFFFFFF, which mean "none".
  auto file = gguf::File::open(test::data_path("models/stories260K.gguf"));
  ASSERT_TRUE(file) << file.error().message;
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok) << tok.error().message;
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.vocab_size(), 512);
  EXPECT_TRUE(t.special().add_bos);
  EXPECT_EQ(t.special().bos, 1);
  EXPECT_EQ(t.special().eos, 2);
  EXPECT_FALSE(t.special().sep.has_value());
  EXPECT_FALSE(t.special().pad.has_value());
  const std::string text = "Once upon a time, there was a little girl named Lily.\n";
  const Ids ids = t.encode(text, {.add_bos = true});
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 13), 1);  // <0x0A>: the newline falls back to a byte
  EXPECT_EQ(t.decode(ids), text);
}

}  // namespace
}  // namespace minfer
