// LineLimits: llama.cpp's n_indent and t_max_predict_ms on pieces of text,
// with the elapsed time given (the generation loop's clock), so that the
// time limit is checked without waiting on a real one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/scheduler/line_limits.h"

namespace minfer {
namespace {

// A piece of generated text, when it came, and what may be emitted of it.
struct Piece {
  std::string text;
  double elapsed_ms;
  std::string out;
};

struct Case {
  const char* what;
  int min_indent, max_ms;
  std::vector<Piece> pieces;
  bool stopped;  // after the last piece
};

const Case kCases[] = {
    {"the first line goes on from the cursor: never checked", 4, 0, {{"x = 1", 0, "x = 1"}}, false},
    {"tabs count one each; a line is decided by its first other character, across pieces",
     4,
     0,
     {{"x\n    y", 0, "x\n    y"}, {" = 2\n\t\t", 0, " = 2\n\t\t"}, {"\t ", 0, "\t "}, {"z\n", 0, "z\n"}},
     false},
    {"a line indented too little loses its first other character and what follows; the newline "
     "and blanks stay",
     4,
     0,
     {{"x\n    y\n", 0, "x\n    y\n"}, {"  return 3\n", 0, "  "}, {"    more", 0, ""}},
     true},
    {"every line of one piece is checked", 2, 0, {{"a\n  b\n  c\nd\n  e", 0, "a\n  b\n  c\n"}}, true},
    {"an empty line ends it, as in llama.cpp: a newline is a line's first other character too",
     1,
     0,
     {{"a\n b\n\n c", 0, "a\n b\n"}},
     true},
    {"blanks before that newline count as any", 1, 0, {{"a\n \n c", 0, "a\n \n c"}}, false},
    {"past the time limit, the first piece with a newline ends it, kept whole",
     0,
     100,
     {{"a\n", 50, "a\n"}, {"b", 150, "b"}, {"c\n  d", 160, "c\n  d"}, {"e\n", 170, ""}},
     true},
    {"the limit is exceeded, not reached (llama.cpp's >)", 0, 100, {{"\n", 100, "\n"}}, false},
    {"with both, a line indented too little is cut, past the time or not", 2, 10, {{"a\nb\n", 20, "a\n"}}, true},
    {"off: everything passes", 0, 0, {{"a\nb\n\n", 1e9, "a\nb\n\n"}}, false},
};

TEST(LineLimits, CutsAndStopsAsLlamaCpp) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.what);
    LineLimits m(c.min_indent, c.max_ms);
    for (const Piece& p : c.pieces) EXPECT_EQ(m.push(p.text, p.elapsed_ms), p.out) << p.text;
    EXPECT_EQ(m.stopped(), c.stopped);
  }
}

}  // namespace
}  // namespace minfer
