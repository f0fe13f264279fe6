// A small regex engine for the pre-tokenizer splits that have no hand-written
// matcher (deepseek, falcon, starcoder and default pipelines).
//
// It supports exactly what those patterns use: literals, classes with ranges
// and negation, \s \S \p{L} \p{N} \p{P} \p{S} \p{M}, groups (?:...) and (...),
// alternation, the greedy quantifiers ? * + {n} {n,m} {n,}, `$` (end of the
// piece) and negative look-ahead of one class, (?!\S). Anything else is an
// error at compile time, so a new pattern cannot be half-understood.
//
// Semantics are those of std::regex ECMAScript as llama.cpp's
// unicode_regex_split uses it: leftmost match, alternatives tried in order,
// greedy backtracking, each piece matched as an independent string. The
// matcher is a backtracking VM with a visited bitmap (RE2's "BitState"), so a
// state (instruction, position) is explored at most once per piece and no
// input can make it quadratic (llama.cpp's "\s+$" over a long run of spaces
// would be with std::regex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/expected.h"

namespace minfer {

class SplitRegex {
 public:
  static Expected<SplitRegex> compile(std::string_view pattern);

  // `cpts`/`flags` hold the whole text (flags from unicode::flags). `pieces`
  // are lengths, in code points, of consecutive pieces covering the text;
  // each piece is split into its matches and the runs between matches (which
  // stay pieces of their own, as llama.cpp keeps them).
  std::vector<size_t> split(const std::vector<uint32_t>& cpts, const std::vector<uint16_t>& flags,
                            const std::vector<size_t>& pieces) const;

  const std::string& pattern() const { return pattern_; }

  struct CharClass {
    bool negated = false;
    uint16_t flag_mask = 0;  // unicode::kFlag* bits that are members
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive
    bool matches(uint32_t cpt, uint16_t flags) const;
  };
  enum class Op : uint8_t { kClass, kSplit, kJmp, kMatch, kAssertEnd, kNotFollowedBy };
  struct Inst {
    Op op;
    uint32_t x = 0;  // class index, or the preferred jump target
    uint32_t y = 0;  // kSplit: the other target
  };

 private:
  // End of the match starting at `start` within [start, end), or -1.
  long match_at(const std::vector<uint32_t>& cpts, const std::vector<uint16_t>& flags, size_t begin, size_t start,
                size_t end, std::vector<uint64_t>& visited) const;

  std::string pattern_;
  std::vector<CharClass> classes_;
  std::vector<Inst> program_;
};

}  // namespace minfer
