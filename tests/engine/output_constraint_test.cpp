// Tool calls held to their schema once the model opens one (chat's
// tool_choice "auto"): the constraint byte by byte for Qwen's blocks and
// Llama's whole-reply calls, and the host's pick under it with a scripted
// model on the story model's vocabulary — free text picks what it would
// pick anyway; inside a call the best token the schema allows.
#include <gtest/gtest.h>

#include <string>

#include "engine/chat/tool_calls.h"
#include "engine/gguf/gguf.h"
#include "engine/sampling/output_constraint.h"
#include "engine/scheduler/host_pick.h"
#include "tests/engine/test_models.h"

namespace minfer {
namespace {

std::shared_ptr<const JsonSchema> weather_call(std::string_view key = "arguments") {
  auto s = compile_tool_call_schema(
      {R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})"},
      "", key);
  EXPECT_TRUE(s) << s.error().message;
  return *s;
}

// Feeds `text` a byte at a time; the index of the first byte refused, or -1.
int first_refused(OutputConstraint& c, std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (!c.accepts(text.substr(i, 1))) return static_cast<int>(i);
    c.advance(text.substr(i, 1));
  }
  return -1;
}

TEST(ToolCallConstraint, QwenBlocksAreHeldOnceOpened) {
  auto c = tool_call_constraint(weather_call(), CallShape::kBlocks);
  EXPECT_TRUE(c->unconstrained());
  EXPECT_TRUE(c->accepts_end());
  EXPECT_EQ(first_refused(*c, "Let me look. <tool_"), -1);
  EXPECT_TRUE(c->unconstrained()) << "not open until the opener is whole";
  c->advance("call>");
  EXPECT_FALSE(c->unconstrained());
  EXPECT_FALSE(c->accepts_end()) << "no end inside a call";
  EXPECT_FALSE(c->accepts("x"));
  EXPECT_TRUE(c->accepts("\n{\"name\""));
  EXPECT_FALSE(c->accepts("\n{\"name\": \"other\""));
  EXPECT_EQ(first_refused(*c, "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"), -1);
  // The call is written: whitespace, then the closer, nothing else.
  EXPECT_FALSE(c->accepts("x"));
  EXPECT_FALSE(c->accepts(","));
  EXPECT_FALSE(c->accepts_end());
  EXPECT_TRUE(c->accepts("\n</tool_call>"));
  EXPECT_TRUE(c->accepts("</tool_call>\nMore"));  // a token that closes and goes on
  EXPECT_EQ(first_refused(*c, "\n</tool_call>"), -1);
  EXPECT_TRUE(c->unconstrained());
  EXPECT_TRUE(c->accepts_end());
  EXPECT_FALSE(c->complete()) << "another call may come";
  // A second call, opened by one token.
  c->advance("\n<tool_call>");
  EXPECT_EQ(first_refused(*c, "{\"name\": \"get_weather\", \"arguments\": {\"city\": 7"), 46) << "city is a string";
}

TEST(ToolCallConstraint, AnOpenerWithBytesNoCallStartsWithIsText) {
  auto c = tool_call_constraint(weather_call(), CallShape::kBlocks);
  c->advance("x<tool_call>oops");  // one token: free text picks it, the call cannot start so
  EXPECT_TRUE(c->unconstrained());
  EXPECT_TRUE(c->accepts_end());
}

TEST(ToolCallConstraint, LlamaCallIsTheWholeReply) {
  auto call = tool_call_constraint(weather_call("parameters"), CallShape::kWholeReply);
  EXPECT_TRUE(call->unconstrained());
  EXPECT_TRUE(call->accepts_end());
  call->advance(" \n{ \"na");
  EXPECT_TRUE(call->unconstrained()) << "not a call until {\"name\"";
  call->advance("me\"");
  EXPECT_FALSE(call->unconstrained());
  EXPECT_FALSE(call->accepts_end());
  EXPECT_FALSE(call->accepts(": \"other\""));
  EXPECT_EQ(first_refused(*call, ": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}"), -1);
  EXPECT_FALSE(call->accepts("]"));
  EXPECT_FALSE(call->complete());
  call->advance("}");
  EXPECT_TRUE(call->complete());
  EXPECT_TRUE(call->accepts(" \n"));
  EXPECT_FALSE(call->accepts("x"));
  EXPECT_TRUE(call->accepts_end());
  auto key = tool_call_constraint(weather_call("parameters"), CallShape::kWholeReply);
  key->advance("{\"name\"");
  EXPECT_FALSE(key->accepts(": \"get_weather\", \"arguments\"")) << "Llama's key";

  for (const char* reply : {"  Sure, {here}", "{\"answer\": 42}", "{ \"nam\": 1}"}) {
    auto text = tool_call_constraint(weather_call("parameters"), CallShape::kWholeReply);
    text->advance(reply);
    EXPECT_TRUE(text->unconstrained()) << reply;
    EXPECT_TRUE(text->accepts("{{{"));
    EXPECT_TRUE(text->accepts_end());
    EXPECT_FALSE(text->complete());
  }
}

// The story model's tokenizer, with one token a byte to script a model by.
class ScriptedPick : public testing::Test {
 protected:
  void SetUp() override {
    auto file = gguf::File::open(test::stories_path());
    ASSERT_TRUE(file) << file.error().message;
    auto tok = Tokenizer::from_gguf(**file);
    ASSERT_TRUE(tok) << tok.error().message;
    tokenizer_ = std::move(*tok);
    text_ = token_texts(*tokenizer_);
  }
  int32_t byte_token(char c) const {
    for (size_t id = 0; id < text_.size(); ++id) {
      if (text_[id] == std::string(1, c)) return static_cast<int32_t>(id);
    }
    ADD_FAILURE() << "no token for " << c;
    return 0;
  }
  // A model that wants `first` most and `second` next.
  std::vector<float> logits(int32_t first, int32_t second) const {
    std::vector<float> l(text_.size(), 0.0f);
    l[static_cast<size_t>(first)] = 10.0f;
    l[static_cast<size_t>(second)] = 5.0f;
    return l;
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<std::string> text_;
};

TEST_F(ScriptedPick, FreeTextAsIsTheCallHeldToItsSchema) {
  GenerationRequest req;
  req.sampling.temperature = 0.0f;
  req.tool_call_schema = weather_call();
  req.tool_call_style = ToolStyle::kQwen25;
  HostPick pick(req, *tokenizer_, text_, static_cast<int>(text_.size()));
  std::vector<int32_t> history = {1};
  std::string out;
  // Each step: what the model wants most, what next; the byte expected.
  const std::string any = "Q";
  auto step = [&](char first, char second, char expected) {
    std::vector<float> l = logits(byte_token(first), byte_token(second));
    const int32_t t = pick.pick(l.data(), history);
    ASSERT_GE(t, 0);
    history.push_back(t);
    out += text_[static_cast<size_t>(t)];
    EXPECT_EQ(text_[static_cast<size_t>(t)], std::string(1, expected)) << "after " << out;
  };
  for (char c : std::string("Hi <tool_call>")) step(c, 'Q', c);  // free: the model's own pick
  step('x', '\n', '\n');                                          // no text inside a call: the next best
  step('x', '{', '{');
  for (char c : std::string("\"name\": \"get_weather\", \"arguments\": {\"city\": ")) step(c, 'Q', c);
  step('7', '"', '"');  // city is a string
  for (char c : std::string("Paris\"}}")) step(c, 'Q', c);
  // The end of text is not allowed before the closer; a token without bytes is the end.
  std::vector<float> l = logits(2, byte_token('\n'));
  ASSERT_TRUE(text_[2].empty());
  int32_t t = pick.pick(l.data(), history);
  EXPECT_EQ(text_[static_cast<size_t>(t)], "\n");
  history.push_back(t);
  out += "\n";
  step('A', '<', '<');
  for (char c : std::string("/tool_call>")) step(c, 'Q', c);
  for (char c : any) step(c, 'R', c);  // free again
  l = logits(2, byte_token('Q'));
  EXPECT_EQ(pick.pick(l.data(), history), 2) << "the end of text, outside a call";
  EXPECT_FALSE(pick.complete());

  const ToolReply reply = parse_tool_calls(out);
  ASSERT_EQ(reply.calls.size(), 1u) << out;
  EXPECT_EQ(reply.calls[0].name, "get_weather");
  EXPECT_EQ(reply.calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(reply.content, "HiQ");  // whitespace next to a call is not content
}

}  // namespace
}  // namespace minfer
