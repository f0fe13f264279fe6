// Where an editor's completion stops at a line: llama.cpp's /infill limits
// (its server's process_token), n_indent and t_max_predict_ms, which
// llama.vim and llama.vscode send. Stop strings are StopMatcher's; this sits
// before it on the generated text.
//
// The indentation rule needs no text held back: what it cuts starts at a
// line's first character that is not a blank, and that character decides
// the line the moment it arrives, so nothing it cuts is ever emitted.
// (llama.cpp checks a line a token or two after it starts, and streams what
// it then cuts; the cut itself is the same.)
#pragma once

#include <string>
#include <string_view>

namespace minfer {

class LineLimits {
 public:
  // min_indent: each line after a generated newline needs at least this
  // many leading blanks (spaces and tabs, one each); the first line with
  // fewer ends generation just before its first other character — a newline
  // too, so an empty line ends it, as in llama.cpp. The first line, which
  // goes on from the cursor, is never checked. 0: off.
  // max_ms: text with a newline that arrives more than this many ms after
  // generation began ends generation after that text, so the completion ends
  // with a whole line (llama.cpp's "stop after a certain time limit, but only
  // upon another new line"). 0: off.
  LineLimits(int min_indent, int max_ms) : min_indent_(min_indent), max_ms_(max_ms) {}

  // Adds a token's text, `elapsed_ms` after generation began (the caller's
  // clock); returns what may be emitted: all of it, or what precedes the
  // first character of a line indented too little.
  std::string push(std::string_view text, double elapsed_ms);
  // True once either limit ended generation; later pushes return nothing.
  bool stopped() const { return stopped_; }

 private:
  int min_indent_;
  int max_ms_;
  // The leading blanks of the line being checked so far; -1 while no line
  // is being checked (the first line, or one whose first other character
  // came).
  int line_blanks_ = -1;
  bool stopped_ = false;
};

}  // namespace minfer
