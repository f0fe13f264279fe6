// Tokenizers built from a GGUF file's vocabulary (`tokenizer.ggml.*` keys):
// SentencePiece style (`llama`), byte-level BPE (`gpt2`, with the pre-tokenizer
// chosen by `tokenizer.ggml.pre`) and WordPiece (`bert`).
//
// Encoding follows llama.cpp's llama-vocab.cpp, whose test vectors
// (tests/data/vocab/*.inp/.out) are the spec. Decoding streams: see
// StreamDecoder.
//
// Layout: tokenizer.cpp (this class: specials, BOS/EOS, decode),
// special_tokens.cpp (ids, end-of-generation set, token attributes),
// special_partition.cpp (special tokens written in the text),
// spm_tokenizer.cpp / bpe_tokenizer.cpp / wpm_tokenizer.cpp (the algorithms),
// pre_tokenizer.cpp + split_*.cpp (BPE word splits), unicode*.cpp (tables),
// vocab_gguf.cpp (GGUF keys), stream_decoder.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/expected.h"
#include "engine/tokenizer/piece_index.h"
#include "engine/tokenizer/special_partition.h"

namespace minfer::gguf {
class File;
}

namespace minfer {

struct Vocab;
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
  bool add_bos = false;        // prepend BOS (callers pass special().add_bos); WordPiece: [CLS]
  bool add_eos = false;        // append EOS (callers pass special().add_eos); WordPiece: [SEP]
  bool parse_special = false;  // recognise control token text in the input (user-defined
                               // tokens are always recognised, as in llama.cpp)
};

struct SpecialTokens {
  std::optional<TokenId> bos, eos, eot, pad, unk, sep;
  bool add_bos = false;  // tokenizer.ggml.add_bos_token, or the kind's default
  bool add_eos = false;
};

class Tokenizer {
 public:
  static Expected<std::unique_ptr<Tokenizer>> from_gguf(const gguf::File& file);
  static Expected<std::unique_ptr<Tokenizer>> from_vocab(const Vocab& vocab);
  virtual ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& opts) const;

  // The bytes a token stands for when decoded (SPM '▁' → ' ', byte-level BPE
  // unicode → bytes, <0xNN> → the byte). May be part of a UTF-8 sequence.
  // Control and unknown tokens decode to "" unless `render_special`; an id
  // outside the vocabulary decodes to U+FFFD (visible, never a crash).
  virtual std::string token_bytes(TokenId id, bool render_special = false) const = 0;

  // Whole-sequence decode: the pieces joined, minus the leading space the
  // encoder adds (SPM, WordPiece) on the first non-empty piece. Raw bytes: not
  // necessarily valid UTF-8 when the ids end inside a character.
  std::string decode(const std::vector<TokenId>& ids, bool render_special = false) const;

  TokenizerKind kind() const { return kind_; }
  const std::string& pre() const { return pre_; }  // tokenizer.ggml.pre, "default" if absent
  int32_t vocab_size() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(TokenId id) const { return pieces_.at(static_cast<size_t>(id)); }
  TokenType token_type(TokenId id) const { return types_.at(static_cast<size_t>(id)); }
  const SpecialTokens& special() const { return special_; }
  // True for EOS, EOT and other end-of-generation tokens (e.g. <|im_end|>),
  // the set llama.cpp calls special_eog_ids.
  bool is_end_of_generation(TokenId id) const;
  const std::vector<TokenId>& end_of_generation_ids() const { return end_of_generation_; }
  std::optional<TokenId> find_piece(std::string_view piece) const;
  // Whether decoding drops one leading space at the start (the encoder's
  // "▁" prefix of SPM and WordPiece).
  bool strips_leading_space() const { return strip_leading_space_; }

 protected:
  Tokenizer(TokenizerKind kind, const Vocab& vocab);
  // Tokenizes one run of plain text (no special tokens inside);
  // `after_special` is true at the start of the input and after a special
  // token (SPM adds its space prefix there).
  virtual void encode_text(std::string_view text, bool after_special, std::vector<TokenId>& out) const = 0;
  // Shared completion of a kind's constructor: special tokens, the types
  // after llama.cpp's fix-ups, the partitioner.
  void finish_init(const Vocab& vocab, bool pre_adds_bos = false);
  bool in_range(TokenId id) const { return id >= 0 && id < vocab_size(); }
  static constexpr std::string_view kOutOfRangeBytes = "\xEF\xBF\xBD";  // U+FFFD

  TokenizerKind kind_ = TokenizerKind::kSpm;
  std::string pre_ = "default";
  std::vector<std::string> pieces_;
  std::vector<TokenType> types_;
  SpecialTokens special_;
  std::vector<TokenId> end_of_generation_;  // sorted
  PieceIndex index_;
  bool strip_leading_space_ = false;

 private:
  SpecialPartitioner partitioner_;
};

// Incremental detokenizer for streaming: push token ids, get back only
// complete UTF-8 text. Never emits half a character; byte-fallback pieces
// (<0xE4><0xBD><0xA0>) are joined before they are emitted. Bytes that can
// never form a character become U+FFFD, so every chunk is valid UTF-8, and
// for ids that decode to valid UTF-8 the chunks add up to decode().
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
