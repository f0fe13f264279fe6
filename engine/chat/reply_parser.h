// A chat reply taken apart as it streams: a thinking model's reasoning
// (reasoning.h) and, in the answer, tool calls (tool_calls.h). What minferd
// streams and returns as reasoning_content, content and tool_calls.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/reasoning.h"
#include "engine/chat/tool_calls.h"

namespace minfer {

class ReplyParser {
 public:
  struct Event {
    enum class Kind { kText, kReasoning, kCall };
    Kind kind = Kind::kText;
    std::string text;         // kText, kReasoning
    std::optional<ToolCall> call;  // kCall
  };
  struct Options {
    bool reasoning = false;  // the template thinks and the reasoning goes apart
    ToolStyle tools = ToolStyle::kNone;  // calls are looked for (kNone: not)
    bool forced_call = false;  // the prompt opened a call
  };

  explicit ReplyParser(const Options& options);
  // Anything to take apart at all (else the text is the content as it is).
  bool active() const { return reasoning_.has_value() || tools_.has_value(); }

  std::vector<Event> feed(std::string_view piece);
  // `at_closer`: the reply stopped where a call closes (ToolCallStream::finish).
  std::vector<Event> finish(bool at_closer);

 private:
  void content(std::string_view text, std::vector<Event>& out);
  void take(std::vector<ReasoningStream::Piece> pieces, std::vector<Event>& out);
  void take(std::vector<ToolCallStream::Event> events, std::vector<Event>& out);

  std::optional<ReasoningStream> reasoning_;
  std::optional<ToolCallStream> tools_;
};

}  // namespace minfer
