// Code points for the tokenizers: UTF-8 decoding the way llama.cpp does it
// (lenient: a bad byte becomes U+FFFD), strict UTF-8 checks for output,
// and the category flags / lower case / NFD tables generated from Unicode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::unicode {

// Category flags (one general-category group each) plus White_Space.
inline constexpr uint16_t kFlagUndefined = 0x0001;    // Cn: unassigned
inline constexpr uint16_t kFlagNumber = 0x0002;       // \p{N}
inline constexpr uint16_t kFlagLetter = 0x0004;       // \p{L}
inline constexpr uint16_t kFlagSeparator = 0x0008;    // \p{Z}
inline constexpr uint16_t kFlagMark = 0x0010;         // \p{M}
inline constexpr uint16_t kFlagPunctuation = 0x0020;  // \p{P}
inline constexpr uint16_t kFlagSymbol = 0x0040;       // \p{S}
inline constexpr uint16_t kFlagControl = 0x0080;      // \p{C} (Cc Cf Co Cs)
inline constexpr uint16_t kFlagWhitespace = 0x0100;   // \s (PropList White_Space)

inline constexpr uint32_t kReplacement = 0xFFFD;
inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// Flags of a code point; 0 above U+10FFFF.
uint16_t flags(uint32_t cpt);
inline bool is_whitespace(uint32_t cpt) { return (flags(cpt) & kFlagWhitespace) != 0; }
// Simple (one-to-one) lower case; the code point itself when it has none.
uint32_t to_lower(uint32_t cpt);
// First code point of the canonical decomposition (é → e).
uint32_t nfd_first(uint32_t cpt);
const char* version();  // Unicode version of the tables

// Number of bytes a sequence starting with `lead` claims (1 for a stray
// continuation byte), as llama.cpp's unicode_len_utf8.
inline size_t utf8_len(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

// Decodes one code point at `*offset` and advances it. Lenient like
// llama.cpp: structure is checked (lead byte, continuation bytes) but not
// overlong forms; a malformed sequence yields U+FFFD and consumes one byte.
uint32_t decode_one_lenient(std::string_view text, size_t* offset);
std::vector<uint32_t> decode_lenient(std::string_view text);

// Appends the UTF-8 form; code points above U+10FFFF append U+FFFD.
void append_utf8(std::string& out, uint32_t cpt);

// Length of the longest prefix of `bytes` made of complete, well-formed UTF-8
// (no overlongs, surrogates or values above U+10FFFF).
size_t valid_utf8_prefix(std::string_view bytes);
// How many of the trailing bytes form the start of a well-formed sequence
// that more bytes could complete (0..3).
size_t incomplete_utf8_suffix(std::string_view bytes);
bool is_valid_utf8(std::string_view bytes);
// Replaces every malformed byte with U+FFFD (one per byte, as decoders do).
std::string sanitize_utf8(std::string_view bytes);

}  // namespace minfer::unicode
