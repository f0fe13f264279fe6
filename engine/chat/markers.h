// Helpers of the reply parsers that look for markers in streamed text
// (tool_calls.cpp, reasoning.cpp).
#pragma once

#include <algorithm>
#include <string_view>

namespace minfer {

// How many bytes at the end of `s` could begin `word` (a proper prefix of
// it): what a parser holds back until the next piece tells.
inline size_t partial_suffix(std::string_view s, std::string_view word) {
  for (size_t k = std::min(s.size(), word.size() - 1); k > 0; --k) {
    if (s.substr(s.size() - k) == word.substr(0, k)) return k;
  }
  return 0;
}

}  // namespace minfer
