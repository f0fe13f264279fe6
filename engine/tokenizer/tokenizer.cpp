// Tokenizer: what every kind shares. Construction (vocabulary, special
// tokens), the special-token partition and BOS/EOS around the kind's own
// encode_text, and whole-sequence decode.
#include "engine/tokenizer/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/special_tokens.h"
#include "engine/tokenizer/spm_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "engine/tokenizer/wpm_tokenizer.h"
#include "platform/log.h"

namespace minfer {

Expected<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const gguf::File& file) {
  MINFER_ASSIGN_OR_RETURN(Vocab vocab, read_vocab(file));
  auto tok = from_vocab(vocab);
  if (!tok) {
    return unexpected(tok.error().code, fmt::format("{}: {}", file.path(), tok.error().message));
  }
  return tok;
}

Expected<std::unique_ptr<Tokenizer>> Tokenizer::from_vocab(const Vocab& vocab) {
  if (vocab.tokens.empty()) return unexpected(ErrorCode::kInvalidFile, "tokenizer.ggml.tokens is empty");
  if (!vocab.scores.empty() && vocab.scores.size() != vocab.tokens.size())
    return unexpected(ErrorCode::kInvalidFile, fmt::format("{} scores for {} tokens", vocab.scores.size(),
                                                           vocab.tokens.size()));
  if (!vocab.types.empty() && vocab.types.size() != vocab.tokens.size())
    return unexpected(ErrorCode::kInvalidFile, fmt::format("{} token types for {} tokens", vocab.types.size(),
                                                           vocab.tokens.size()));
  if (vocab.tokens.size() > static_cast<size_t>(INT32_MAX))
    return unexpected(ErrorCode::kOutOfRange, fmt::format("{} tokens do not fit token ids", vocab.tokens.size()));
  if (vocab.model == "llama") return SpmTokenizer::create(vocab);
  if (vocab.model == "gpt2") return BpeTokenizer::create(vocab);
  if (vocab.model == "bert") return WpmTokenizer::create(vocab);
  return unexpected(ErrorCode::kUnsupported,
                    fmt::format("tokenizer.ggml.model '{}' is not supported; supported: llama (SentencePiece), gpt2 "
                                "(byte-level BPE), bert (WordPiece)",
                                vocab.model));
}

Tokenizer::Tokenizer(TokenizerKind kind, const Vocab& vocab) : kind_(kind) {
  if (!vocab.pre.empty()) pre_ = vocab.pre;
  pieces_ = vocab.tokens;
  for (size_t i = 0; i < pieces_.size(); ++i) {
    if (pieces_[i].empty()) {
      // llama.cpp renames empty pieces so that every text maps to one id.
      log::warn("tokenizer: empty token at index {}", i);
      pieces_[i] = fmt::format("[EMPTY_{}]", i);
    }
  }
  types_.assign(pieces_.size(), TokenType::kNormal);
  for (size_t i = 0; i < vocab.types.size(); ++i) {
    const auto t = static_cast<int32_t>(vocab.types[i]);
    types_[i] = (t >= 0 && t <= static_cast<int32_t>(TokenType::kByte)) ? vocab.types[i] : TokenType::kUndefined;
  }
  index_.build(pieces_);
}

Tokenizer::~Tokenizer() = default;

void Tokenizer::finish_init(const Vocab& vocab, bool pre_adds_bos) {
  SpecialSetup setup = resolve_special_tokens(kind_, vocab, pieces_, std::move(types_), index_, pre_adds_bos);
  special_ = setup.special;
  end_of_generation_ = std::move(setup.end_of_generation);
  types_ = std::move(setup.types);
  partitioner_.build(std::move(setup.partition));
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, const EncodeOptions& opts) const {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  if (opts.add_bos && special_.bos) out.push_back(*special_.bos);
  bool after_special = true;
  for (const auto& f : partitioner_.partition(text, opts.parse_special)) {
    if (f.is_token) {
      out.push_back(f.id);
      after_special = true;
    } else {
      encode_text(text.substr(f.offset, f.length), after_special, out);
      after_special = false;
    }
  }
  if (opts.add_eos) {
    const std::optional<TokenId>& end = kind_ == TokenizerKind::kWordPiece ? special_.sep : special_.eos;
    if (end) out.push_back(*end);
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool render_special) const {
  std::string out;
  bool strip = strip_leading_space_;
  for (TokenId id : ids) {
    std::string piece = token_bytes(id, render_special);
    if (strip && !piece.empty()) {
      if (piece[0] == ' ') piece.erase(0, 1);
      strip = false;
    }
    out += piece;
  }
  return out;
}

bool Tokenizer::is_end_of_generation(TokenId id) const {
  return std::binary_search(end_of_generation_.begin(), end_of_generation_.end(), id);
}

std::optional<TokenId> Tokenizer::find_piece(std::string_view piece) const {
  const int32_t id = index_.find(piece);
  if (id < 0) return std::nullopt;
  return id;
}

}  // namespace minfer
