#include "engine/sampling/string_pattern.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <bitset>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

namespace minfer {

namespace {

// The parsed expression: a tree the builder turns into states, a repeated
// part once a copy.
struct Regex {
  enum class Kind { kChar, kConcat, kAlt, kRepeat };
  Kind kind = Kind::kConcat;
  std::bitset<256> ascii;   // kChar: the ASCII bytes it takes
  bool multibyte = false;   // kChar: and any multi-byte UTF-8 character
  std::vector<Regex> parts;  // kConcat, kAlt; kRepeat: {the part}
  int min = 0, max = 0;      // kRepeat; max -1: no bound
};

constexpr int kMaxRepeat = 100;

// The ASCII bytes a string held to a pattern may hold (no escapes: no quote,
// backslash or control character).
std::bitset<256> printable_ascii() {
  std::bitset<256> b;
  for (int c = 0x20; c < 0x80; ++c) b.set(static_cast<size_t>(c));
  b.reset('"');
  b.reset('\\');
  return b;
}

Regex char_of(std::bitset<256> ascii, bool multibyte) {
  Regex r;
  r.kind = Regex::Kind::kChar;
  r.ascii = ascii & printable_ascii();
  r.multibyte = multibyte;
  return r;
}

Regex byte_of(unsigned char c) {
  Regex r;
  r.kind = Regex::Kind::kChar;
  r.ascii.set(c);  // a byte of a literal UTF-8 character (>= 0x80) too
  return r;
}

std::bitset<256> range(unsigned char from, unsigned char to) {
  std::bitset<256> b;
  for (int c = from; c <= to; ++c) b.set(static_cast<size_t>(c));
  return b;
}

std::bitset<256> continuation_bytes() { return range(0x80, 0xBF); }

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Expected<Regex> parse() {
    MINFER_ASSIGN_OR_RETURN(Regex r, alternation());
    if (pos_ < text_.size()) return unexpected(error("an unmatched ')'"));
    return r;
  }

 private:
  Error error(const std::string& what) const {
    return Error(ErrorCode::kInvalidArgument, fmt::format("pattern at offset {}: {}", pos_, what));
  }
  bool more() const { return pos_ < text_.size(); }
  unsigned char peek() const { return static_cast<unsigned char>(text_[pos_]); }

  Expected<Regex> alternation() {
    Regex alt;
    alt.kind = Regex::Kind::kAlt;
    for (;;) {
      MINFER_ASSIGN_OR_RETURN(Regex seq, concatenation());
      alt.parts.push_back(std::move(seq));
      if (!more() || peek() != '|') break;
      ++pos_;
    }
    if (alt.parts.size() == 1) return std::move(alt.parts[0]);
    return alt;
  }

  Expected<Regex> concatenation() {
    Regex seq;
    seq.kind = Regex::Kind::kConcat;
    while (more() && peek() != '|' && peek() != ')') {
      MINFER_ASSIGN_OR_RETURN(Regex atom, quantified());
      seq.parts.push_back(std::move(atom));
    }
    return seq;
  }

  Expected<Regex> quantified() {
    MINFER_ASSIGN_OR_RETURN(Regex atom, this->atom());
    if (!more()) return atom;
    int min = 0, max = 0;
    const unsigned char q = peek();
    if (q == '?') {
      min = 0, max = 1;
    } else if (q == '*') {
      min = 0, max = -1;
    } else if (q == '+') {
      min = 1, max = -1;
    } else if (q == '{') {
      MINFER_TRY(bounds(&min, &max));
      --pos_;  // bounds() left pos_ after the '}'; the ++ below
    } else {
      return atom;
    }
    ++pos_;
    if (more() && (peek() == '?' || peek() == '+' || peek() == '*' || peek() == '{')) {
      return unexpected(error("a lazy, possessive or second quantifier is not supported"));
    }
    Regex r;
    r.kind = Regex::Kind::kRepeat;
    r.min = min;
    r.max = max;
    r.parts.push_back(std::move(atom));
    return r;
  }

  // {n}, {n,}, {n,m} at pos_; pos_ ends after the '}'.
  Status bounds(int* min, int* max) {
    const size_t open = pos_++;
    auto number = [&](int* out) {
      const size_t from = pos_;
      int v = 0;
      while (more() && peek() >= '0' && peek() <= '9' && v <= kMaxRepeat) v = 10 * v + (text_[pos_++] - '0');
      *out = v;
      return pos_ > from;
    };
    if (!number(min)) return unexpected(Error(ErrorCode::kInvalidArgument, fmt::format("pattern at offset {}: a '{{' that is not a bound", open)));
    *max = *min;
    if (more() && peek() == ',') {
      ++pos_;
      if (!number(max)) *max = -1;
    }
    if (!more() || peek() != '}') return unexpected(error("a bound {n,m} not closed"));
    ++pos_;
    if (*min > kMaxRepeat || *max > kMaxRepeat) {
      return unexpected(error(fmt::format("a bound above {} is not supported", kMaxRepeat)));
    }
    if (*max >= 0 && *max < *min) return unexpected(error("a bound {n,m} with m below n"));
    return ok_status();
  }

  Expected<Regex> atom() {
    const unsigned char c = peek();
    switch (c) {
      case '(': {
        ++pos_;
        if (more() && peek() == '?') {
          if (pos_ + 1 < text_.size() && text_[pos_ + 1] == ':') {
            pos_ += 2;
          } else {
            return unexpected(error("lookaround and named groups are not supported"));
          }
        }
        MINFER_ASSIGN_OR_RETURN(Regex inner, alternation());
        if (!more() || peek() != ')') return unexpected(error("a '(' not closed"));
        ++pos_;
        return inner;
      }
      case '[': return char_class();
      case '.': ++pos_; return char_of(printable_ascii(), true);
      case '\\': {
        MINFER_ASSIGN_OR_RETURN(const auto e, escape());
        return char_of(e.first, e.second);
      }
      case '*': case '+': case '?': case '{': return unexpected(error("a quantifier with nothing to repeat"));
      case '^': case '$': return unexpected(error("an anchor inside the pattern (only ^ first and $ last are supported)"));
      default: break;
    }
    if (c < 0x80) {
      ++pos_;
      return char_of(std::bitset<256>().set(c), false);
    }
    // A literal non-ASCII character: its UTF-8 bytes in a row.
    const int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (n == 0 || pos_ + static_cast<size_t>(n) > text_.size()) return unexpected(error("a byte that is not UTF-8"));
    Regex seq;
    seq.kind = Regex::Kind::kConcat;
    for (int i = 0; i < n; ++i) seq.parts.push_back(byte_of(static_cast<unsigned char>(text_[pos_++])));
    return seq;
  }

  // After a backslash (pos_ at it): the set it stands for, and whether it
  // takes multi-byte characters (the negations).
  Expected<std::pair<std::bitset<256>, bool>> escape() {
    ++pos_;
    if (!more()) return unexpected(error("a '\\' at the end"));
    const unsigned char e = static_cast<unsigned char>(text_[pos_++]);
    const std::bitset<256> digits = range('0', '9');
    const std::bitset<256> word = digits | range('a', 'z') | range('A', 'Z') | std::bitset<256>().set('_');
    const std::bitset<256> space = std::bitset<256>().set(' ').set('\t').set('\n').set('\r').set('\f').set('\v');
    switch (e) {
      case 'd': return std::pair{digits, false};
      case 'D': return std::pair{~digits, true};
      case 'w': return std::pair{word, false};
      case 'W': return std::pair{~word, true};
      case 's': return std::pair{space, false};
      case 'S': return std::pair{~space, true};
      case 't': return std::pair{std::bitset<256>().set('\t'), false};
      case 'n': return std::pair{std::bitset<256>().set('\n'), false};
      case 'r': return std::pair{std::bitset<256>().set('\r'), false};
      default: break;
    }
    static constexpr std::string_view kLiteral = "\\/.-^$*+?()[]{}|\"' ,:;=!<>&%#@~`";
    if (kLiteral.find(static_cast<char>(e)) != std::string_view::npos) return std::pair{std::bitset<256>().set(e), false};
    pos_ -= 2;
    return unexpected(error(fmt::format("the escape '\\{}' is not supported", static_cast<char>(e))));
  }

  Expected<Regex> char_class() {
    ++pos_;  // '['
    bool negated = false;
    if (more() && peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::bitset<256> set;
    bool multibyte = false;
    bool first = true;
    while (more() && (peek() != ']' || first)) {
      first = false;
      std::bitset<256> item;
      unsigned char lo = 0;
      bool single = false;
      if (peek() == '\\') {
        MINFER_ASSIGN_OR_RETURN(auto e, escape());
        item = e.first;
        multibyte = multibyte || e.second;
        single = e.first.count() == 1 && !e.second;
        if (single) {
          for (int b = 0; b < 256; ++b) {
            if (e.first.test(static_cast<size_t>(b))) lo = static_cast<unsigned char>(b);
          }
        }
      } else {
        lo = peek();
        if (lo >= 0x80) return unexpected(error("a class of non-ASCII characters is not supported"));
        ++pos_;
        item.set(lo);
        single = true;
      }
      if (single && pos_ + 1 < text_.size() && peek() == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        unsigned char hi = peek();
        if (hi == '\\') {
          MINFER_ASSIGN_OR_RETURN(auto e, escape());
          if (e.first.count() != 1 || e.second) return unexpected(error("a range that ends in a class"));
          for (int b = 0; b < 256; ++b) {
            if (e.first.test(static_cast<size_t>(b))) hi = static_cast<unsigned char>(b);
          }
        } else {
          if (hi >= 0x80) return unexpected(error("a class of non-ASCII characters is not supported"));
          ++pos_;
        }
        if (hi < lo) return unexpected(error("a range out of order"));
        item = range(lo, hi);
      }
      set |= item;
    }
    if (!more()) return unexpected(error("a '[' not closed"));
    ++pos_;  // ']'
    if (negated) return char_of(~set, !multibyte);
    return char_of(set, multibyte);
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

// Thompson's automaton of a pattern: states with at most one byte move
// each, and moves that take no byte; the builder's output, which
// determinize() turns into the pattern's deterministic automaton.
struct Nfa {
  struct State {
    std::bitset<256> bytes;        // a byte transition: these bytes, to `to`
    int32_t to = -1;
    std::vector<int32_t> epsilon;  // moves that take no byte
    bool accept = false;
  };
  std::vector<State> states;
  std::vector<std::vector<int32_t>> closure;  // each state's epsilon closure: the states that do something, sorted
  int32_t start = 0;
  void close();
};

// Regex trees into states: a fragment is a start and an end state (the end
// has no moves yet).
class PatternBuilder {
 public:
  explicit PatternBuilder(Nfa* p) : p_(p) {}

  struct Frag {
    int32_t start, end;
  };

  Expected<Frag> build(const Regex& r) {
    switch (r.kind) {
      case Regex::Kind::kChar: return character(r);
      case Regex::Kind::kConcat: {
        MINFER_ASSIGN_OR_RETURN(const int32_t start, state());
        Frag f{start, start};
        for (const Regex& part : r.parts) {
          MINFER_ASSIGN_OR_RETURN(const Frag g, build(part));
          link(f.end, g.start);
          f.end = g.end;
        }
        return f;
      }
      case Regex::Kind::kAlt: {
        MINFER_ASSIGN_OR_RETURN(const int32_t start, state());
        MINFER_ASSIGN_OR_RETURN(const int32_t end, state());
        for (const Regex& part : r.parts) {
          MINFER_ASSIGN_OR_RETURN(const Frag g, build(part));
          link(start, g.start);
          link(g.end, end);
        }
        return Frag{start, end};
      }
      case Regex::Kind::kRepeat: return repeat(r.parts[0], r.min, r.max);
    }
    return unexpected(ErrorCode::kInternal, "pattern: an unknown node");
  }

  Expected<int32_t> state() {
    if (static_cast<int>(p_->states.size()) >= StringPattern::kMaxStates) {
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("pattern: more than {} automaton states (a smaller bound or fewer repeats)",
                                    StringPattern::kMaxStates));
    }
    p_->states.emplace_back();
    return static_cast<int32_t>(p_->states.size() - 1);
  }
  void link(int32_t from, int32_t to) { p_->states[static_cast<size_t>(from)].epsilon.push_back(to); }

 private:
  // from --bytes--> to, through a state of its own.
  Status move(int32_t from, const std::bitset<256>& bytes, int32_t to) {
    MINFER_ASSIGN_OR_RETURN(const int32_t s, state());
    p_->states[static_cast<size_t>(s)].bytes = bytes;
    p_->states[static_cast<size_t>(s)].to = to;
    link(from, s);
    return ok_status();
  }

  Expected<Frag> character(const Regex& r) {
    MINFER_ASSIGN_OR_RETURN(const int32_t start, state());
    MINFER_ASSIGN_OR_RETURN(const int32_t end, state());
    if (r.ascii.any()) MINFER_TRY(move(start, r.ascii, end));
    if (r.multibyte) {  // RFC 3629's multi-byte characters: a lead byte, the first continuation's range, how many
      const std::bitset<256> cont = range(0x80, 0xBF);
      const std::tuple<std::bitset<256>, std::bitset<256>, int> forms[] = {
          {range(0xC2, 0xDF), cont, 1},
          {range(0xE0, 0xE0), range(0xA0, 0xBF), 2},
          {range(0xE1, 0xEC) | range(0xEE, 0xEF), cont, 2},
          {range(0xED, 0xED), range(0x80, 0x9F), 2},  // (no surrogates)
          {range(0xF0, 0xF0), range(0x90, 0xBF), 3},
          {range(0xF1, 0xF3), cont, 3},
          {range(0xF4, 0xF4), range(0x80, 0x8F), 3}};  // (nothing past U+10FFFF)
      for (const auto& [lead, first, n] : forms) {
        int32_t at = start;
        std::bitset<256> bytes = lead;
        for (int i = 0; i < n; ++i) {
          MINFER_ASSIGN_OR_RETURN(const int32_t mid, state());
          MINFER_TRY(move(at, bytes, mid));
          at = mid;
          bytes = i == 0 ? first : cont;
        }
        MINFER_TRY(move(at, bytes, end));
      }
    }
    return Frag{start, end};
  }

  // min copies, then max - min optional ones nested (or a loop: no bound).
  Expected<Frag> repeat(const Regex& part, int min, int max) {
    MINFER_ASSIGN_OR_RETURN(const int32_t start, state());
    Frag f{start, start};
    for (int i = 0; i < min; ++i) {
      MINFER_ASSIGN_OR_RETURN(const Frag g, build(part));
      link(f.end, g.start);
      f.end = g.end;
    }
    if (max < 0) {
      MINFER_ASSIGN_OR_RETURN(const Frag g, build(part));
      MINFER_ASSIGN_OR_RETURN(const int32_t end, state());
      link(f.end, g.start);
      link(f.end, end);
      link(g.end, g.start);
      link(g.end, end);
      return Frag{f.start, end};
    }
    MINFER_ASSIGN_OR_RETURN(const int32_t end, state());
    link(f.end, end);
    for (int i = min; i < max; ++i) {  // each optional copy may end the repeat
      MINFER_ASSIGN_OR_RETURN(const Frag g, build(part));
      link(f.end, g.start);
      link(g.end, end);
      f.end = g.end;
    }
    return Frag{f.start, end};
  }

  Nfa* p_;
};

namespace {

// Bytes that every set among `splitters` takes or leaves alike share a class:
// class_of for each byte, and how many classes. UTF-8 continuation bytes
// never share one with other bytes (they begin no character: shortest()).
int byte_classes(std::vector<std::bitset<256>> splitters, std::array<uint16_t, 256>* class_of) {
  splitters.push_back(continuation_bytes());
  class_of->fill(0);
  int n = 1;
  for (const std::bitset<256>& set : splitters) {
    std::map<std::pair<int, bool>, int> renamed;
    for (int b = 0; b < 256; ++b) {
      const auto key = std::make_pair(static_cast<int>((*class_of)[b]), set.test(static_cast<size_t>(b)));
      auto [it, added] = renamed.emplace(key, static_cast<int>(renamed.size()));
      (*class_of)[b] = static_cast<uint16_t>(it->second);
    }
    n = static_cast<int>(renamed.size());
  }
  return n;
}

// A deterministic automaton over byte classes: next[state * n_classes +
// class] is the state after, -1 none.
struct Dfa {
  std::array<uint16_t, 256> class_of{};
  int n_classes = 0;
  std::vector<int32_t> next;
  std::vector<uint8_t> accept;
  int32_t start = 0;
  int32_t n_states() const { return static_cast<int32_t>(accept.size()); }
  int32_t after(int32_t state, int c) const { return next[static_cast<size_t>(state) * n_classes + class_of[c]]; }
};

// Each byte class's lowest byte.
std::vector<int> representatives(const Dfa& d) {
  std::vector<int> first(static_cast<size_t>(d.n_classes), -1);
  for (int c = 255; c >= 0; --c) first[d.class_of[c]] = c;
  return first;
}

Error too_many_states() {
  return Error(ErrorCode::kInvalidArgument, fmt::format("pattern: more than {} automaton states (a smaller bound or fewer repeats)",
                                                        StringPattern::kMaxStates));
}

// The subset construction: a state for each set of Thompson states the
// string can be in (only those reached), at most kMaxStates.
Expected<Dfa> determinize(const Nfa& nfa) {
  Dfa d;
  std::vector<std::bitset<256>> splitters;
  for (const Nfa::State& st : nfa.states) {
    if (st.to >= 0) splitters.push_back(st.bytes);
  }
  d.n_classes = byte_classes(std::move(splitters), &d.class_of);
  const std::vector<int> representative = representatives(d);
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> sets;
  auto intern = [&](std::vector<int32_t> set) -> Expected<int32_t> {
    if (set.empty()) return -1;
    auto [it, added] = ids.emplace(set, static_cast<int32_t>(sets.size()));
    if (added) {
      if (static_cast<int>(sets.size()) >= StringPattern::kMaxStates) return unexpected(too_many_states());
      sets.push_back(std::move(set));
    }
    return it->second;
  };
  MINFER_ASSIGN_OR_RETURN(d.start, intern(nfa.closure[static_cast<size_t>(nfa.start)]));
  for (size_t i = 0; i < sets.size(); ++i) {  // (sets grows as states are found)
    bool accept = false;
    for (const int32_t t : sets[i]) accept = accept || nfa.states[static_cast<size_t>(t)].accept;
    d.accept.push_back(accept ? 1 : 0);
    for (int k = 0; k < d.n_classes; ++k) {
      std::vector<int32_t> to;
      for (const int32_t t : sets[i]) {
        const Nfa::State& st = nfa.states[static_cast<size_t>(t)];
        if (st.to < 0 || !st.bytes.test(static_cast<size_t>(representative[static_cast<size_t>(k)]))) continue;
        const auto& c = nfa.closure[static_cast<size_t>(st.to)];
        to.insert(to.end(), c.begin(), c.end());
      }
      std::sort(to.begin(), to.end());
      to.erase(std::unique(to.begin(), to.end()), to.end());
      MINFER_ASSIGN_OR_RETURN(const int32_t next, intern(std::move(to)));
      d.next.push_back(next);
    }
  }
  return d;
}

// Strings of `a` that `b` also takes (keep) or does not take (!keep): a
// lookahead at the pattern's start. A state pairs a's and b's (b's -1: b
// can take the string no more).
Expected<Dfa> product(const Dfa& a, const Dfa& b, bool keep) {
  Dfa d;
  std::vector<std::bitset<256>> splitters;
  for (const Dfa* x : {&a, &b}) {
    for (int k = 0; k < x->n_classes; ++k) {
      std::bitset<256> set;
      for (int c = 0; c < 256; ++c) set.set(static_cast<size_t>(c), x->class_of[c] == k);
      splitters.push_back(set);
    }
  }
  d.n_classes = byte_classes(std::move(splitters), &d.class_of);
  const std::vector<int> representative = representatives(d);
  std::map<std::pair<int32_t, int32_t>, int32_t> ids;
  std::vector<std::pair<int32_t, int32_t>> pairs;
  auto intern = [&](int32_t x, int32_t y) -> Expected<int32_t> {
    if (x < 0 || (keep && y < 0)) return -1;
    auto [it, added] = ids.emplace(std::make_pair(x, y), static_cast<int32_t>(pairs.size()));
    if (added) {
      if (static_cast<int>(pairs.size()) >= StringPattern::kMaxStates) return unexpected(too_many_states());
      pairs.emplace_back(x, y);
    }
    return it->second;
  };
  MINFER_ASSIGN_OR_RETURN(d.start, intern(a.start, b.start));
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto [x, y] = pairs[i];
    const bool in_b = y >= 0 && b.accept[static_cast<size_t>(y)] != 0;
    d.accept.push_back(a.accept[static_cast<size_t>(x)] != 0 && in_b == keep ? 1 : 0);
    for (int k = 0; k < d.n_classes; ++k) {
      const int c = representative[static_cast<size_t>(k)];
      MINFER_ASSIGN_OR_RETURN(const int32_t next, intern(a.after(x, c), y < 0 ? -1 : b.after(y, c)));
      d.next.push_back(next);
    }
  }
  return d;
}

// The automaton of `body` (a pattern without its anchors): anchored at the
// start (head) or not, at the end (tail) or not (an unanchored side takes
// any characters, as JSON Schema's patterns do).
Expected<Dfa> automaton(std::string_view body, bool head, bool tail) {
  MINFER_ASSIGN_OR_RETURN(Regex parsed, Parser(body).parse());
  Regex whole;
  whole.kind = Regex::Kind::kConcat;
  Regex any;
  any.kind = Regex::Kind::kRepeat;
  any.min = 0;
  any.max = -1;
  any.parts.push_back(char_of(printable_ascii(), true));
  if (!head) whole.parts.push_back(any);
  whole.parts.push_back(std::move(parsed));
  if (!tail) whole.parts.push_back(any);
  Nfa nfa;
  PatternBuilder builder(&nfa);
  MINFER_ASSIGN_OR_RETURN(const PatternBuilder::Frag f, builder.build(whole));
  nfa.start = f.start;
  nfa.states[static_cast<size_t>(f.end)].accept = true;
  nfa.close();
  return determinize(nfa);
}

// Walks `text`'s characters outside escapes and classes, calling
// visit(c, depth) (depth: the groups open around c; a ')' closes its own
// first) until it returns true: that character's index, or npos.
template <class Visit>
size_t walk_groups(std::string_view text, Visit visit) {
  int depth = 0;
  bool in_class = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      ++i;
      continue;
    }
    if (in_class || c == '[') {
      in_class = c == '[' || c != ']';
      continue;
    }
    if (c == ')') --depth;
    if (visit(c, depth)) return i;
    if (c == '(') ++depth;
  }
  return std::string_view::npos;
}

// Whether `body` has an unescaped '$' as its last character.
bool ends_anchored(std::string_view body) {
  return !body.empty() && body.back() == '$' && (body.size() < 2 || body[body.size() - 2] != '\\');
}

}  // namespace

Expected<std::shared_ptr<const StringPattern>> StringPattern::compile(std::string_view regex) {
  // A schema's patterns and formats come again with every request that sends
  // it (a uri's automaton takes ~2 ms to build): the last kCached built are
  // kept, all dropped when the cache is full.
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const StringPattern>, std::less<>> cache;
  {
    std::lock_guard lock(mutex);
    if (auto it = cache.find(regex); it != cache.end()) return it->second;
  }
  MINFER_ASSIGN_OR_RETURN(std::shared_ptr<const StringPattern> built, build(regex));
  std::lock_guard lock(mutex);
  if (cache.size() >= kCached) cache.clear();
  cache.emplace(std::string(regex), built);
  return built;
}

Expected<std::shared_ptr<const StringPattern>> StringPattern::build(std::string_view regex) {
  // JSON Schema's patterns are not anchored: an unanchored side takes any
  // characters. An anchor belongs to the whole pattern only without a
  // top-level '|'.
  const bool head = !regex.empty() && regex.front() == '^';
  std::string_view body = regex.substr(head ? 1 : 0);
  // Lookaheads where the string starts ((?!R) or (?=R), as Pydantic's
  // Decimal pattern has): the string must not (or must) begin with a match
  // of R — match it whole with R's own '$'.
  std::vector<std::pair<std::string_view, bool>> lookaheads;  // (R, keep)
  while (head && (body.substr(0, 3) == "(?!" || body.substr(0, 3) == "(?=")) {
    const size_t end = walk_groups(body, [](char c, int depth) { return c == ')' && depth == 0; });
    if (end == std::string_view::npos) return unexpected(ErrorCode::kInvalidArgument, "pattern: a lookahead not closed");
    std::string_view inner = body.substr(3, end - 3);
    if (!inner.empty() && inner.front() == '^') inner.remove_prefix(1);
    lookaheads.emplace_back(inner, body[2] == '=');
    body.remove_prefix(end + 1);
  }
  const bool tail = ends_anchored(body);
  if (tail) body.remove_suffix(1);
  const bool top_alt = walk_groups(body, [](char c, int depth) { return c == '|' && depth == 0; }) != std::string_view::npos;
  if (top_alt && (head || tail)) {
    return unexpected(ErrorCode::kInvalidArgument,
                      "pattern: anchors around a top-level '|' are not supported (write ^(a|b)$)");
  }
  MINFER_ASSIGN_OR_RETURN(Dfa d, automaton(body, head, tail));
  for (const auto& [inner, keep] : lookaheads) {
    const bool whole = ends_anchored(inner);
    MINFER_ASSIGN_OR_RETURN(const Dfa look, automaton(whole ? inner.substr(0, inner.size() - 1) : inner, true, whole));
    MINFER_ASSIGN_OR_RETURN(d, product(d, look, keep));
  }
  std::shared_ptr<StringPattern> p(new StringPattern());
  p->class_of_ = d.class_of;
  p->n_classes_ = d.n_classes;
  p->next_ = std::move(d.next);
  p->accept_ = std::move(d.accept);
  p->start_ = d.start;
  p->measure();
  // No move into a state from which the string cannot end (a lookahead can
  // make them: ^(?!ab) after "ab"), so that such a byte is refused when it
  // comes, not the string's end.
  if (p->shortest(p->start_) == INT32_MAX) {
    return unexpected(ErrorCode::kInvalidArgument, "pattern: no string matches it");
  }
  for (int32_t& to : p->next_) {
    if (to >= 0 && p->shortest(to) == INT32_MAX) to = -1;
  }
  p->measure_longest();
  return std::shared_ptr<const StringPattern>(std::move(p));
}

namespace {

// The formats' expressions, after the grammars their RFCs give (RFC 3339's
// appendix A for durations, RFC 3986's appendix A for addresses and URIs,
// RFC 1123 for host names, RFC 5321 for mailboxes).
std::string group(const std::string& s) { return "(" + s + ")"; }

std::string ipv4() {
  const std::string octet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";  // no leading zeros
  return "(" + octet + "\\.){3}" + octet;
}

// RFC 3986's IPv6address: eight groups of 1-4 hex digits, the last two maybe
// an IPv4 address, one run of zero groups maybe written "::".
std::string ipv6() {
  const std::string h = "[0-9a-fA-F]{1,4}", hc = "(" + h + ":)", ls32 = group(h + ":" + h + "|" + ipv4());
  auto before = [&](int n) { return n == 0 ? group(h) + "?" : group(hc + "{0," + std::to_string(n) + "}" + h) + "?"; };
  const std::string forms[] = {hc + "{6}" + ls32,
                               "::" + hc + "{5}" + ls32,
                               before(0) + "::" + hc + "{4}" + ls32,
                               before(1) + "::" + hc + "{3}" + ls32,
                               before(2) + "::" + hc + "{2}" + ls32,
                               before(3) + "::" + h + ":" + ls32,
                               before(4) + "::" + ls32,
                               before(5) + "::" + h,
                               before(6) + "::"};
  std::string any;
  for (const std::string& f : forms) any += (any.empty() ? "" : "|") + f;
  return group(any);
}

// A DNS label: 1-63 letters, digits and hyphens, a letter or digit at each end.
constexpr std::string_view kLabel = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";

// RFC 3986's URI: scheme ":" hier-part ["?" query] ["#" fragment], the
// authority's host a name, an IPv4 address or an IPv6 one in brackets.
std::string uri() {
  const std::string pct = "%[0-9A-Fa-f]{2}";
  auto of = [&](const std::string& chars) { return group("[A-Za-z0-9._~!$&'()*+,;=" + chars + "-]|" + pct); };
  const std::string pchar = of(":@"), segment = pchar + "*";
  const std::string authority = group(of(":") + "*@") + "?" + group("\\[" + ipv6() + "\\]|" + of("") + "*") + "(:[0-9]*)?";
  const std::string hier = group("//" + authority + "(/" + segment + ")*|/(" + pchar + "+(/" + segment + ")*)?|" + pchar +
                                 "+(/" + segment + ")*|");
  return "[A-Za-z][A-Za-z0-9+.-]*:" + hier + "(\\?" + of(":@/?") + "*)?(#" + of(":@/?") + "*)?";
}

// RFC 3339's full-date: years 0001-9999 (Python's), each month's days, the
// 29th of February in leap years only.
std::string date() {
  const std::string year = "([0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)";
  const std::string leap = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)";
  return "(" + year + "-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))|" +
         leap + "-02-29)";
}

// RFC 3339's duration: P and years, months, days (or weeks), then T and
// hours, minutes, seconds, each part after the ones before it; each number
// of at most six digits.
std::string duration() {
  const std::string n = "[0-9]{1,6}";  // (Pydantic refuses some longer ones: PT99999999H)
  const std::string time = "T(" + n + "H(" + n + "M(" + n + "S)?)?|" + n + "M(" + n + "S)?|" + n + "S)";
  const std::string date = "(" + n + "D|" + n + "M(" + n + "D)?|" + n + "Y(" + n + "M(" + n + "D)?)?)";
  return "P(" + date + "(" + time + ")?|" + time + "|" + n + "W)";
}

}  // namespace

Expected<std::shared_ptr<const StringPattern>> StringPattern::format(std::string_view name) {
  static constexpr std::string_view kTime =
      "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
  static constexpr std::string_view kHex4 = "[0-9a-fA-F]{4}";
  // RFC 5321's mailbox without its quoted local parts and address literals
  // (which a string without escapes could not hold anyway), and with a dot
  // in the domain, as mail validators ask.
  static constexpr std::string_view kAtext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
  if (name == "date") return compile("^" + date() + "$");
  if (name == "time") return compile(fmt::format("^{}$", kTime));
  if (name == "date-time") return compile(fmt::format("^{}T{}$", date(), kTime));
  if (name == "uuid") return compile(fmt::format("^{0}{0}-{0}-{0}-{0}-{0}{0}{0}$", kHex4));
  if (name == "duration") return compile("^" + duration() + "$");
  if (name == "ipv4") return compile("^" + ipv4() + "$");
  if (name == "ipv6") return compile("^" + ipv6() + "$");
  // Pydantic's own: IPvAnyAddress, and IPv4Interface, IPv6Interface,
  // IPvAnyInterface written as an address and its prefix length.
  const std::string v4_prefix = ipv4() + "/(3[0-2]|[12]?[0-9])", v6_prefix = ipv6() + "/(12[0-8]|1[01][0-9]|[1-9]?[0-9])";
  if (name == "ipvanyaddress") return compile("^(" + ipv4() + "|" + ipv6() + ")$");
  if (name == "ipv4interface") return compile("^" + v4_prefix + "$");
  if (name == "ipv6interface") return compile("^" + v6_prefix + "$");
  if (name == "ipvanyinterface") return compile("^(" + v4_prefix + "|" + v6_prefix + ")$");
  if (name == "hostname") return compile(fmt::format("^{0}(\\.{0})*$", kLabel));
  if (name == "email") return compile(fmt::format("^{0}(\\.{0})*@{1}(\\.{1})+$", kAtext, kLabel));
  if (name == "uri") return compile("^" + uri() + "$");
  return unexpected(ErrorCode::kInvalidArgument,
                    fmt::format("format '{}' is not supported (date, time, date-time, duration, email, hostname, ipv4, "
                                "ipv6, uri and uuid are, and Pydantic's ipvanyaddress and ip*interface)",
                                name));
}

void Nfa::close() {
  closure.assign(states.size(), {});
  std::vector<int32_t> stack;
  std::vector<int32_t> seen_from(states.size(), -1);  // the walk that last reached each state
  for (size_t s = 0; s < states.size(); ++s) {
    const int32_t walk = static_cast<int32_t>(s);
    stack.assign(1, walk);
    seen_from[s] = walk;
    while (!stack.empty()) {
      const int32_t at = stack.back();
      stack.pop_back();
      const State& st = states[static_cast<size_t>(at)];
      if (st.to >= 0 || st.accept) closure[s].push_back(at);  // only the states that do something
      for (const int32_t e : st.epsilon) {
        if (seen_from[static_cast<size_t>(e)] != walk) {
          seen_from[static_cast<size_t>(e)] = walk;
          stack.push_back(e);
        }
      }
    }
    std::sort(closure[s].begin(), closure[s].end());
  }
}

// For each byte class, 1 if its bytes begin a character, 0 if they are UTF-8
// continuation bytes (byte_classes never mixes the two).
std::vector<int> StringPattern::class_begins() const {
  std::vector<int> begins(static_cast<size_t>(n_classes_), 0);
  for (int c = 0; c < 256; ++c) begins[class_of_[c]] = (c & 0xC0) != 0x80 ? 1 : 0;
  return begins;
}

// shortest_: 0 where the string may end, else the fewest characters of a
// way there (a 0-1 walk back from the accepting states: a byte that can
// begin a character costs one, a UTF-8 continuation byte none; the classes
// never mix the two).
void StringPattern::measure() {
  const size_t n = accept_.size();
  const std::vector<int> begins = class_begins();
  std::vector<std::vector<std::pair<int32_t, int32_t>>> into(n);  // (from, cost) of each move into a state
  shortest_.assign(n, INT32_MAX);
  std::deque<int32_t> walk;
  for (size_t s = 0; s < n; ++s) {
    if (accept_[s] != 0) {
      shortest_[s] = 0;
      walk.push_back(static_cast<int32_t>(s));
    }
    for (int k = 0; k < n_classes_; ++k) {
      const int32_t to = next_[s * static_cast<size_t>(n_classes_) + static_cast<size_t>(k)];
      if (to >= 0) into[static_cast<size_t>(to)].emplace_back(static_cast<int32_t>(s), begins[static_cast<size_t>(k)]);
    }
  }
  while (!walk.empty()) {
    const int32_t at = walk.front();
    walk.pop_front();
    for (const auto& [from, cost] : into[static_cast<size_t>(at)]) {
      const int32_t d = shortest_[static_cast<size_t>(at)] + cost;
      if (d >= shortest_[static_cast<size_t>(from)]) continue;
      shortest_[static_cast<size_t>(from)] = d;
      if (cost == 0) {
        walk.push_front(from);
      } else {
        walk.push_back(from);
      }
    }
  }
}

// longest_: over the states left (every one of which can end), the most
// characters to an end: a walk depth first, each state once; a state that
// reaches a loop has no bound.
void StringPattern::measure_longest() {
  const size_t n = accept_.size();
  const std::vector<int> begins = class_begins();
  enum : uint8_t { kNew, kOpen, kDone };
  std::vector<uint8_t> mark(n, kNew);
  longest_.assign(n, 0);
  std::vector<std::pair<int32_t, int>> stack;  // (state, the next class to look at)
  for (size_t root = 0; root < n; ++root) {
    if (mark[root] != kNew) continue;
    stack.emplace_back(static_cast<int32_t>(root), 0);
    mark[root] = kOpen;
    while (!stack.empty()) {
      auto& [s, k] = stack.back();
      const size_t at = static_cast<size_t>(s);
      if (k == n_classes_) {
        mark[at] = kDone;
        stack.pop_back();
        continue;
      }
      const int cls = k++;
      const int32_t to = next_[at * static_cast<size_t>(n_classes_) + static_cast<size_t>(cls)];
      if (to < 0) continue;
      if (mark[static_cast<size_t>(to)] == kNew) {
        k = cls;  // come back to this class once `to` is measured (before the push moves the stack)
        mark[static_cast<size_t>(to)] = kOpen;
        stack.emplace_back(to, 0);
        continue;
      }
      const int32_t after = mark[static_cast<size_t>(to)] == kOpen ? INT32_MAX : longest_[static_cast<size_t>(to)];
      const int32_t via = after == INT32_MAX ? INT32_MAX : after + begins[static_cast<size_t>(cls)];
      longest_[at] = std::max(longest_[at], via);
    }
  }
}

}  // namespace minfer
