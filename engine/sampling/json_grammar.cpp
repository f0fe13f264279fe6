#include "engine/sampling/json_grammar.h"

namespace minfer {
namespace {

bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

bool JsonObjectGrammar::advance(std::string_view bytes) {
  for (const char c : bytes) {
    if (!step(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool JsonObjectGrammar::open(char container, State next) {
  if (static_cast<int>(stack_.size()) >= kMaxDepth) return false;
  stack_.push_back(container);
  state_ = next;
  return true;
}

bool JsonObjectGrammar::close(char container) {
  if (stack_.empty() || stack_.back() != container) return false;
  stack_.pop_back();
  state_ = stack_.empty() ? State::kDone : State::kCommaOrEnd;
  return true;
}

bool JsonObjectGrammar::value_start(unsigned char c) {
  switch (c) {
    case '{': return open('{', State::kKeyOrEnd);
    case '[': return open('[', State::kValueOrEnd);
    case '"': in_key_ = false; state_ = State::kString; return true;
    case '-': state_ = State::kNumMinus; return true;
    case '0': state_ = State::kNumZero; return true;
    case 't': literal_ = "rue"; state_ = State::kLiteral; return true;
    case 'f': literal_ = "alse"; state_ = State::kLiteral; return true;
    case 'n': literal_ = "ull"; state_ = State::kLiteral; return true;
    default:
      if (is_digit(c)) {
        state_ = State::kNumInt;
        return true;
      }
      return false;
  }
}

bool JsonObjectGrammar::step(unsigned char c) {
  switch (state_) {
    case State::kStart:
    case State::kValue:
    case State::kKeyOrEnd:
    case State::kKey:
    case State::kColon:
    case State::kValueOrEnd:
    case State::kCommaOrEnd:
    case State::kDone:
      if (is_space(c)) {
        if (gap_ == Gap::kNone && (c == ' ' || c == '\n')) {
          gap_ = c == ' ' ? Gap::kSpace : Gap::kNewline;
          indent_ = 0;
          return true;
        }
        return gap_ == Gap::kNewline && (c == ' ' || c == '\t') && ++indent_ <= kMaxIndent;
      }
      gap_ = Gap::kNone;
      break;
    default: break;
  }
  switch (state_) {
    case State::kStart: return c == '{' && open('{', State::kKeyOrEnd);
    case State::kValue: return value_start(c);
    case State::kValueOrEnd: return c == ']' ? close('[') : value_start(c);
    case State::kKeyOrEnd:
      if (c == '}') return close('{');
      [[fallthrough]];
    case State::kKey:
      if (c != '"') return false;
      in_key_ = true;
      state_ = State::kString;
      return true;
    case State::kColon:
      if (c != ':') return false;
      state_ = State::kValue;
      return true;
    case State::kCommaOrEnd:
      if (c == ',') {
        state_ = stack_.back() == '{' ? State::kKey : State::kValue;
        return true;
      }
      if (c == '}') return close('{');
      if (c == ']') return close('[');
      return false;
    case State::kString:
      if (c == '"') {
        state_ = in_key_ ? State::kColon : State::kCommaOrEnd;
        return true;
      }
      if (c == '\\') {
        state_ = State::kEscape;
        return true;
      }
      return c >= 0x20;  // control characters must be escaped
    case State::kEscape:
      if (c == 'u') {
        hex_left_ = 4;
        state_ = State::kUnicode;
        return true;
      }
      if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
        state_ = State::kString;
        return true;
      }
      return false;
    case State::kUnicode:
      if (!is_hex(c)) return false;
      if (--hex_left_ == 0) state_ = State::kString;
      return true;
    case State::kNumMinus:
      if (c == '0') {
        state_ = State::kNumZero;
        return true;
      }
      if (!is_digit(c)) return false;
      state_ = State::kNumInt;
      return true;
    case State::kNumDot:
      if (!is_digit(c)) return false;
      state_ = State::kNumFrac;
      return true;
    case State::kNumExp:
      if (c == '+' || c == '-') {
        state_ = State::kNumExpSign;
        return true;
      }
      [[fallthrough]];
    case State::kNumExpSign:
      if (!is_digit(c)) return false;
      state_ = State::kNumExpDigits;
      return true;
    case State::kNumZero:
    case State::kNumInt:
    case State::kNumFrac:
    case State::kNumExpDigits:
      if (is_digit(c) && state_ != State::kNumZero) return true;
      if (c == '.' && (state_ == State::kNumZero || state_ == State::kNumInt)) {
        state_ = State::kNumDot;
        return true;
      }
      if ((c == 'e' || c == 'E') && state_ != State::kNumExpDigits) {
        state_ = State::kNumExp;
        return true;
      }
      // The number ends here: the byte is the next structural one's.
      state_ = State::kCommaOrEnd;
      return step(c);
    case State::kLiteral:
      if (c != static_cast<unsigned char>(*literal_)) return false;
      if (*++literal_ == '\0') state_ = State::kCommaOrEnd;
      return true;
    case State::kDone: return false;
  }
  return false;
}

}  // namespace minfer
