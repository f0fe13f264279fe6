// What a vocabulary's special tokens are, decided once at load the way
// llama.cpp's llama_vocab::impl::load does: default ids per tokenizer kind,
// metadata overrides, tokens recognised by their text (EOT, FIM, the
// end-of-generation set) and the per-token strip attributes.
#pragma once

#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace minfer {

struct SpecialSetup {
  SpecialTokens special;
  std::vector<TokenId> end_of_generation;  // sorted, unique
  // The vocabulary's types after llama.cpp's fix-ups: tokens that look like
  // end-of-turn or FIM markers are made CONTROL whatever the file says.
  std::vector<TokenType> types;
  // Tokens recognised in input text (control, user-defined, unknown).
  std::vector<SpecialPartitioner::Entry> partition;
};

// `pieces`/`index` are the vocabulary after empty-token renaming; `types` its
// token types (all kNormal when the file has none).
SpecialSetup resolve_special_tokens(TokenizerKind kind, const Vocab& vocab, const std::vector<std::string>& pieces,
                                    std::vector<TokenType> types, const PieceIndex& index, bool pre_adds_bos);

}  // namespace minfer
