// WordPiece (`tokenizer.ggml.model = "bert"`), as llama.cpp's
// llm_tokenizer_wpm: text is lower-cased and stripped of accents, split at
// whitespace, punctuation and CJK characters, and each word is covered by the
// longest vocabulary pieces from the left. The GGUF spelling marks a word
// start with '▁' (the converter's rewrite of BERT's "##" continuations); a
// word that cannot be covered becomes [UNK].
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace minfer {

class WpmTokenizer final : public Tokenizer {
 public:
  static Expected<std::unique_ptr<Tokenizer>> create(const Vocab& vocab);
  std::string token_bytes(TokenId id, bool render_special = false) const override;

  // The words BERT's basic tokenizer makes of `text` (exposed for tests).
  static std::vector<std::string> split_words(std::string_view text);

 protected:
  void encode_text(std::string_view text, bool after_special, std::vector<TokenId>& out) const override;

 private:
  explicit WpmTokenizer(const Vocab& vocab);
  size_t max_piece_bytes_ = 0;
};

}  // namespace minfer
