// The generated Unicode tables and the UTF-8 helpers, against values read
// off the Unicode Character Database by hand.
#include <gtest/gtest.h>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/unicode.h"

namespace minfer {
namespace {

using namespace unicode;

TEST(UnicodeFlags, CategoriesAndWhitespace) {
  EXPECT_EQ(flags('A'), kFlagLetter);
  EXPECT_EQ(flags('7'), kFlagNumber);
  EXPECT_EQ(flags('!'), kFlagPunctuation);
  EXPECT_EQ(flags('$'), kFlagSymbol);
  EXPECT_EQ(flags('~'), kFlagSymbol);
  EXPECT_EQ(flags(' '), kFlagSeparator | kFlagWhitespace);
  EXPECT_EQ(flags('\n'), kFlagControl | kFlagWhitespace);
  EXPECT_EQ(flags(0x1C), kFlagControl);  // not White_Space, though Python's isspace() says so
  EXPECT_EQ(flags(0x85), kFlagControl | kFlagWhitespace);
  EXPECT_EQ(flags(0xA0), kFlagSeparator | kFlagWhitespace);
  EXPECT_EQ(flags(0x3000), kFlagSeparator | kFlagWhitespace);
  EXPECT_EQ(flags(0xE9), kFlagLetter);      // é
  EXPECT_EQ(flags(0x301), kFlagMark);       // combining acute
  EXPECT_EQ(flags(0x663), kFlagNumber);     // Arabic-Indic three
  EXPECT_EQ(flags(0x4E2D), kFlagLetter);    // 中
  EXPECT_EQ(flags(0x20000), kFlagLetter);   // CJK extension B
  EXPECT_EQ(flags(0x1F600), kFlagSymbol);   // 😀
  EXPECT_EQ(flags(0x200D), kFlagControl);   // ZWJ is Cf
  EXPECT_EQ(flags(0xE000), kFlagControl);   // private use
  EXPECT_EQ(flags(0x378), kFlagUndefined);  // unassigned: not zero
  EXPECT_EQ(flags(0x110000), 0);            // beyond Unicode
}

TEST(UnicodeCase, SimpleLowerCase) {
  EXPECT_EQ(to_lower('A'), 'a');
  EXPECT_EQ(to_lower('a'), 'a');
  EXPECT_EQ(to_lower('1'), '1');
  EXPECT_EQ(to_lower(0x3A3), 0x3C3u);   // Σ → σ
  EXPECT_EQ(to_lower(0x130), 0x69u);    // İ → i (simple mapping)
  EXPECT_EQ(to_lower(0x1E9E), 0xDFu);   // ẞ → ß
  EXPECT_EQ(to_lower(0x10400), 0x10428u);  // Deseret, astral
}

TEST(UnicodeNfd, FirstCodePointOfTheDecomposition) {
  EXPECT_EQ(nfd_first(0xE9), uint32_t{'e'});     // é
  EXPECT_EQ(nfd_first(0x1E09), uint32_t{'c'});   // ḉ = c + cedilla + acute
  EXPECT_EQ(nfd_first(0xAC00), 0x1100u);         // 가 → choseong kiyeok
  EXPECT_EQ(nfd_first('a'), uint32_t{'a'});
  EXPECT_EQ(nfd_first(0x4E2D), 0x4E2Du);
}

TEST(Utf8, LenientDecodingAsLlamaCpp) {
  EXPECT_EQ(decode_lenient("a\xC3\xA9"), (std::vector<uint32_t>{'a', 0xE9}));
  EXPECT_EQ(decode_lenient("\xF0\x9F\x98\x80"), (std::vector<uint32_t>{0x1F600}));
  EXPECT_EQ(decode_lenient("\xFF"), (std::vector<uint32_t>{kReplacement}));
  // A cut sequence: each byte becomes U+FFFD on its own.
  EXPECT_EQ(decode_lenient("\xE4\xBD"), (std::vector<uint32_t>{kReplacement, kReplacement}));
  // Overlong forms are not checked (llama.cpp does not either).
  EXPECT_EQ(decode_lenient("\xC0\xAF"), (std::vector<uint32_t>{'/'}));
}

TEST(Utf8, StrictChecks) {
  EXPECT_TRUE(is_valid_utf8("h\xC3\xA9llo \xE4\xBD\xA0 \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));              // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));          // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));      // above U+10FFFF
  EXPECT_EQ(valid_utf8_prefix("abc\xE4\xBD"), 3u);
  EXPECT_EQ(incomplete_utf8_suffix("abc\xE4\xBD"), 2u);
  EXPECT_EQ(incomplete_utf8_suffix("abc\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_suffix("abc\xE4\xBD\xA0"), 0u);  // complete
  EXPECT_EQ(incomplete_utf8_suffix("abc\xE4" "A"), 0u);      // broken, not incomplete
  EXPECT_EQ(incomplete_utf8_suffix("\xED\xA0"), 0u);         // would be a surrogate
  EXPECT_EQ(sanitize_utf8("a\xFF" "b\xC0\xAF"), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(ByteLevel, Gpt2Alphabet) {
  EXPECT_EQ(byte_level::byte_to_codepoint(' '), 0x120u);  // Ġ
  EXPECT_EQ(byte_level::byte_to_codepoint('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(byte_level::byte_to_codepoint(0), 0x100u);
  EXPECT_EQ(byte_level::byte_to_codepoint('A'), uint32_t{'A'});
  EXPECT_EQ(byte_level::byte_to_codepoint(0xAD), 0x143u);  // the last one remapped
  EXPECT_EQ(byte_level::codepoint_to_byte(0x144), -1);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(byte_level::decode(byte_level::encode(all)), all);
  EXPECT_EQ(byte_level::encode(" hi"), "\xC4\xA0hi");
}

}  // namespace
}  // namespace minfer
