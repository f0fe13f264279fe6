// What a constrained reply may be, asked token by token by the host's pick
// (engine/scheduler/host_pick.h): a JSON value of a schema (JSON mode,
// structured output, a forced tool call), or free text in which tool calls,
// once the model opens one, are held to their schema (tool_choice "auto").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "engine/sampling/json_schema.h"

namespace minfer {

class OutputConstraint {
 public:
  virtual ~OutputConstraint() = default;
  // Anything may come next: the pick need not ask (accepts() would say yes).
  virtual bool unconstrained() const { return false; }
  // A token with these bytes may come next.
  virtual bool accepts(std::string_view bytes) const = 0;
  // A token without bytes (the end of text, a control token) may come next.
  virtual bool accepts_end() const = 0;
  virtual void advance(std::string_view bytes) = 0;
  // The reply is done: generation ends (finish "stop").
  virtual bool complete() const = 0;
};

// The reply is one value of the schema, then nothing.
std::unique_ptr<OutputConstraint> json_value_constraint(std::shared_ptr<const JsonSchema> schema);

// Free text with tool calls held to `call_schema` once they open:
//   kBlocks      (Qwen) "<tool_call>", whitespace, the call's JSON,
//                whitespace, "</tool_call>", then free text again; the
//                reply ends as free text does.
//   kWholeReply  (Llama) a reply that starts (after whitespace) with "{" and
//                "\"name\"" is the call's JSON, after which only whitespace or
//                the end may come (the reply is then complete); any other
//                reply, a JSON answer of the model's own too, is free.
// A token that opens a block and carries bytes the call cannot start with
// leaves the block unheld (text, as the stream will read it).
enum class CallShape { kBlocks, kWholeReply };
std::unique_ptr<OutputConstraint> tool_call_constraint(std::shared_ptr<const JsonSchema> call_schema, CallShape shape);

}  // namespace minfer
