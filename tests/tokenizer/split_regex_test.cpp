// SplitRegex: the constructs it accepts and refuses, its splits, the
// agreement of the hand-written GPT-2/Llama-3/Qwen2 matchers with the regexes
// they replace (on random text), and linear time where std::regex is not.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/split_custom.h"
#include "engine/tokenizer/split_regex.h"
#include "engine/tokenizer/unicode.h"

namespace minfer {
namespace {

struct Text {
  std::vector<uint32_t> cpts;
  std::vector<uint16_t> flags;
  explicit Text(std::string_view utf8) : cpts(unicode::decode_lenient(utf8)) {
    for (uint32_t c : cpts) flags.push_back(unicode::flags(c));
  }
  std::vector<std::string> pieces(const std::vector<size_t>& lens) const {
    std::vector<std::string> out;
    size_t b = 0;
    for (size_t n : lens) {
      std::string s;
      for (size_t i = b; i < b + n; ++i) unicode::append_utf8(s, cpts[i]);
      out.push_back(s);
      b += n;
    }
    return out;
  }
};

std::vector<std::string> split(std::string_view pattern, std::string_view text) {
  auto re = SplitRegex::compile(pattern);
  EXPECT_TRUE(re) << re.error().message;
  if (!re) return {};
  Text t(text);
  return t.pieces(re->split(t.cpts, t.flags, {t.cpts.size()}));
}

using Pieces = std::vector<std::string>;

TEST(SplitRegex, MatchesAndGapsBecomePieces) {
  EXPECT_EQ(split("\\p{N}+", "ab12cd345"), (Pieces{"ab", "12", "cd", "345"}));
  EXPECT_EQ(split("[0-9][0-9][0-9]", "12345678"), (Pieces{"123", "456", "78"}));
  EXPECT_EQ(split("\\s+$", "a  b  "), (Pieces{"a  b", "  "}));
  EXPECT_EQ(split("\\s?\\p{L}+", "hi there, \xC3\xA9t\xC3\xA9!"), (Pieces{"hi", " there", ",", " \xC3\xA9t\xC3\xA9", "!"}));
  EXPECT_EQ(split("[\\p{P}\\$\\+<=>\\^~\\|]+", "a+=b...c"), (Pieces{"a", "+=", "b", "...", "c"}));
  EXPECT_EQ(split("\\s+(?!\\S)|\\s+", "a   b"), (Pieces{"a", "  ", " ", "b"}));
  EXPECT_EQ(split("'s|'t", "it's"), (Pieces{"it", "'s"}));
  EXPECT_EQ(split("\\p{N}{1,3}", "1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(split("[\xE4\xB8\x80-\xE9\xBE\xA5]+", "ab\xE4\xB8\xAD\xE6\x96\x87" "cd"),
            (Pieces{"ab", "\xE4\xB8\xAD\xE6\x96\x87", "cd"}));
}

TEST(SplitRegex, RefusesWhatItDoesNotImplement) {
  for (std::string_view bad : {"(?i:a)", "a*", "x|", "[a-", "\\p{Xx}", "a+?", ".", "^a", "(a", "\\w", "(?=a)"}) {
    auto re = SplitRegex::compile(bad);
    ASSERT_FALSE(re) << bad;
    EXPECT_NE(re.error().message.find("split regex"), std::string::npos) << re.error().message;
  }
}

TEST(SplitRegex, LinearOnLongWhitespaceRuns) {
  // "\s+$" over a long run that is not at the end: a backtracking matcher
  // without memo takes quadratic time here.
  const std::string text = std::string(200000, ' ') + "x";
  const auto start = std::chrono::steady_clock::now();
  const Pieces got = split("\\s+$", text);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(got, (Pieces{text}));
  EXPECT_LT(ms, 1000.0) << "took " << ms << " ms";
}

// Random text rich in what the regexes distinguish.
std::string random_text(std::mt19937& rng, size_t n) {
  static const std::vector<uint32_t> alphabet = {
      'a', 'b', 'Z', 's', 't', 'd', 'm', 'l', 'r', 'e', 'v', 'S', 'T', 'L', 'E', '\'', '\'', ' ', ' ', ' ', ' ',
      '\t', '\n', '\r', '0', '7', '9', '.', ',', '!', '$', '+', '(', ')', '-', '_', '"', 0xA0, 0x3000, 0x2003,
      0xE9, 0xDF, 0x3A3, 0x663, 0x2167, 0x301, 0x4E2D, 0x6587, 0xAC00, 0x1F600, 0x1F44B, 0x200D, 0x378,
      0xFF01, 0x2018, 0x85, 0x1C};
  std::string s;
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  for (size_t i = 0; i < n; ++i) unicode::append_utf8(s, alphabet[pick(rng)]);
  return s;
}

TEST(SplitCustom, AgreesWithTheRegexesItReplaces) {
  auto gpt2 = SplitRegex::compile(kGpt2SplitRegex);
  auto llama3 = SplitRegex::compile(kLlama3SplitRegex);
  auto qwen2 = SplitRegex::compile(kQwen2SplitRegex);
  ASSERT_TRUE(gpt2 && llama3 && qwen2);
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 3000; ++iter) {
    const std::string s = random_text(rng, 1 + rng() % 40);
    Text t(s);
    const std::vector<size_t> whole{t.cpts.size()};
    ASSERT_EQ(split_gpt2(t.cpts, t.flags, whole), gpt2->split(t.cpts, t.flags, whole)) << "gpt2 on '" << s << "'";
    ASSERT_EQ(split_llama3(t.cpts, t.flags, whole, 3), llama3->split(t.cpts, t.flags, whole))
        << "llama3 on '" << s << "'";
    ASSERT_EQ(split_llama3(t.cpts, t.flags, whole, 1), qwen2->split(t.cpts, t.flags, whole))
        << "qwen2 on '" << s << "'";
  }
}

TEST(SplitCustom, KnownSplits) {
  Text t("Hello world's  12345 \xE4\xBD\xA0\xE5\xA5\xBD!!\n\n  x");
  const std::vector<size_t> whole{t.cpts.size()};
  EXPECT_EQ(t.pieces(split_gpt2(t.cpts, t.flags, whole)),
            (Pieces{"Hello", " world", "'s", " ", " 12345", " \xE4\xBD\xA0\xE5\xA5\xBD", "!!", "\n\n ", " x"}));
  EXPECT_EQ(t.pieces(split_llama3(t.cpts, t.flags, whole, 3)),
            (Pieces{"Hello", " world", "'s", " ", " ", "123", "45", " \xE4\xBD\xA0\xE5\xA5\xBD", "!!\n\n", " ", " x"}));
  EXPECT_EQ(t.pieces(split_llama3(t.cpts, t.flags, whole, 1)),
            (Pieces{"Hello", " world", "'s", " ", " ", "1", "2", "3", "4", "5", " \xE4\xBD\xA0\xE5\xA5\xBD", "!!\n\n",
                    " ", " x"}));
}

TEST(PreTokenizer, NamesAndPipelines) {
  auto unknown = PreTokenizer::for_name("no-such-pre");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(unknown.error().message.find("no-such-pre"), std::string::npos);

  auto llama3 = PreTokenizer::for_name("llama-bpe");
  ASSERT_TRUE(llama3);
  EXPECT_TRUE(llama3->ignore_merges());
  EXPECT_TRUE(llama3->adds_bos_by_default());
  auto qwen2 = PreTokenizer::for_name("qwen2");
  ASSERT_TRUE(qwen2);
  EXPECT_FALSE(qwen2->ignore_merges());
  EXPECT_EQ(qwen2->split("ab 2024"), (Pieces{"ab", " ", "2", "0", "2", "4"}));
  // deepseek-coder: line breaks alone, letters with one leading space, digits singly.
  auto coder = PreTokenizer::for_name("deepseek-coder");
  ASSERT_TRUE(coder);
  EXPECT_EQ(coder->split("int x=42;\n"), (Pieces{"int", " x", "=", "4", "2", ";", "\n"}));
  // Bytes that are not UTF-8 become U+FFFD, as in llama.cpp.
  EXPECT_EQ(qwen2->split("a\xFF"), (Pieces{"a", "\xEF\xBF\xBD"}));
}

}  // namespace
}  // namespace minfer
