#include "engine/sampling/output_constraint.h"

#include <optional>

namespace minfer {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kNameKey = "\"name\"";  // what a Llama call starts with, after its brace
constexpr int kMaxSpace = JsonSchemaGrammar::kMaxIndent + 2;  // around a call: a newline and an indent, at most

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

class JsonValue final : public OutputConstraint {
 public:
  explicit JsonValue(std::shared_ptr<const JsonSchema> schema) : grammar_(std::move(schema)) {}
  bool accepts(std::string_view bytes) const override { return grammar_.accepts(bytes); }
  bool accepts_end() const override { return false; }
  void advance(std::string_view bytes) override { grammar_.advance(bytes); }
  bool complete() const override { return grammar_.complete(); }

 private:
  JsonSchemaGrammar grammar_;
};

class ToolCalls final : public OutputConstraint {
 public:
  ToolCalls(std::shared_ptr<const JsonSchema> schema, CallShape shape)
      : schema_(std::move(schema)), shape_(shape), phase_(shape == CallShape::kBlocks ? kFree : kStart) {}

  // (kStart and kTrigger are free: a reply that is not a call may be anything.)
  bool unconstrained() const override {
    return phase_ == kFree || phase_ == kFreeForever || phase_ == kStart || phase_ == kTrigger;
  }
  bool accepts(std::string_view bytes) const override {
    if (unconstrained()) return true;
    ToolCalls copy = *this;
    return copy.step_all(bytes);
  }
  bool accepts_end() const override { return phase_ != kLead && phase_ != kCall && phase_ != kCloser; }
  void advance(std::string_view bytes) override {
    if (!step_all(bytes)) {
      // Only a token that opened a block with bytes no call starts with gets
      // here (accepts() holds the rest): that block is text.
      phase_ = shape_ == CallShape::kBlocks ? kFree : kFreeForever;
      grammar_.reset();
      tail_.clear();
    }
  }
  bool complete() const override { return phase_ == kDone; }

 private:
  enum Phase : uint8_t {
    kFree,         // blocks: text, watching for the opener
    kStart,        // whole reply: whitespace so far
    kTrigger,      // whole reply: a brace, whitespace and a prefix of "name" in quotes so far
    kFreeForever,  // whole reply: text
    kLead,         // whitespace before the call's JSON
    kCall,         // the call's JSON
    kCloser,       // blocks: whitespace, then "</tool_call>"
    kDone,         // whole reply: the call is written; whitespace may follow
  };

  bool step_all(std::string_view bytes) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (!step(bytes[i])) return false;
    }
    return true;
  }

  bool step(char c) {
    switch (phase_) {
      case kFree:
        tail_.push_back(c);
        if (tail_.size() > kOpen.size()) tail_.erase(0, tail_.size() - kOpen.size());
        if (tail_ == kOpen) open_call();
        return true;
      case kFreeForever:
        return true;
      case kStart:
        if (is_space(c)) return true;
        if (c != '{') {
          phase_ = kFreeForever;
          return true;
        }
        phase_ = kTrigger;
        tail_ = "{";
        matched_ = 0;
        return true;
      case kTrigger:
        // A reply is a call once it starts {"name": a JSON reply of the
        // model's own stays free.
        tail_.push_back(c);
        if (matched_ == 0 && is_space(c)) return true;
        if (c != kNameKey[matched_]) {
          phase_ = kFreeForever;
          return true;
        }
        if (++matched_ == kNameKey.size()) {
          open_call();
          phase_ = kCall;
          return grammar_->advance(std::exchange(tail_, {}));
        }
        return true;
      case kLead:
        if (is_space(c)) return ++space_ <= kMaxSpace;
        phase_ = kCall;
        [[fallthrough]];
      case kCall:
        if (!grammar_->advance(std::string_view(&c, 1))) return false;
        if (grammar_->complete()) {  // the object's last '}'
          phase_ = shape_ == CallShape::kBlocks ? kCloser : kDone;
          space_ = 0;
          matched_ = 0;
        }
        return true;
      case kCloser:
        if (matched_ == 0 && is_space(c)) return ++space_ <= kMaxSpace;
        if (c != kClose[matched_]) return false;
        if (++matched_ == kClose.size()) {
          phase_ = kFree;
          tail_.clear();
        }
        return true;
      case kDone:
        return is_space(c) && ++space_ <= kMaxSpace;
    }
    return false;
  }

  void open_call() {
    phase_ = kLead;
    space_ = 0;
    grammar_.emplace(schema_);
  }

  std::shared_ptr<const JsonSchema> schema_;
  CallShape shape_;
  Phase phase_;
  std::optional<JsonSchemaGrammar> grammar_;
  std::string tail_;  // kFree: the last bytes, for the opener
  int space_ = 0;
  size_t matched_ = 0;
};

}  // namespace

std::unique_ptr<OutputConstraint> json_value_constraint(std::shared_ptr<const JsonSchema> schema) {
  return std::make_unique<JsonValue>(std::move(schema));
}

std::unique_ptr<OutputConstraint> tool_call_constraint(std::shared_ptr<const JsonSchema> call_schema, CallShape shape) {
  return std::make_unique<ToolCalls>(std::move(call_schema), shape);
}

}  // namespace minfer
