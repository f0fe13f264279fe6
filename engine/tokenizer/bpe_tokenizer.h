// Byte-level BPE (`tokenizer.ggml.model = "gpt2"`), as llama.cpp's
// llm_tokenizer_bpe: the pre-tokenizer splits text into words, each word's
// bytes start as one symbol each, and the adjacent pair with the lowest merge
// rank merges until none is left.
//
// Merges work on ids, not strings: every text that occurs in a merge gets an
// id (its token id, or one past the vocabulary for the few that are not
// tokens), and the rank table maps (left id, right id) to (rank, merged id).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace minfer {

class BpeTokenizer final : public Tokenizer {
 public:
  static Expected<std::unique_ptr<Tokenizer>> create(const Vocab& vocab);
  std::string token_bytes(TokenId id, bool render_special = false) const override;

 protected:
  void encode_text(std::string_view text, bool after_special, std::vector<TokenId>& out) const override;

 private:
  BpeTokenizer(const Vocab& vocab, PreTokenizer pre);
  int32_t intern(const std::string& text);
  int32_t symbol_id(std::string_view text) const;  // -1 when no merge can involve it
  void encode_word(std::string_view word, std::vector<TokenId>& out) const;

  struct Merge {
    int32_t rank;
    int32_t result;
  };
  PreTokenizer pre_tokenizer_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id)
  std::unordered_map<std::string, int32_t> extra_ids_;  // merge texts that are not tokens
  std::array<int32_t, 256> byte_symbols_{};  // the symbol id of each byte's spelling
};

}  // namespace minfer
