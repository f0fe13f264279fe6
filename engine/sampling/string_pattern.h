// What structured output holds a string's characters to: a JSON Schema
// "pattern" (a regular expression in a subset) or a "format" (date, time,
// date-time, duration, email, hostname, ipv4, ipv6, uri, uuid, and
// Pydantic's ipvanyaddress and ip*interface), compiled to a byte automaton (Thompson's construction)
// that the string's frame walks one byte at a time (json_schema.cpp).
//
// The subset: literal characters (a metacharacter escaped with a backslash),
// classes [a-z0-9_] and [^...] of ASCII characters, \d \w \s and their
// negations, "." (any character but a line break), groups (...) and (?:...),
// alternation |, quantifiers ? * + {n} {n,} {n,m} (a bound at most 100),
// and the anchors ^ at the start and $ at the end. As JSON Schema says, a
// pattern not anchored matches anywhere in the string: an unanchored side
// takes any characters. Characters are UTF-8: "." and a negated class take a
// whole multi-byte character. The string is matched as written between its
// quotes, with no escapes: a string held to a pattern or format cannot hold
// a quote, a backslash or a control character. Anything else (lookaround,
// backreferences, lazy quantifiers, \b, classes of non-ASCII characters) is
// refused with its place in the pattern.
#pragma once

#include <bitset>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/expected.h"

namespace minfer {

class StringPattern {
 public:
  static Expected<std::shared_ptr<const StringPattern>> compile(std::string_view regex);
  // A JSON Schema "format" this automaton can hold: date, time, date-time
  // and duration (RFC 3339: 2024-05-31, 12:30:00Z, 2024-05-31T12:30:00.5+02:00,
  // P1Y2M3DT4H; what Python and Pydantic read too: years from 0001, each
  // month's days and leap years' 29 February, no leap second, numbers of a
  // duration of at most six digits), email (RFC 5321's mailbox: an unquoted local part, a domain
  // name with a dot), hostname (RFC 1123's labels, their length not held),
  // ipv4, ipv6 and uri (RFC 3986: a scheme, then an authority and path, a
  // query, a fragment; no IPvFuture hosts) and uuid. Each is exactly its
  // grammar but where it says otherwise.
  static Expected<std::shared_ptr<const StringPattern>> format(std::string_view name);

  static constexpr int kMaxStates = 4096;

  int32_t start() const { return start_; }
  // The states after byte `c` from `state` (appended to `next`).
  void step(int32_t state, unsigned char c, std::vector<int32_t>* next) const;
  // Whether the string may end in `state`.
  bool accepting(int32_t state) const;
  // The fewest characters from `state` to an end (0: accepting), so that a
  // string held to a length too can refuse a character after which the
  // pattern could not end in time.
  int32_t shortest(int32_t state) const { return shortest_[static_cast<size_t>(state)]; }

  struct State {
    std::bitset<256> bytes;            // a byte transition: these bytes, to `to`
    int32_t to = -1;
    std::vector<int32_t> epsilon;      // moves that take no byte
    bool accept = false;
  };

 private:
  StringPattern() = default;
  void close();    // fills closure_
  void measure();  // fills shortest_, from closure_
  std::vector<State> states_;
  std::vector<std::vector<int32_t>> closure_;  // each state's epsilon closure
  std::vector<int32_t> shortest_;              // shortest(state)
  int32_t start_ = 0;
  friend class PatternBuilder;
};

}  // namespace minfer
