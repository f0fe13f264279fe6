// Tokenizers built from a GGUF file's vocabulary (`tokenizer.ggml.*` keys):
// SentencePiece style (`llama`), byte-level BPE (`gpt2`, with the pre-tokenizer
// chosen by `tokenizer.ggml.pre`) and WordPiece (`bert`).
//
// Encoding follows llama.cpp's llama-vocab.cpp, whose test vectors
// (shared/models/vocab/*.inp/.out) are the spec. Decoding streams: see
// StreamDecoder.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/expected.h"

namespace minfer::gguf {
class File;
}

namespace minfer {

using TokenId = int32_t;

enum class TokenizerKind { kSpm, kBpe, kWordPiece };

// GGUF token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct EncodeOptions {
  bool add_bos = false;       // prepend BOS (callers pass the model's add_bos_token)
  bool parse_special = false; // recognise control/user-defined token text in the input
};

struct SpecialTokens {
  std::optional<TokenId> bos, eos, eot, pad, unk, sep;
  bool add_bos = false;  // tokenizer.ggml.add_bos_token, or the kind's default
  bool add_eos = false;
};

class Tokenizer {
 public:
  static Expected<std::unique_ptr<Tokenizer>> from_gguf(const gguf::File& file);
  virtual ~Tokenizer() = default;

  virtual std::vector<TokenId> encode(std::string_view text, const EncodeOptions& opts) const = 0;

  // The bytes a token stands for when decoded (SPM '▁' → ' ', byte-level BPE
  // unicode → bytes, <0xNN> → the byte). May be part of a UTF-8 sequence.
  // Control tokens decode to "" unless `render_special`.
  virtual std::string token_bytes(TokenId id, bool render_special = false) const = 0;

  // Whole-sequence decode (joins pieces, applies the leading-space rule).
  std::string decode(const std::vector<TokenId>& ids, bool render_special = false) const;

  TokenizerKind kind() const { return kind_; }
  const std::string& pre() const { return pre_; }  // tokenizer.ggml.pre, "default" if absent
  int32_t vocab_size() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(TokenId id) const { return pieces_.at(static_cast<size_t>(id)); }
  TokenType token_type(TokenId id) const { return types_.at(static_cast<size_t>(id)); }
  const SpecialTokens& special() const { return special_; }
  // True for EOS, EOT and other end-of-generation tokens (e.g. <|im_end|>).
  bool is_end_of_generation(TokenId id) const;
  std::optional<TokenId> find_piece(std::string_view piece) const;

 protected:
  TokenizerKind kind_ = TokenizerKind::kSpm;
  std::string pre_ = "default";
  std::vector<std::string> pieces_;
  std::vector<TokenType> types_;
  SpecialTokens special_;
  std::vector<TokenId> end_of_generation_;
};

// Incremental detokenizer for streaming: push token ids, get back only
// complete UTF-8 text. Never emits half a character; byte-fallback pieces
// (<0xE4><0xBD><0xA0>) are joined before they are emitted.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool render_special = false);
  std::string push(TokenId id);
  // Whatever is left at the end (an incomplete sequence becomes U+FFFD).
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool render_special_;
  bool first_ = true;
  std::string pending_;
};

}  // namespace minfer
