// SplitRegex: parser → AST → backtracking program (see split_regex.h).
#include "engine/tokenizer/split_regex.h"

#include <fmt/format.h>

#include <utility>

#include "engine/tokenizer/unicode.h"

namespace minfer {
namespace {

constexpr int kUnbounded = -1;

struct Node {
  enum class Kind { kClass, kConcat, kAlt, kRepeat, kEnd, kNotFollowedBy } kind = Kind::kConcat;
  uint32_t cls = 0;
  int min = 0;
  int max = 0;
  std::vector<Node> kids;
};

bool nullable(const Node& n) {
  switch (n.kind) {
    case Node::Kind::kClass:
      return false;
    case Node::Kind::kConcat:
      for (const Node& k : n.kids)
        if (!nullable(k)) return false;
      return true;
    case Node::Kind::kAlt:
      for (const Node& k : n.kids)
        if (nullable(k)) return true;
      return false;
    case Node::Kind::kRepeat:
      return n.min == 0 || nullable(n.kids[0]);
    case Node::Kind::kEnd:
    case Node::Kind::kNotFollowedBy:
      return true;
  }
  return true;
}

class Parser {
 public:
  Parser(std::vector<uint32_t> pattern, std::vector<SplitRegex::CharClass>& classes)
      : p_(std::move(pattern)), classes_(classes) {}

  bool parse(Node* out) {
    *out = parse_alt();
    if (error_.empty() && i_ != p_.size()) fail("unbalanced ')'");
    return error_.empty();
  }
  const std::string& error() const { return error_; }
  size_t position() const { return i_; }

 private:
  bool at_end() const { return i_ >= p_.size(); }
  uint32_t peek() const { return at_end() ? 0 : p_[i_]; }
  void fail(std::string what) {
    if (error_.empty()) error_ = std::move(what);
  }

  Node parse_alt() {
    Node alt{Node::Kind::kAlt};
    alt.kids.push_back(parse_concat());
    while (error_.empty() && !at_end() && peek() == '|') {
      ++i_;
      alt.kids.push_back(parse_concat());
    }
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Node parse_concat() {
    Node cat{Node::Kind::kConcat};
    while (error_.empty() && !at_end() && peek() != '|' && peek() != ')') cat.kids.push_back(parse_repeat());
    if (cat.kids.size() == 1) return std::move(cat.kids[0]);
    return cat;
  }

  Node parse_repeat() {
    Node atom = parse_atom();
    while (error_.empty() && !at_end()) {
      int min = 0, max = 0;
      const uint32_t c = peek();
      if (c == '?') {
        min = 0, max = 1;
      } else if (c == '*') {
        min = 0, max = kUnbounded;
      } else if (c == '+') {
        min = 1, max = kUnbounded;
      } else if (c == '{') {
        if (!parse_braces(&min, &max)) return atom;
      } else {
        break;
      }
      ++i_;
      if (!at_end() && (peek() == '?' || peek() == '+')) {
        fail("lazy and possessive quantifiers are not supported");
        return atom;
      }
      if (atom.kind == Node::Kind::kEnd || atom.kind == Node::Kind::kNotFollowedBy) {
        fail("quantifier after an assertion");
        return atom;
      }
      Node rep{Node::Kind::kRepeat};
      rep.min = min;
      rep.max = max;
      rep.kids.push_back(std::move(atom));
      atom = std::move(rep);
    }
    return atom;
  }

  // {n}, {n,}, {n,m}; leaves i_ on the closing brace.
  bool parse_braces(int* min, int* max) {
    size_t j = i_ + 1;
    auto number = [&](int* v) {
      const size_t start = j;
      *v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && *v < 1000) *v = *v * 10 + static_cast<int>(p_[j++] - '0');
      return j > start;
    };
    if (!number(min)) return fail("bad '{' quantifier"), false;
    *max = *min;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!number(max)) *max = kUnbounded;
    }
    if (j >= p_.size() || p_[j] != '}' || (*max != kUnbounded && *max < *min)) return fail("bad '{' quantifier"), false;
    i_ = j;
    return true;
  }

  Node class_node(SplitRegex::CharClass cls) {
    Node n{Node::Kind::kClass};
    n.cls = static_cast<uint32_t>(classes_.size());
    classes_.push_back(std::move(cls));
    return n;
  }

  Node parse_atom() {
    const uint32_t c = p_[i_++];
    switch (c) {
      case '(':
        return parse_group();
      case '[':
        return class_node(parse_class());
      case '$':
        return Node{Node::Kind::kEnd};
      case '\\': {
        SplitRegex::CharClass cls;
        parse_escape(&cls);
        return class_node(std::move(cls));
      }
      case '.':
      case '^':
      case ')':
      case '*':
      case '+':
      case '?':
      case '{':
        fail(fmt::format("'{}' is not supported here", static_cast<char>(c)));
        return Node{};
      default: {
        SplitRegex::CharClass cls;
        cls.ranges.emplace_back(c, c);
        return class_node(std::move(cls));
      }
    }
  }

  Node parse_group() {
    bool look_ahead = false;
    if (peek() == '?') {
      ++i_;
      if (peek() == ':') {
        ++i_;
      } else if (peek() == '!') {
        ++i_;
        look_ahead = true;
      } else {
        fail("only (?:...) and (?!...) groups are supported");
        return Node{};
      }
    }
    Node inner = parse_alt();
    if (at_end() || peek() != ')') {
      fail("missing ')'");
      return inner;
    }
    ++i_;
    if (!look_ahead) return inner;
    if (inner.kind != Node::Kind::kClass) {
      fail("(?!...) must hold a single character class");
      return inner;
    }
    Node n{Node::Kind::kNotFollowedBy};
    n.cls = inner.cls;
    return n;
  }

  // After '\': a class escape adds to `cls`; a literal escape returns its
  // code point in *literal (and adds it too).
  void parse_escape(SplitRegex::CharClass* cls, uint32_t* literal = nullptr) {
    if (at_end()) return fail("trailing '\\'");
    const uint32_t c = p_[i_++];
    auto add_literal = [&](uint32_t v) {
      cls->ranges.emplace_back(v, v);
      if (literal) *literal = v;
    };
    switch (c) {
      case 's':
        cls->flag_mask |= unicode::kFlagWhitespace;
        return;
      case 'S':
        if (!cls->ranges.empty() || cls->flag_mask != 0) return fail("\\S inside a class is not supported");
        cls->flag_mask = unicode::kFlagWhitespace;
        cls->negated = !cls->negated;
        return;
      case 'p':
        return parse_property(cls);
      case 'r':
        return add_literal('\r');
      case 'n':
        return add_literal('\n');
      case 't':
        return add_literal('\t');
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
          return fail(fmt::format("escape '\\{}' is not supported", static_cast<char>(c)));
        return add_literal(c);  // \$ \+ \\ \[ ...
    }
  }

  void parse_property(SplitRegex::CharClass* cls) {
    if (peek() != '{') return fail("expected '{' after \\p");
    std::string name;
    ++i_;
    while (!at_end() && peek() != '}') name.push_back(static_cast<char>(p_[i_++]));
    if (at_end()) return fail("unterminated \\p{");
    ++i_;
    if (name == "L") {
      cls->flag_mask |= unicode::kFlagLetter;
    } else if (name == "N") {
      cls->flag_mask |= unicode::kFlagNumber;
    } else if (name == "P") {
      cls->flag_mask |= unicode::kFlagPunctuation;
    } else if (name == "S") {
      cls->flag_mask |= unicode::kFlagSymbol;
    } else if (name == "M") {
      cls->flag_mask |= unicode::kFlagMark;
    } else {
      fail("unsupported property \\p{" + name + "}");
    }
  }

  SplitRegex::CharClass parse_class() {
    SplitRegex::CharClass cls;
    if (peek() == '^') {
      cls.negated = true;
      ++i_;
    }
    bool first = true;
    while (error_.empty()) {
      if (at_end()) {
        fail("missing ']'");
        break;
      }
      uint32_t c = p_[i_];
      if (c == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      ++i_;
      uint32_t lo = c;
      if (c == '\\') {
        uint32_t literal = UINT32_MAX;
        SplitRegex::CharClass piece;
        parse_escape(&piece, &literal);
        if (literal == UINT32_MAX) {  // a class escape: merge it
          if (piece.negated) fail("negated escape inside a class");
          cls.flag_mask |= piece.flag_mask;
          continue;
        }
        lo = literal;
      }
      if (peek() == '-' && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi = p_[i_++];
        if (hi == '\\') {
          uint32_t literal = UINT32_MAX;
          SplitRegex::CharClass piece;
          parse_escape(&piece, &literal);
          if (literal == UINT32_MAX) fail("class escape as a range end");
          hi = literal;
        }
        if (hi < lo) fail("range out of order");
        cls.ranges.emplace_back(lo, hi);
      } else {
        cls.ranges.emplace_back(lo, lo);
      }
    }
    return cls;
  }

  std::vector<uint32_t> p_;
  size_t i_ = 0;
  std::vector<SplitRegex::CharClass>& classes_;
  std::string error_;
};

class Compiler {
 public:
  explicit Compiler(std::vector<SplitRegex::Inst>& program) : prog_(program) {}

  void emit(const Node& n) {
    using Op = SplitRegex::Op;
    switch (n.kind) {
      case Node::Kind::kClass:
        push({Op::kClass, n.cls});
        break;
      case Node::Kind::kConcat:
        for (const Node& k : n.kids) emit(k);
        break;
      case Node::Kind::kAlt: {
        std::vector<size_t> exits;
        for (size_t i = 0; i < n.kids.size(); ++i) {
          if (i + 1 == n.kids.size()) {
            emit(n.kids[i]);
            break;
          }
          const size_t split = push({Op::kSplit});
          prog_[split].x = here();
          emit(n.kids[i]);
          exits.push_back(push({Op::kJmp}));
          prog_[split].y = here();
        }
        for (size_t j : exits) prog_[j].x = here();
        break;
      }
      case Node::Kind::kRepeat: {
        for (int i = 0; i < n.min; ++i) emit(n.kids[0]);
        if (n.max == kUnbounded) {
          const size_t split = push({Op::kSplit});
          prog_[split].x = here();
          emit(n.kids[0]);
          push({Op::kJmp, static_cast<uint32_t>(split)});
          prog_[split].y = here();
        } else {
          std::vector<size_t> splits;
          for (int i = n.min; i < n.max; ++i) {
            const size_t split = push({Op::kSplit});
            prog_[split].x = here();
            splits.push_back(split);
            emit(n.kids[0]);
          }
          for (size_t s : splits) prog_[s].y = here();
        }
        break;
      }
      case Node::Kind::kEnd:
        push({Op::kAssertEnd});
        break;
      case Node::Kind::kNotFollowedBy:
        push({Op::kNotFollowedBy, n.cls});
        break;
    }
  }

 private:
  uint32_t here() const { return static_cast<uint32_t>(prog_.size()); }
  size_t push(SplitRegex::Inst inst) {
    prog_.push_back(inst);
    return prog_.size() - 1;
  }
  std::vector<SplitRegex::Inst>& prog_;
};

}  // namespace

bool SplitRegex::CharClass::matches(uint32_t cpt, uint16_t flags) const {
  bool in = (flags & flag_mask) != 0;
  for (size_t i = 0; !in && i < ranges.size(); ++i) in = cpt >= ranges[i].first && cpt <= ranges[i].second;
  return in != negated;
}

Expected<SplitRegex> SplitRegex::compile(std::string_view pattern) {
  SplitRegex re;
  re.pattern_ = std::string(pattern);
  if (!unicode::is_valid_utf8(pattern))
    return unexpected(ErrorCode::kInvalidArgument, "split regex is not valid UTF-8");
  Parser parser(unicode::decode_lenient(pattern), re.classes_);
  Node root;
  if (!parser.parse(&root))
    return unexpected(ErrorCode::kUnsupported, fmt::format("split regex '{}': {} (at code point {})", pattern,
                                                           parser.error(), parser.position()));
  if (nullable(root))
    return unexpected(ErrorCode::kUnsupported,
                      fmt::format("split regex '{}' can match the empty string; pieces would be ambiguous", pattern));
  Compiler(re.program_).emit(root);
  re.program_.push_back({Op::kMatch});
  return re;
}

long SplitRegex::match_at(const std::vector<uint32_t>& cpts, const std::vector<uint16_t>& flags, size_t begin,
                          size_t start, size_t end, std::vector<uint64_t>& visited) const {
  const size_t width = end - begin + 1;
  auto seen = [&](uint32_t pc, size_t pos) {
    const size_t bit = pc * width + (pos - begin);
    uint64_t& word = visited[bit >> 6];
    const uint64_t mask = uint64_t{1} << (bit & 63);
    if (word & mask) return true;
    word |= mask;
    return false;
  };
  std::vector<std::pair<uint32_t, size_t>> stack;
  stack.emplace_back(0, start);
  while (!stack.empty()) {
    auto [pc, pos] = stack.back();
    stack.pop_back();
    while (!seen(pc, pos)) {
      const Inst& in = program_[pc];
      if (in.op == Op::kClass) {
        if (pos >= end || !classes_[in.x].matches(cpts[pos], flags[pos])) break;
        ++pc, ++pos;
      } else if (in.op == Op::kSplit) {
        stack.emplace_back(in.y, pos);
        pc = in.x;
      } else if (in.op == Op::kJmp) {
        pc = in.x;
      } else if (in.op == Op::kMatch) {
        return static_cast<long>(pos);
      } else if (in.op == Op::kAssertEnd) {
        if (pos != end) break;
        ++pc;
      } else {  // kNotFollowedBy
        if (pos < end && classes_[in.x].matches(cpts[pos], flags[pos])) break;
        ++pc;
      }
    }
  }
  return -1;
}

std::vector<size_t> SplitRegex::split(const std::vector<uint32_t>& cpts, const std::vector<uint16_t>& flags,
                                      const std::vector<size_t>& pieces) const {
  std::vector<size_t> out;
  out.reserve(pieces.size());
  std::vector<uint64_t> visited;
  size_t begin = 0;
  for (size_t len : pieces) {
    const size_t end = begin + len;
    const size_t width = len + 1;
    visited.assign((program_.size() * width + 63) / 64, 0);
    size_t gap = begin;
    size_t pos = begin;
    while (pos < end) {
      const long m = match_at(cpts, flags, begin, pos, end, visited);
      if (m < 0) {
        ++pos;
        continue;
      }
      const auto match_end = static_cast<size_t>(m);
      if (pos > gap) out.push_back(pos - gap);
      out.push_back(match_end - pos);
      // States explored before the match failed and stay failed; those on the
      // matching path all sit at or before match_end, and only the ones at
      // match_end can be reached again by the next attempt.
      for (size_t pc = 0; pc < program_.size(); ++pc) {
        const size_t bit = pc * width + (match_end - begin);
        visited[bit >> 6] &= ~(uint64_t{1} << (bit & 63));
      }
      pos = gap = match_end;
    }
    if (gap < end) out.push_back(end - gap);
    begin = end;
  }
  return out;
}

}  // namespace minfer
