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
// a quote, a backslash or a control character. Lookaheads are taken where
// the string starts (^(?!R)... or ^(?=R)...: the string does not, or does,
// begin with a match of R; R's own $ makes it a whole match), as Pydantic's
// Decimal pattern has one. Anything else (other lookaround, backreferences,
// lazy quantifiers, \b, classes of non-ASCII characters) is refused with
// its place in the pattern.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
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
  // duration of at most six digits), email (RFC 5321's mailbox: an unquoted
  // local part, a domain name with a dot), hostname (RFC 1123), ipv4, ipv6 and uri (RFC 3986: a scheme, then an
  // authority and path, a query, a fragment; no IPvFuture hosts) and uuid;
  // and Pydantic's ipvanyaddress and ip*interface. Each is exactly its
  // grammar but where it says otherwise.
  static Expected<std::shared_ptr<const StringPattern>> format(std::string_view name);

  // The most states an automaton may have (Thompson's while it is built, and
  // the deterministic one the string walks).
  static constexpr int kMaxStates = 4096;
  // Patterns kept built for the requests after (compile()).
  static constexpr size_t kCached = 64;

  int32_t start() const { return start_; }
  // The state after byte `c` from `state`; -1 when the pattern cannot take it.
  int32_t next(int32_t state, unsigned char c) const {
    return next_[static_cast<size_t>(state) * static_cast<size_t>(n_classes_) + class_of_[c]];
  }
  // Whether the string may end in `state`.
  bool accepting(int32_t state) const { return accept_[static_cast<size_t>(state)] != 0; }
  // The fewest characters from `state` to an end (0: accepting), so that a
  // string held to a length too can refuse a character after which the
  // pattern could not end in time.
  int32_t shortest(int32_t state) const { return shortest_[static_cast<size_t>(state)]; }
  // The most characters from `state` to an end (INT32_MAX: no bound), so
  // that a string held to a minLength can refuse one after which the
  // pattern must end too soon.
  int32_t longest(int32_t state) const { return longest_[static_cast<size_t>(state)]; }

 private:
  StringPattern() = default;
  static Expected<std::shared_ptr<const StringPattern>> build(std::string_view regex);
  std::vector<int> class_begins() const;
  void measure();          // fills shortest_
  void measure_longest();  // fills longest_ (once the states that cannot end are cut off)

  // A deterministic automaton (the pattern's Thompson automaton through the
  // subset construction, times its lookaheads'), over classes of bytes that
  // every state treats alike: one state a string, whatever the pattern's
  // alternatives.
  std::array<uint16_t, 256> class_of_{};
  int32_t n_classes_ = 0;
  std::vector<int32_t> next_;  // [state * n_classes_ + class]: the state after, -1 none
  std::vector<uint8_t> accept_;
  std::vector<int32_t> shortest_, longest_;
  int32_t start_ = 0;
};

}  // namespace minfer
