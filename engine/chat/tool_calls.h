// Tool calls in a model's reply, as its template teaches it to write them
// (ChatTemplate::tool_style), taken out of the text as they stream, and the
// schema that holds a forced call to the declared tools.
//
// A call is a JSON object {"name": string, "arguments": object}
// ("parameters" is read as "arguments"; arguments written as a JSON string
// are taken when the string holds an object). Qwen's templates put each in a
// block, "<tool_call>" … "</tool_call>", anywhere in the reply; whitespace
// next to a call is not content. Llama's make the whole reply one call
// (after an optional "<|python_tag|>"): a reply that starts with "{" is held
// back until it ends. Text that looks like a call but is not one (bad JSON,
// no name) stays in the content as it was written, so nothing the model
// wrote is lost.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/common/expected.h"

namespace minfer {

class JsonSchema;

class ToolCallStream {
 public:
  // One thing to pass on, in order: text, or a call (its id left empty).
  struct Event {
    std::string text;
    std::optional<ToolCall> call;
  };

  // `inside_call`: a forced call — the prompt ended with the opener, so the
  // reply starts inside a block (Qwen), or is the call (Llama).
  explicit ToolCallStream(ToolStyle style = ToolStyle::kQwen25, bool inside_call = false);

  // A piece of the reply; text that may still turn out to open a block (or
  // is whitespace that may end up next to one) is held back.
  std::vector<Event> feed(std::string_view piece);
  // The reply ended. `close_open`: it ended at the end of a call (a stop at
  // "</tool_call>", or a forced call whose JSON completed), so an open block
  // is parsed as a call; otherwise it is text.
  std::vector<Event> finish(bool close_open);

  int calls() const { return calls_; }

 private:
  void close_block(std::string_view inner, bool closed, std::vector<Event>& out);
  void emit_text(std::string text, std::vector<Event>& out);
  std::vector<Event> feed_whole_reply(std::string_view piece);
  std::vector<Event> finish_whole_reply();

  // Llama: is the reply (still possibly) a call, surely text, or held as one?
  enum class Reply { kUndecided, kText, kCall };
  bool whole_reply_ = false;
  Reply reply_ = Reply::kUndecided;

  bool in_block_ = false;
  bool after_call_ = false;  // leading whitespace is dropped
  std::string held_;         // outside a block: text not yet passed on
  std::string block_;        // inside a block: what follows the opener
  std::string space_before_block_;
  bool block_from_prompt_ = false;  // the open block's opener was the prompt's (a forced call)
  int calls_ = 0;
};

// A finished reply split into its content (the text outside the calls) and
// the calls, as the stream would pass them on.
struct ToolReply {
  std::string content;
  std::vector<ToolCall> calls;
};
ToolReply parse_tool_calls(std::string_view text, ToolStyle style = ToolStyle::kQwen25, bool inside_call = false,
                           bool close_open = false);

// The key a style's calls carry their arguments under: "arguments" (Qwen),
// "parameters" (Llama).
std::string_view tool_arguments_key(ToolStyle style);

// The JSON one call may be, for a forced call: {"name": one of the tools'
// names (or `only_name`), `arguments_key`: that tool's parameters schema
// (any object where it has none)}. `tools` are the declared tools' JSON
// texts; an error names the tool and the schema keyword that cannot be held to.
Expected<std::shared_ptr<const JsonSchema>> compile_tool_call_schema(const std::vector<std::string>& tools,
                                                                     std::string_view only_name = {},
                                                                     std::string_view arguments_key = "arguments");

}  // namespace minfer
