// The generated Unicode tables (unicode_data.cpp, from gen_unicode_data.py).
// Callers use engine/tokenizer/unicode.h; this header only declares the data.
#pragma once

#include <cstddef>
#include <cstdint>

namespace minfer::unicode_data {

struct FlagRange {
  uint32_t first;  // the range runs up to the next entry's `first`
  uint16_t flags;  // unicode::kFlag* bits
};

struct CodepointPair {
  uint32_t from;
  uint32_t to;
};

struct NfdRange {
  uint32_t first;
  uint32_t last;
  uint32_t nfd;  // first code point of the canonical decomposition
};

extern const char kUnicodeVersion[];
extern const FlagRange kFlagRanges[];
extern const size_t kFlagRangeCount;
extern const CodepointPair kLowercase[];
extern const size_t kLowercaseCount;
extern const NfdRange kNfdFirst[];
extern const size_t kNfdFirstCount;

}  // namespace minfer::unicode_data
