#include "engine/chat/reply_parser.h"

namespace minfer {

ReplyParser::ReplyParser(const Options& options) {
  if (options.reasoning) reasoning_.emplace();
  if (options.tools != ToolStyle::kNone) tools_.emplace(options.tools, options.forced_call);
}

void ReplyParser::take(std::vector<ToolCallStream::Event> events, std::vector<Event>& out) {
  for (ToolCallStream::Event& e : events) {
    if (e.call) {
      out.push_back(Event{Event::Kind::kCall, "", std::move(e.call)});
    } else {
      out.push_back(Event{Event::Kind::kText, std::move(e.text), std::nullopt});
    }
  }
}

void ReplyParser::content(std::string_view text, std::vector<Event>& out) {
  if (tools_) return take(tools_->feed(text), out);
  if (!text.empty()) out.push_back(Event{Event::Kind::kText, std::string(text), std::nullopt});
}

void ReplyParser::take(std::vector<ReasoningStream::Piece> pieces, std::vector<Event>& out) {
  for (ReasoningStream::Piece& p : pieces) {
    if (p.reasoning) {
      out.push_back(Event{Event::Kind::kReasoning, std::move(p.text), std::nullopt});
    } else {
      content(p.text, out);
    }
  }
}

std::vector<ReplyParser::Event> ReplyParser::feed(std::string_view piece) {
  std::vector<Event> out;
  if (reasoning_) {
    take(reasoning_->feed(piece), out);
  } else {
    content(piece, out);
  }
  return out;
}

std::vector<ReplyParser::Event> ReplyParser::finish(bool at_closer) {
  std::vector<Event> out;
  if (reasoning_) take(reasoning_->finish(), out);
  if (tools_) take(tools_->finish(at_closer), out);
  return out;
}

}  // namespace minfer
