// Tool calls in a model's reply: the <tool_call> blocks Qwen-style templates
// teach the model to write (ChatTemplate::tool_style), taken out of the text
// as they stream, and the schema that holds a forced call to the declared
// tools.
//
// A block is "<tool_call>", a JSON object {"name": string, "arguments":
// object} ("parameters" is read as "arguments"; arguments written as a JSON
// string are taken when the string holds an object), and "</tool_call>".
// Whitespace next to a call is not content. A block whose JSON is not such
// an object stays in the text as it was written, so nothing the model wrote
// is lost.
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

  // `inside_call`: the prompt ended with the opener (a forced call), so the
  // reply starts inside a block.
  explicit ToolCallStream(bool inside_call = false);

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

  bool in_block_ = false;
  bool after_call_ = false;  // leading whitespace is dropped
  std::string held_;         // outside a block: text not yet passed on
  std::string block_;        // inside a block: what follows the opener
  std::string space_before_block_;
  int calls_ = 0;
};

// A finished reply split into its content (the text outside the calls) and
// the calls, as the stream would pass them on.
struct ToolReply {
  std::string content;
  std::vector<ToolCall> calls;
};
ToolReply parse_tool_calls(std::string_view text, bool inside_call = false, bool close_open = false);

// The JSON one call may be, for a forced call: {"name": one of the tools'
// names (or `only_name`), "arguments": that tool's parameters schema (any
// object where it has none)}. `tools` are the declared tools' JSON texts;
// an error names the tool and the schema keyword that cannot be held to.
Expected<std::shared_ptr<const JsonSchema>> compile_tool_call_schema(const std::vector<std::string>& tools,
                                                                     std::string_view only_name = {});

}  // namespace minfer
