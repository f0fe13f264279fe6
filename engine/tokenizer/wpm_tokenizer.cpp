// WpmTokenizer (see wpm_tokenizer.h).
#include "engine/tokenizer/wpm_tokenizer.h"

#include <algorithm>

#include "engine/tokenizer/spm_tokenizer.h"
#include "engine/tokenizer/unicode.h"
#include "engine/tokenizer/vocab.h"

namespace minfer {
namespace {

// BERT's _is_chinese_char ranges, including its 0x2B920 start (HF's Rust
// code has it; the Unicode block starts at 0x2B820), as llama.cpp copies it.
bool is_chinese_char(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> WpmTokenizer::create(const Vocab& vocab) {
  std::unique_ptr<WpmTokenizer> tok(new WpmTokenizer(vocab));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

WpmTokenizer::WpmTokenizer(const Vocab& vocab) : Tokenizer(TokenizerKind::kWordPiece, vocab) {
  strip_leading_space_ = true;
  finish_init(vocab);
  for (const std::string& p : pieces_) max_piece_bytes_ = std::max(max_piece_bytes_, p.size());
}

std::vector<std::string> WpmTokenizer::split_words(std::string_view text) {
  std::vector<std::string> words(1);
  for (uint32_t cpt : unicode::decode_lenient(text)) {
    cpt = unicode::nfd_first(cpt);
    const uint16_t f = unicode::flags(cpt);
    if (f & unicode::kFlagWhitespace) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (cpt == 0 || cpt == unicode::kReplacement || (f & unicode::kFlagControl)) continue;
    std::string s;
    unicode::append_utf8(s, unicode::to_lower(cpt));
    if ((f & unicode::kFlagPunctuation) || (cpt < 0x7F && (f & unicode::kFlagSymbol)) || is_chinese_char(cpt)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = std::move(s);  // a word of its own
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

void WpmTokenizer::encode_text(std::string_view text, bool /*after_special*/, std::vector<TokenId>& out) const {
  for (const std::string& word : split_words(text)) {
    const std::string w = "\xE2\x96\x81" + word;  // the word-start mark
    const size_t n = w.size();
    const size_t start_size = out.size();
    for (size_t i = 0; i < n; ++i) {
      bool matched = false;
      for (size_t j = std::min(n, i + max_piece_bytes_ + 1); j > i; --j) {
        const int32_t id = index_.find(std::string_view(w).substr(i, j - i));
        if (id >= 0) {
          out.push_back(id);
          matched = true;
          i = j - 1;
          break;
        }
      }
      if (!matched) {  // the word cannot be covered: drop what it produced
        out.resize(start_size);
        break;
      }
    }
    if (out.size() == start_size && special_.unk) out.push_back(*special_.unk);
  }
}

std::string WpmTokenizer::token_bytes(TokenId id, bool render_special) const {
  if (!in_range(id)) return std::string(kOutOfRangeBytes);
  return spm_piece_bytes(pieces_[static_cast<size_t>(id)], types_[static_cast<size_t>(id)], render_special);
}

}  // namespace minfer
