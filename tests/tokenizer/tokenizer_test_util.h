// Shared helpers of the tokenizer tests: data paths, loading the vocab GGUFs
// and llama.cpp's .inp/.out vectors, and a Qwen tokenizer built once from
// tests/data/qwen-tokenizer through import_hf_tokenizer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace minfer::test {

std::string data_path(const std::string& relative);
std::string read_file(const std::string& path);

// tests/data/vocab/ggml-vocab-<name>.gguf; fails the test (ADD_FAILURE) and
// returns null when it cannot be loaded.
std::unique_ptr<Tokenizer> load_vocab(const std::string& name);

struct VocabVector {
  std::string text;
  std::vector<TokenId> ids;
};
// ggml-vocab-<name>.gguf.inp/.out: the .inp split on "\n__ggml_vocab_test__\n"
// (the empty tail dropped), one .out line of " <id>" items per string.
std::vector<VocabVector> load_vectors(const std::string& name);

// tests/data/qwen-tokenizer/reference-vectors.json (special tokens in the
// text are meant to be parsed).
std::vector<VocabVector> load_qwen_reference_vectors();

// Encodes every vector's text (no BOS) and checks the ids, and with
// check_decode that decode(ids) == text; each mismatch is reported with
// `what` and both id lists.
void expect_vectors(const Tokenizer& tok, const std::vector<VocabVector>& vectors, bool parse_special,
                    bool check_decode, const std::string& what);

// The real Qwen tokenizer as a GGUF `gpt2` vocabulary: import_hf_tokenizer +
// gguf::Writer + gguf::File::parse, built once per process.
const Tokenizer& qwen_tokenizer();

std::string ids_to_string(const std::vector<TokenId>& ids);

}  // namespace minfer::test
