// SentencePiece-style tokenizer (`tokenizer.ggml.model = "llama"`), as
// llama.cpp's llm_tokenizer_spm: spaces become '▁' (with one prepended at
// the start and after a special token), then adjacent symbols merge
// greedily by the score of the piece they form; what never forms a piece
// falls back to <0xNN> byte tokens.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace minfer {

class SpmTokenizer final : public Tokenizer {
 public:
  static Expected<std::unique_ptr<Tokenizer>> create(const Vocab& vocab);
  std::string token_bytes(TokenId id, bool render_special = false) const override;

 protected:
  void encode_text(std::string_view text, bool after_special, std::vector<TokenId>& out) const override;

 private:
  explicit SpmTokenizer(const Vocab& vocab);

  std::vector<float> scores_;
  bool add_space_prefix_ = true;
  std::array<TokenId, 256> byte_tokens_{};  // <0xNN>, else the byte as a piece, else UNK (-1: none)
};

// The bytes of a SentencePiece-style piece ('▁' → ' ', <0xNN> → the byte),
// shared with WordPiece whose GGUF pieces use the same spelling.
std::string spm_piece_bytes(std::string_view piece, TokenType type, bool render_special);

}  // namespace minfer
