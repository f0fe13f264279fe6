// GPT-2 and Llama-3 pre-tokenizer matchers (see split_custom.h). Each loop
// iteration tries the regex's alternatives in order at `pos` and emits one
// piece.
#include "engine/tokenizer/split_custom.h"

#include "engine/tokenizer/unicode.h"

namespace minfer {
namespace {

using unicode::kFlagLetter;
using unicode::kFlagNumber;
using unicode::kFlagWhitespace;

constexpr uint32_t kOutside = 0xFFFFFFFF;

// One piece of the input being split: bounds-checked access and the output.
class Piece {
 public:
  Piece(const std::vector<uint32_t>& cpts, const std::vector<uint16_t>& flags, size_t begin, size_t end,
        std::vector<size_t>& out)
      : cpts_(cpts), flags_(flags), end_(end), last_(begin), out_(out) {}

  size_t end() const { return end_; }
  uint32_t cpt(size_t pos) const { return pos < end_ ? cpts_[pos] : kOutside; }
  uint16_t flags(size_t pos) const { return pos < end_ ? flags_[pos] : 0; }
  bool is(size_t pos, uint16_t mask) const { return (flags(pos) & mask) != 0; }
  // [^\s\p{L}\p{N}]: any code point inside the piece that is none of those.
  bool is_other(size_t pos) const {
    const uint16_t f = flags(pos);
    return f != 0 && (f & (kFlagWhitespace | kFlagLetter | kFlagNumber)) == 0;
  }
  // Emits [last, pos) and returns pos.
  size_t emit(size_t pos) {
    if (pos > last_) out_.push_back(pos - last_);
    last_ = pos;
    return pos;
  }

  // 's|'t|'re|'ve|'m|'ll|'d at pos; returns the length matched (0 if none).
  size_t contraction(size_t pos, bool ignore_case) const {
    if (cpt(pos) != '\'') return 0;
    auto at = [&](size_t p) {
      const uint32_t c = cpt(p);
      return ignore_case && c != kOutside ? unicode::to_lower(c) : c;
    };
    const uint32_t c1 = at(pos + 1);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    const uint32_t c2 = at(pos + 2);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
  }

  size_t skip(size_t pos, uint16_t mask) const {
    while (is(pos, mask)) ++pos;
    return pos;
  }
  size_t skip_other(size_t pos) const {
    while (is_other(pos)) ++pos;
    return pos;
  }

  // \s+(?!\S)|\s+ at pos (pos is whitespace): a run followed by a
  // non-space keeps its last space for the next piece (" word").
  size_t whitespace_run(size_t pos) const {
    const size_t run_end = skip(pos, kFlagWhitespace);
    if (run_end - pos > 1 && run_end < end_) return run_end - 1;
    return run_end;
  }

 private:
  const std::vector<uint32_t>& cpts_;
  const std::vector<uint16_t>& flags_;
  size_t end_;
  size_t last_;
  std::vector<size_t>& out_;
};

template <class Step>
std::vector<size_t> for_each_piece(const std::vector<uint32_t>& cpts, const std::vector<uint16_t>& flags,
                                   const std::vector<size_t>& pieces, Step step) {
  std::vector<size_t> out;
  out.reserve(pieces.size() * 4);
  size_t begin = 0;
  for (size_t len : pieces) {
    Piece piece(cpts, flags, begin, begin + len, out);
    for (size_t pos = begin; pos < piece.end();) pos = piece.emit(step(piece, pos));
    begin += len;
  }
  return out;
}

}  // namespace

std::vector<size_t> split_gpt2(const std::vector<uint32_t>& cpts, const std::vector<uint16_t>& flags,
                               const std::vector<size_t>& pieces) {
  return for_each_piece(cpts, flags, pieces, [](const Piece& p, size_t pos) -> size_t {
    if (size_t n = p.contraction(pos, /*ignore_case=*/false)) return pos + n;
    const size_t body = p.cpt(pos) == ' ' ? pos + 1 : pos;  // the optional leading space
    if (p.is(body, kFlagLetter)) return p.skip(body, kFlagLetter);
    if (p.is(body, kFlagNumber)) return p.skip(body, kFlagNumber);
    if (p.is_other(body)) return p.skip_other(body);
    if (p.is(pos, kFlagWhitespace)) return p.whitespace_run(pos);
    return pos + 1;  // no alternative matches: the code point stands alone
  });
}

std::vector<size_t> split_llama3(const std::vector<uint32_t>& cpts, const std::vector<uint16_t>& flags,
                                 const std::vector<size_t>& pieces, int max_digits) {
  return for_each_piece(cpts, flags, pieces, [max_digits](const Piece& p, size_t pos) -> size_t {
    if (size_t n = p.contraction(pos, /*ignore_case=*/true)) return pos + n;
    const uint32_t c = p.cpt(pos);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (p.is(pos, kFlagLetter)) return p.skip(pos, kFlagLetter);
    if (c != '\r' && c != '\n' && !p.is(pos, kFlagNumber) && p.is(pos + 1, kFlagLetter))
      return p.skip(pos + 1, kFlagLetter);
    // \p{N}{1,max_digits}
    if (p.is(pos, kFlagNumber)) {
      size_t end = pos;
      while (end - pos < static_cast<size_t>(max_digits) && p.is(end, kFlagNumber)) ++end;
      return end;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*
    const size_t body = c == ' ' ? pos + 1 : pos;
    if (p.is_other(body)) {
      size_t end = p.skip_other(body);
      while (p.cpt(end) == '\r' || p.cpt(end) == '\n') ++end;
      return end;
    }
    if (p.is(pos, kFlagWhitespace)) {
      // \s*[\r\n]+ : up to the last line break of the run, if it has one.
      const size_t run_end = p.skip(pos, kFlagWhitespace);
      for (size_t q = run_end; q > pos; --q) {
        if (p.cpt(q - 1) == '\r' || p.cpt(q - 1) == '\n') return q;
      }
      return p.whitespace_run(pos);
    }
    return pos + 1;
  });
}

}  // namespace minfer
