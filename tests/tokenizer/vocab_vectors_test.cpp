// llama.cpp's tokenizer test vectors (tests/data/vocab/*.inp/.out, produced
// with Hugging Face tokenizers, add_special_tokens=False): every string of
// every vocabulary whose GGUF is present must tokenize to the same ids,
// with add_bos=false and parse_special=false as llama.cpp's
// test-tokenizer-0 runs them.
#include <gtest/gtest.h>

#include "tests/tokenizer/tokenizer_test_util.h"

namespace minfer {
namespace {

class VocabVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectors, MatchTokenForToken) {
  const std::string name = GetParam();
  auto tok = test::load_vocab(name);
  ASSERT_TRUE(tok);
  const auto vectors = test::load_vectors(name);
  ASSERT_EQ(vectors.size(), 46u) << "the .inp of llama.cpp has 46 strings";
  // WordPiece lower-cases and drops accents: its decode is not the text.
  test::expect_vectors(*tok, vectors, /*parse_special=*/false, /*check_decode=*/name != "bert-bge", name);
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, VocabVectors,
                         ::testing::Values("bert-bge", "deepseek-coder", "deepseek-llm", "falcon", "gpt-2",
                                           "llama-spm", "mpt", "phi-3", "refact", "starcoder"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace minfer
