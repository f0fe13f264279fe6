#include "engine/scheduler/line_limits.h"

namespace minfer {

std::string LineLimits::push(std::string_view text, double elapsed_ms) {
  if (stopped_) return {};
  for (size_t i = 0; min_indent_ > 0 && i < text.size(); ++i) {
    const char c = text[i];
    if (line_blanks_ >= 0) {
      if (c == ' ' || c == '\t') {
        ++line_blanks_;
        continue;
      }
      if (line_blanks_ < min_indent_) {
        stopped_ = true;
        return std::string(text.substr(0, i));
      }
      line_blanks_ = -1;
    }
    if (c == '\n') line_blanks_ = 0;
  }
  if (max_ms_ > 0 && elapsed_ms > max_ms_ && text.find('\n') != std::string_view::npos) stopped_ = true;
  return std::string(text);
}

}  // namespace minfer
