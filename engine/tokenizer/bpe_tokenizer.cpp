// BpeTokenizer (see bpe_tokenizer.h). Priority order is llama.cpp's (rank,
// then leftmost), through the same std::priority_queue, so equal ranks
// resolve the same way.
#include "engine/tokenizer/bpe_tokenizer.h"

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/symbol_merge.h"
#include "engine/tokenizer/vocab.h"

namespace minfer {
namespace {

struct Symbol {
  int prev;
  int next;
  int32_t id;     // symbol id (token id, or an extra id past the vocabulary); -1: none
  size_t offset;  // raw bytes of the word
  size_t size;    // 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  int32_t rank;
  int32_t left_id;  // ids when queued: a changed symbol makes the bigram stale
  int32_t right_id;
  int32_t result;
};

struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> BpeTokenizer::create(const Vocab& vocab) {
  MINFER_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::for_name(vocab.pre));
  if (vocab.merges.empty())
    return unexpected(ErrorCode::kInvalidFile, "byte-level BPE vocabulary without tokenizer.ggml.merges");
  std::unique_ptr<BpeTokenizer> tok(new BpeTokenizer(vocab, std::move(pre)));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

BpeTokenizer::BpeTokenizer(const Vocab& vocab, PreTokenizer pre)
    : Tokenizer(TokenizerKind::kBpe, vocab), pre_tokenizer_(std::move(pre)) {
  finish_init(vocab, pre_tokenizer_.adds_bos_by_default());
  merges_.reserve(vocab.merges.size());
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& m = vocab.merges[rank];
    // llama.cpp splits at the first space after the first byte, so a merge
    // may start with a space.
    const size_t space = m.find(' ', 1);
    if (space == std::string::npos) continue;
    const std::string left = m.substr(0, space);
    const std::string right = m.substr(space + 1);
    const int32_t l = intern(left);
    const int32_t r = intern(right);
    const int32_t result = intern(left + right);
    merges_.try_emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), result});  // first rank wins
  }
  for (int b = 0; b < 256; ++b) {
    byte_symbols_[static_cast<size_t>(b)] = symbol_id(byte_level::encode(std::string(1, static_cast<char>(b))));
  }
}

int32_t BpeTokenizer::intern(const std::string& text) {
  const int32_t id = index_.find(text);
  if (id >= 0) return id;
  auto [it, inserted] = extra_ids_.try_emplace(text, vocab_size() + static_cast<int32_t>(extra_ids_.size()));
  return it->second;
}

int32_t BpeTokenizer::symbol_id(std::string_view text) const {
  const int32_t id = index_.find(text);
  if (id >= 0) return id;
  auto it = extra_ids_.find(std::string(text));
  return it == extra_ids_.end() ? -1 : it->second;
}

void BpeTokenizer::encode_text(std::string_view text, bool /*after_special*/, std::vector<TokenId>& out) const {
  for (const std::string& word : pre_tokenizer_.split(text)) encode_word(word, out);
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<TokenId>& out) const {
  if (pre_tokenizer_.ignore_merges()) {
    const int32_t whole = index_.find(byte_level::encode(word));
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (size_t i = 0; i < word.size(); ++i) {
    const int index = static_cast<int>(i);
    symbols.push_back({index - 1, i + 1 == word.size() ? -1 : index + 1,
                       byte_symbols_[static_cast<uint8_t>(word[i])], i, 1});
  }

  merge_symbols<Bigram, BigramOrder>(
      symbols,
      [&](int left, int right) -> std::optional<Bigram> {
        const int32_t l = symbols[static_cast<size_t>(left)].id;
        const int32_t r = symbols[static_cast<size_t>(right)].id;
        if (l < 0 || r < 0) return std::nullopt;
        auto it = merges_.find(pair_key(l, r));
        if (it == merges_.end()) return std::nullopt;
        return Bigram{left, right, it->second.rank, l, r, it->second.result};
      },
      // Stale when either side has merged with something else since (its id
      // changed); equivalent to llama.cpp's comparison of the texts.
      [](const Bigram& b, const Symbol& left, const Symbol& right) {
        return left.id != b.left_id || right.id != b.right_id;
      },
      [](const Bigram& b, Symbol& left) { left.id = b.result; });

  for (const Symbol& sym : symbols) {
    if (sym.size == 0) continue;
    if (sym.id >= 0 && sym.id < vocab_size()) {
      out.push_back(sym.id);
      continue;
    }
    // Not a token: llama.cpp emits whichever single bytes of its spelling
    // are tokens (for a byte-level vocabulary, every ASCII one).
    for (char c : byte_level::encode(word.substr(sym.offset, sym.size))) {
      const int32_t id = index_.find(std::string_view(&c, 1));
      if (id >= 0) out.push_back(id);
    }
  }
}

std::string BpeTokenizer::token_bytes(TokenId id, bool render_special) const {
  if (!in_range(id)) return std::string(kOutOfRangeBytes);
  const std::string& piece = pieces_[static_cast<size_t>(id)];
  switch (types_[static_cast<size_t>(id)]) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      return render_special ? piece : std::string();
    case TokenType::kUserDefined:
      return piece;  // stored as raw text, not in the byte alphabet
    case TokenType::kNormal:
      return byte_level::decode(piece);
    default:
      return std::string();  // llama.cpp renders other types as nothing
  }
}

}  // namespace minfer
