// SpmTokenizer (see spm_tokenizer.h). The merge loop is llama.cpp's,
// including its priority order (score, then leftmost) and its staleness test
// (a queued bigram is stale when its symbols' total length changed), so
// ties resolve exactly as there.
#include "engine/tokenizer/spm_tokenizer.h"

#include <fmt/format.h>

#include "engine/tokenizer/symbol_merge.h"
#include "engine/tokenizer/unicode.h"
#include "engine/tokenizer/vocab.h"

namespace minfer {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 '▁'

struct Symbol {
  int prev;
  int next;
  size_t offset;  // into the escaped text
  size_t size;    // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t size;
};

struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string spm_piece_bytes(std::string_view piece, TokenType type, bool render_special) {
  switch (type) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      return render_special ? std::string(piece) : std::string();
    case TokenType::kUserDefined:
      return std::string(piece);
    case TokenType::kNormal: {
      std::string out;
      out.reserve(piece.size());
      for (size_t i = 0; i < piece.size();) {
        if (piece.compare(i, kSpace.size(), kSpace) == 0) {
          out.push_back(' ');
          i += kSpace.size();
        } else {
          out.push_back(piece[i++]);
        }
      }
      return out;
    }
    case TokenType::kByte: {
      // "<0xNN>"
      if (piece.size() == 6 && piece.substr(0, 3) == "<0x" && piece[5] == '>') {
        const int hi = hex_digit(piece[3]), lo = hex_digit(piece[4]);
        if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
      }
      return std::string();
    }
    case TokenType::kUnused:
    case TokenType::kUndefined:
      return std::string();  // llama.cpp renders these as nothing
  }
  return std::string();
}

Expected<std::unique_ptr<Tokenizer>> SpmTokenizer::create(const Vocab& vocab) {
  std::unique_ptr<SpmTokenizer> tok(new SpmTokenizer(vocab));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

SpmTokenizer::SpmTokenizer(const Vocab& vocab) : Tokenizer(TokenizerKind::kSpm, vocab) {
  scores_ = vocab.scores;
  scores_.resize(pieces_.size(), 0.0f);
  add_space_prefix_ = vocab.add_space_prefix.value_or(true);
  strip_leading_space_ = add_space_prefix_;
  finish_init(vocab);
  for (int b = 0; b < 256; ++b) {
    int32_t id = index_.find(fmt::format("<0x{:02X}>", b));
    if (id < 0) id = index_.find(std::string(1, static_cast<char>(b)));
    byte_tokens_[static_cast<size_t>(b)] = id >= 0 ? id : special_.unk.value_or(-1);
  }
}

void SpmTokenizer::encode_text(std::string_view text, bool after_special, std::vector<TokenId>& out) const {
  std::string s;
  s.reserve(text.size() * 2 + kSpace.size());
  if (add_space_prefix_ && after_special) s += kSpace;
  for (char c : text) {
    if (c == ' ') {
      s += kSpace;
    } else {
      s.push_back(c);
    }
  }
  if (s.empty()) return;

  std::vector<Symbol> symbols;
  symbols.reserve(s.size());
  for (size_t off = 0; off < s.size();) {
    const size_t n = std::min(unicode::utf8_len(static_cast<uint8_t>(s[off])), s.size() - off);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, off + n == s.size() ? -1 : index + 1, off, n});
    off += n;
  }

  merge_symbols<Bigram, BigramOrder>(
      symbols,
      [&](int left, int right) -> std::optional<Bigram> {
        const size_t size = symbols[static_cast<size_t>(left)].size + symbols[static_cast<size_t>(right)].size;
        const int32_t id = index_.find(std::string_view(s).substr(symbols[static_cast<size_t>(left)].offset, size));
        if (id < 0) return std::nullopt;
        return Bigram{left, right, scores_[static_cast<size_t>(id)], size};
      },
      // llama.cpp's staleness test: the pair's total length changed.
      [](const Bigram& b, const Symbol& left, const Symbol& right) { return left.size + right.size != b.size; },
      [](const Bigram&, Symbol&) {});

  for (int i = 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& sym = symbols[static_cast<size_t>(i)];
    const std::string_view piece = std::string_view(s).substr(sym.offset, sym.size);
    const int32_t id = index_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const TokenId byte_id = byte_tokens_[static_cast<uint8_t>(c)];
      if (byte_id >= 0) out.push_back(byte_id);
    }
  }
}

std::string SpmTokenizer::token_bytes(TokenId id, bool render_special) const {
  if (!in_range(id)) return std::string(kOutOfRangeBytes);
  return spm_piece_bytes(pieces_[static_cast<size_t>(id)], types_[static_cast<size_t>(id)], render_special);
}

}  // namespace minfer
