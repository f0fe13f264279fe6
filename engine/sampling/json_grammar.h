// JSON mode (OpenAI's response_format {"type": "json_object"}): which bytes
// may come next so that the output is one JSON object (RFC 8259), byte by
// byte, as a pushdown automaton. The sampler asks it which tokens may follow
// (Sampler::sample's `allowed`), and generation ends when the object closes.
// Whitespace between tokens is what llama.cpp's JSON grammar allows (its
// `ws`): nothing, one space, or a newline and at most kMaxIndent spaces or
// tabs — so that a model cannot pad forever;
// strings take any byte but the quote, the backslash and controls (UTF-8 is
// not checked here: a token may end inside a character); nesting is bounded
// by kMaxDepth.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace minfer {

class JsonObjectGrammar {
 public:
  static constexpr int kMaxIndent = 20;
  static constexpr int kMaxDepth = 64;

  // Whether `bytes` may follow what was fed so far (nothing changes).
  bool accepts(std::string_view bytes) const {
    JsonObjectGrammar g = *this;
    return g.advance(bytes);
  }
  // Feeds `bytes`; false (and the state is then unspecified) when one cannot follow.
  bool advance(std::string_view bytes);
  // The top-level object has closed (only whitespace may follow).
  bool complete() const { return state_ == State::kDone; }

 private:
  enum class State : uint8_t {
    kStart,       // before the object: '{'
    kValue,       // a value: after ':', or ',' in an array
    kKeyOrEnd,    // after '{': a key or '}'
    kKey,         // after ',' in an object: a key
    kColon,       // after a key: ':'
    kValueOrEnd,  // after '[': a value or ']'
    kCommaOrEnd,  // after a value: ',' or the container's close
    kString,
    kEscape,      // after a backslash
    kUnicode,     // \uXXXX: hex_left_ digits to come
    kNumMinus,    // "-": a digit
    kNumZero,     // a leading 0: '.', 'e' or the end
    kNumInt,
    kNumDot,      // a digit
    kNumFrac,
    kNumExp,      // a sign or a digit
    kNumExpSign,  // a digit
    kNumExpDigits,
    kLiteral,     // the rest of true / false / null in literal_
    kDone,
  };
  bool step(unsigned char c);
  bool open(char container, State next);
  bool close(char container);
  bool value_start(unsigned char c);

  State state_ = State::kStart;
  bool in_key_ = false;
  uint8_t hex_left_ = 0;
  // The whitespace between two tokens so far: none, one space, or a newline
  // and indent_ spaces or tabs.
  enum class Gap : uint8_t { kNone, kSpace, kNewline };
  Gap gap_ = Gap::kNone;
  uint8_t indent_ = 0;
  const char* literal_ = nullptr;
  std::string stack_;  // '{' or '[' for each open container
};

}  // namespace minfer
