// decode(encode(s)) == s on seeded random Unicode text, for SentencePiece
// and byte-level BPE vocabularies, and StreamDecoder's contract: chunks are
// valid UTF-8 and add up to decode().
#include <gtest/gtest.h>

#include <random>

#include "engine/tokenizer/unicode.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace minfer {
namespace {

// Valid UTF-8 drawn from ranges that stress tokenizers: ASCII, whitespace
// runs, Latin-1, combining marks, CJK, Hangul, emoji with ZWJ and skin tones,
// and astral letters. U+2581 ('▁') is left out: SentencePiece spells spaces
// with it, so a literal one cannot survive the round trip (nor in llama.cpp).
std::string random_unicode(std::mt19937& rng, size_t n_chars) {
  struct Range {
    uint32_t lo, hi;
    int weight;
  };
  static const std::vector<Range> ranges = {
      {0x20, 0x7E, 30},     {' ', ' ', 10},       {'\n', '\n', 3},      {'\t', '\t', 1},     {0xA0, 0xFF, 5},
      {0x300, 0x36F, 3},    {0x391, 0x3C9, 2},    {0x410, 0x44F, 3},    {0x4E00, 0x9FFF, 8}, {0x3040, 0x30FF, 2},
      {0xAC00, 0xD7A3, 3},  {0x1F300, 0x1F64F, 4}, {0x1F3FB, 0x1F3FF, 1}, {0x200D, 0x200D, 1}, {0x20000, 0x2A6DF, 2},
      {0x1D400, 0x1D7FF, 1}, {0x3000, 0x3000, 1},  {0xFF01, 0xFF5E, 1},  {0x2000, 0x206F, 1}, {0x10000, 0x1007F, 1},
  };
  int total = 0;
  for (const Range& r : ranges) total += r.weight;
  std::string s;
  for (size_t i = 0; i < n_chars; ++i) {
    int pick = std::uniform_int_distribution<int>(0, total - 1)(rng);
    const Range* r = &ranges[0];
    for (const Range& cand : ranges) {
      if (pick < cand.weight) {
        r = &cand;
        break;
      }
      pick -= cand.weight;
    }
    const uint32_t cpt = std::uniform_int_distribution<uint32_t>(r->lo, r->hi)(rng);
    if (cpt == 0x2581) continue;
    unicode::append_utf8(s, cpt);
    if (r->lo == ' ' && rng() % 3 == 0) s.append(std::uniform_int_distribution<size_t>(1, 6)(rng), ' ');
  }
  return s;
}

class RoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, DecodeOfEncodeIsTheText) {
  std::unique_ptr<Tokenizer> owned;
  const Tokenizer* tok = nullptr;
  if (GetParam() == "qwen") {
    tok = &test::qwen_tokenizer();
  } else {
    owned = test::load_vocab(GetParam());
    tok = owned.get();
  }
  ASSERT_TRUE(tok);
  std::mt19937 rng(20240601);
  for (int i = 0; i < 300; ++i) {
    const std::string text = random_unicode(rng, 1 + rng() % 80);
    const auto ids = tok->encode(text, {.add_bos = tok->special().add_bos, .parse_special = false});
    ASSERT_EQ(tok->decode(ids), text) << GetParam() << " case " << i << test::ids_to_string(ids);

    StreamDecoder stream(*tok);
    std::string streamed;
    for (TokenId id : ids) {
      const std::string chunk = stream.push(id);
      ASSERT_TRUE(unicode::is_valid_utf8(chunk)) << "chunk of case " << i;
      streamed += chunk;
    }
    streamed += stream.flush();
    ASSERT_EQ(streamed, text) << GetParam() << " case " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(SpmAndBpe, RoundTrip, ::testing::Values("llama-spm", "phi-3", "gpt-2", "qwen", "mpt",
                                                                 "deepseek-llm", "falcon", "starcoder"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// A continuation: the chunks are what the ids add to the text before them,
// decode(before + ids) less decode(before). SPM's encoder writes "▁a" for
// " a", so after "Once upon" the first piece keeps its space; at the start of
// the text (nothing before, or only BOS) it loses it, as decode() does.
TEST(StreamDecoder, AContinuationKeepsItsFirstSpace) {
  auto tok = test::load_vocab("llama-spm");
  ASSERT_TRUE(tok);
  const auto prompt = tok->encode("Once upon", {.add_bos = true, .parse_special = false});
  const auto whole = tok->encode("Once upon a time", {.add_bos = true, .parse_special = false});
  ASSERT_EQ(std::vector<TokenId>(whole.begin(), whole.begin() + static_cast<ptrdiff_t>(prompt.size())), prompt);
  const std::vector<TokenId> reply(whole.begin() + static_cast<ptrdiff_t>(prompt.size()), whole.end());
  auto stream_of = [&](std::span<const TokenId> before) {
    StreamDecoder stream(*tok);
    stream.follow(before);
    std::string out;
    for (TokenId id : reply) out += stream.push(id);
    return out + stream.flush();
  };
  EXPECT_EQ(tok->decode(prompt) + stream_of(prompt), tok->decode(whole));
  EXPECT_EQ(stream_of(prompt), " a time");
  EXPECT_EQ(stream_of({}), "a time");
  EXPECT_EQ(stream_of(std::vector<TokenId>{*tok->special().bos}), "a time") << "BOS decodes to no text";
}

TEST(StreamDecoder, JoinsByteFallbackPieces) {
  auto tok = test::load_vocab("llama-spm");
  ASSERT_TRUE(tok);
  // 你 is E4 BD A0; Llama-2's vocabulary spells bytes as <0xNN> (id 3 + byte).
  const TokenId e4 = *tok->find_piece("<0xE4>"), bd = *tok->find_piece("<0xBD>"), a0 = *tok->find_piece("<0xA0>");
  EXPECT_EQ(e4, 3 + 0xE4);
  StreamDecoder stream(*tok);
  EXPECT_EQ(stream.push(e4), "");
  EXPECT_EQ(stream.push(bd), "");
  EXPECT_EQ(stream.push(a0), "\xE4\xBD\xA0");
  EXPECT_EQ(stream.flush(), "");
  EXPECT_EQ(tok->decode({e4, bd, a0}), "\xE4\xBD\xA0");
}

TEST(StreamDecoder, CutCharacterAndBrokenBytes) {
  auto tok = test::load_vocab("llama-spm");
  ASSERT_TRUE(tok);
  const TokenId e4 = *tok->find_piece("<0xE4>"), bd = *tok->find_piece("<0xBD>"), ff = *tok->find_piece("<0xFF>");
  const TokenId hello = *tok->find_piece("\xE2\x96\x81Hello");
  StreamDecoder stream(*tok);
  EXPECT_EQ(stream.push(hello), "Hello");  // the leading space of the first piece goes
  EXPECT_EQ(stream.push(ff), "\xEF\xBF\xBD");  // can never be UTF-8
  EXPECT_EQ(stream.push(e4), "");
  EXPECT_EQ(stream.push(bd), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");  // generation stopped mid-character
  // decode() gives the raw bytes.
  EXPECT_EQ(tok->decode({hello, ff, e4, bd}), "Hello\xFF\xE4\xBD");
}

TEST(StreamDecoder, QwenEmojiSplitAcrossTokens) {
  const Tokenizer& tok = test::qwen_tokenizer();
  // From reference-vectors.json: " 🚀" is 11162, 248, 222: " \xF0\x9F", then
  // the single bytes 0x9A and 0x80 (ids 248 and 222 in the byte alphabet).
  EXPECT_EQ(tok.token_bytes(11162), " \xF0\x9F");
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.push(11162), " ");
  EXPECT_EQ(stream.push(248), "");
  EXPECT_EQ(stream.push(222), "\xF0\x9F\x9A\x80");
}

}  // namespace
}  // namespace minfer
