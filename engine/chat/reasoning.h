// A thinking model's reply (Qwen3-style templates: ChatTemplate::thinks())
// split as it streams into its reasoning — the <think> … </think> block it
// opens with — and its content, as OpenAI-compatible servers return them
// (reasoning_content beside content). The reasoning is the block's text less
// the newlines around it, the content what follows less its leading
// whitespace (what the template keeps of an earlier turn: reasoning
// .strip('\n'), content.lstrip('\n')). A reply that does not open with the
// block is all content; a block never closed is all reasoning.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace minfer {

class ReasoningStream {
 public:
  struct Piece {
    std::string text;
    bool reasoning = false;
  };

  // `inside`: the prompt opened the block (templates that end the
  // generation prompt with "<think>\n").
  explicit ReasoningStream(bool inside = false);

  // What can be passed on now, in order; text that may still be a marker
  // (or newlines that may end the reasoning) is held back.
  std::vector<Piece> feed(std::string_view piece);
  std::vector<Piece> finish();

 private:
  enum class Phase { kStart, kThinking, kAfter, kContent };
  void emit(std::string text, bool reasoning, std::vector<Piece>& out);

  Phase phase_;
  std::string held_;
  bool reasoning_started_ = false;  // leading newlines of the reasoning are dropped
};

}  // namespace minfer
