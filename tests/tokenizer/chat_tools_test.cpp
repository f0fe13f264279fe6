// Tools in chat templates: the renders of Qwen2.5's, Qwen3's and Llama 3.2's
// real templates (with tools, reasoning_content and enable_thinking) against
// what Hugging Face's Jinja writes for the same requests
// (tests/data/chat-templates: tool-cases.json, tool-renders.json made by
// render_reference.py), Python's json.dumps forms, the <tool_call> blocks
// taken out of replies as they stream, and the schema of a forced call.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/chat/chat_template.h"
#include "engine/chat/reasoning.h"
#include "engine/chat/reply_parser.h"
#include "engine/chat/tojson.h"
#include "engine/chat/tool_calls.h"
#include "engine/sampling/json_schema.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace minfer {
namespace {

using OJson = nlohmann::ordered_json;

ChatTemplate qwen3() {
  const auto config = nlohmann::json::parse(test::read_file(test::data_path("qwen-tokenizer/tokenizer_config.json")));
  return ChatTemplate::from_text(config.at("chat_template").get<std::string>());
}
ChatTemplate qwen25() { return ChatTemplate::from_text(test::read_file(test::data_path("chat-templates/qwen2.5-instruct.jinja"))); }
ChatTemplate llama32() { return ChatTemplate::from_text(test::read_file(test::data_path("chat-templates/llama-3.2-instruct.jinja"))); }

// An OpenAI-format message as the daemon hands it to the engine.
ChatMessage message(const OJson& m) {
  ChatMessage out;
  out.role = m.at("role").get<std::string>();
  if (m.contains("content") && m["content"].is_string()) out.content = m["content"].get<std::string>();
  if (m.contains("tool_call_id")) out.tool_call_id = m["tool_call_id"].get<std::string>();
  if (m.contains("reasoning_content")) out.reasoning_content = m["reasoning_content"].get<std::string>();
  for (const OJson& c : m.value("tool_calls", OJson::array())) {
    out.tool_calls.push_back({c.at("id").get<std::string>(), c.at("function").at("name").get<std::string>(),
                              c.at("function").at("arguments").get<std::string>()});
  }
  return out;
}

TEST(ChatTools, RecognisedStyles) {
  EXPECT_EQ(qwen3().tool_style(), ToolStyle::kQwen3);
  EXPECT_EQ(qwen25().tool_style(), ToolStyle::kQwen25);
  EXPECT_EQ(qwen25().tool_call_opener(), "<tool_call>\n");
  EXPECT_EQ(qwen25().tool_call_closer(), "\n</tool_call>");
  EXPECT_EQ(llama32().kind(), ChatTemplateKind::kLlama3);
  EXPECT_EQ(llama32().tool_style(), ToolStyle::kLlama3);
  EXPECT_EQ(llama32().tool_call_opener(), "");  // a call is the whole reply
  EXPECT_EQ(tool_arguments_key(ToolStyle::kLlama3), "parameters");
  EXPECT_EQ(tool_arguments_key(ToolStyle::kQwen3), "arguments");
  // Qwen2's template has no tools; nor have the other families.
  const ChatTemplate qwen2 = ChatTemplate::from_text(
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou "
      "are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}");
  EXPECT_EQ(qwen2.tool_style(), ToolStyle::kNone);
  EXPECT_EQ(qwen2.tool_call_opener(), "");
  EXPECT_EQ(ChatTemplate::of_kind(ChatTemplateKind::kLlama3).tool_style(), ToolStyle::kNone);
}

TEST(ChatTools, RendersMatchTheRealTemplates) {
  const OJson cases = OJson::parse(test::read_file(test::data_path("chat-templates/tool-cases.json")));
  const OJson renders = OJson::parse(test::read_file(test::data_path("chat-templates/tool-renders.json")));
  ASSERT_EQ(renders.size(), 3 * cases.size());
  int compared = 0;
  for (const OJson& r : renders) {
    const std::string name = r.at("case").get<std::string>();
    const OJson* c = nullptr;
    for (const OJson& x : cases) {
      if (x.at("name") == name) c = &x;
    }
    ASSERT_NE(c, nullptr) << name;
    std::vector<ChatMessage> messages;
    for (const OJson& m : c->at("messages")) messages.push_back(message(m));
    std::vector<std::string> tools;
    for (const OJson& t : c->value("tools", OJson::array())) tools.push_back(t.dump());
    const ChatTemplate t = r.at("template") == "qwen3" ? qwen3() : r.at("template") == "qwen2.5" ? qwen25() : llama32();
    std::optional<bool> enable_thinking;
    if (c->contains("template_kwargs")) enable_thinking = c->at("template_kwargs").at("enable_thinking").get<bool>();
    auto out = t.apply(messages, c->at("add_generation_prompt").get<bool>(), tools, enable_thinking);
    if (r.contains("error")) {
      // The template raises: so do we, quoting it.
      ASSERT_FALSE(out) << r.at("template") << ", " << name;
      EXPECT_NE(out.error().message.find(r.at("error").get<std::string>()), std::string::npos) << out.error().message;
    } else {
      ASSERT_TRUE(out) << r.at("template") << ", " << name << ": " << out.error().message;
      EXPECT_EQ(*out, r.at("rendered").get<std::string>()) << r.at("template") << ", " << name;
    }
    ++compared;
  }
  EXPECT_EQ(compared, 27);
}

TEST(ChatTools, TemplatesWithoutToolsRefuseThem) {
  const ChatTemplate llama3 = ChatTemplate::of_kind(ChatTemplateKind::kLlama3);
  const std::vector<std::string> tools = {R"({"type":"function","function":{"name":"f"}})"};
  auto declared = llama3.apply({{"user", "Hi"}}, true, tools);
  ASSERT_FALSE(declared);
  EXPECT_NE(declared.error().message.find("tools were declared, but this model's template (llama3) has no tool calling"),
            std::string::npos)
      << declared.error().message;
  ChatMessage result{"tool", "42"};
  auto tool_role = ChatTemplate::of_kind(ChatTemplateKind::kFallbackChatMl).apply({{"user", "Hi"}, result}, true);
  ASSERT_FALSE(tool_role);
  EXPECT_NE(tool_role.error().message.find("message 1 is a tool result"), std::string::npos);
  ChatMessage call{"assistant", ""};
  call.tool_calls.push_back({"c1", "f", "{}"});
  auto calls = llama3.apply({{"user", "Hi"}, call}, true);
  ASSERT_FALSE(calls);
  EXPECT_NE(calls.error().message.find("message 1 has tool calls"), std::string::npos);
  // Only an assistant calls; a tool result is a known role where tools are.
  ChatMessage user_call{"user", "x"};
  user_call.tool_calls.push_back({"c1", "f", "{}"});
  auto bad = qwen3().apply({user_call}, true);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("only an assistant calls tools"), std::string::npos);
  EXPECT_TRUE(qwen3().apply({{"user", "Hi"}, result}, true));
  auto unknown = qwen3().apply({{"function", "x"}}, true);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("supported: system, user, assistant, tool"), std::string::npos);
}

TEST(ChatTools, PythonJsonDumps) {
  // Each expected text is what python3's json.dumps(json.loads(x), ensure_ascii=False) printed.
  auto dumps = [](std::string_view text, int indent = -1) {
    auto out = python_json_dumps(text, indent);
    EXPECT_TRUE(out) << text;
    return out ? *out : std::string();
  };
  EXPECT_EQ(dumps(R"({"b":1,"a":[1,2.5,-0.0,1e-05,1e+16,true,null],"c":{}})"),
            R"({"b": 1, "a": [1, 2.5, -0.0, 1e-05, 1e+16, true, null], "c": {}})");
  EXPECT_EQ(dumps(R"(["\u00e9t\u00e9 \"q\" \\ \n\t\u0001\u001f/\u007f", []])"),
            "[\"été \\\"q\\\" \\\\ \\n\\t\\u0001\\u001f/\x7f\", []]");
  EXPECT_EQ(dumps("0.1"), "0.1");
  EXPECT_EQ(dumps("100.0"), "100.0");
  EXPECT_EQ(dumps(R"({"a":{"b":[1,{}]},"c":[]})", 4),
            "{\n    \"a\": {\n        \"b\": [\n            1,\n            {}\n        ]\n    },\n    \"c\": []\n}");
  EXPECT_FALSE(python_json_dumps("{\"a\":"));
  EXPECT_EQ(python_json_string("say \"hi\"\n"), "\"say \\\"hi\\\"\\n\"");
}

std::vector<ToolCallStream::Event> feed_all(ToolCallStream& s, std::string_view text, size_t step, bool close_open) {
  std::vector<ToolCallStream::Event> all;
  for (size_t i = 0; i < text.size(); i += step) {
    for (auto& e : s.feed(text.substr(i, step))) all.push_back(std::move(e));
  }
  for (auto& e : s.finish(close_open)) all.push_back(std::move(e));
  return all;
}

TEST(ChatTools, CallsAreTakenOutOfTheReply) {
  const std::string reply =
      "Let me check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Lyon\",\"days\":[1,2]}}\n"
      "</tool_call>";
  const ToolReply r = parse_tool_calls(reply);
  EXPECT_EQ(r.content, "Let me check both.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(r.calls[0].id, "");
  // Arguments come back in Python's form, what the templates print.
  EXPECT_EQ(r.calls[1].arguments, R"({"city": "Lyon", "days": [1, 2]})");

  // Streamed in pieces of every size: the same text and calls, in order,
  // and no piece of a marker ever passed on as text.
  for (size_t step = 1; step <= reply.size(); ++step) {
    ToolCallStream s;
    std::string text;
    std::vector<std::string> order;
    for (const auto& e : feed_all(s, reply, step, false)) {
      if (e.call) {
        order.push_back("call:" + e.call->arguments);
      } else {
        EXPECT_EQ(e.text.find('<'), std::string::npos) << "step " << step << ": " << e.text;
        text += e.text;
        if (order.empty() || order.back() != "text") order.push_back("text");
      }
    }
    EXPECT_EQ(text, "Let me check both.") << step;
    ASSERT_EQ(order.size(), 3u) << step;
    EXPECT_EQ(order[1], "call:{\"city\": \"Paris\"}");
    EXPECT_EQ(s.calls(), 2);
  }
}

TEST(ChatTools, TextWithoutCallsPassesUnchanged) {
  for (const std::string text : {"Hello, world.  ", "a < b and b <tool but not a call <tool_cal", " \n", "x <tool_call"}) {
    for (size_t step = 1; step <= text.size(); ++step) {
      ToolCallStream s;
      std::string out;
      for (const auto& e : feed_all(s, text, step, false)) {
        ASSERT_FALSE(e.call);
        out += e.text;
      }
      EXPECT_EQ(out, text) << step;
    }
  }
}

TEST(ChatTools, BlocksThatAreNotCallsStayText) {
  // Not JSON, no name, arguments that are no object: kept as written.
  for (const std::string block : {"<tool_call>\nnot json\n</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>",
                                  "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>"}) {
    const ToolReply r = parse_tool_calls("Before " + block + " after");
    EXPECT_TRUE(r.calls.empty()) << block;
    EXPECT_EQ(r.content, "Before " + block + " after");
  }
  // An unclosed block at the end is text, unless the reply ended at its closer.
  const std::string open = "Calling <tool_call>\n{\"name\": \"f\", \"arguments\": {}}";
  EXPECT_EQ(parse_tool_calls(open).content, open);
  const ToolReply closed = parse_tool_calls(open, ToolStyle::kQwen25, false, /*close_open=*/true);
  EXPECT_EQ(closed.content, "Calling");
  ASSERT_EQ(closed.calls.size(), 1u);
  EXPECT_EQ(closed.calls[0].arguments, "{}");
  // "parameters" for "arguments", and arguments written as a JSON string.
  const ToolReply alias = parse_tool_calls(
      "<tool_call>{\"name\": \"f\", \"parameters\": {\"x\": 1}}</tool_call><tool_call>{\"name\": \"g\", "
      "\"arguments\": \"{\\\"y\\\": \\\"z\\\"}\"}</tool_call>");
  ASSERT_EQ(alias.calls.size(), 2u);
  EXPECT_EQ(alias.calls[0].arguments, R"({"x": 1})");
  EXPECT_EQ(alias.calls[1].arguments, R"({"y": "z"})");
  EXPECT_EQ(alias.content, "");
}

TEST(ChatTools, AForcedCallStartsInsideItsBlock) {
  // The prompt ended with "<tool_call>\n"; the reply is the call's JSON.
  const ToolReply r = parse_tool_calls("{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}", ToolStyle::kQwen25, /*inside_call=*/true,
                                       /*close_open=*/true);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "add");
  EXPECT_EQ(r.calls[0].arguments, R"({"a": 1, "b": 2})");
  // Cut short (max_tokens): what the model wrote is text (the opener was the prompt's).
  const ToolReply cut = parse_tool_calls("{\"name\": \"add\", \"argu", ToolStyle::kQwen25, true, false);
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "{\"name\": \"add\", \"argu");
  // A second block after a forced first one is the model's, opener and all.
  const ToolReply two = parse_tool_calls("{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"na",
                                         ToolStyle::kQwen25, true, false);
  ASSERT_EQ(two.calls.size(), 1u);
  EXPECT_EQ(two.content, "<tool_call>\n{\"na");
}

TEST(ChatTools, LlamasCallIsTheWholeReply) {
  const std::string call = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}";
  for (const std::string& reply : {call, "<|python_tag|>" + call, "  \n" + call + "\n"}) {
    for (size_t step = 1; step <= reply.size(); ++step) {
      ToolCallStream s(ToolStyle::kLlama3);
      std::vector<ToolCallStream::Event> events = feed_all(s, reply, step, false);
      ASSERT_EQ(events.size(), 1u) << reply << " by " << step;
      ASSERT_TRUE(events[0].call);
      EXPECT_EQ(events[0].call->name, "get_weather");
      EXPECT_EQ(events[0].call->arguments, R"({"city": "Paris"})");
    }
  }
  // Text streams as it comes once it cannot be a call; a reply that looked
  // like one but is not stays text, whole.
  for (const std::string text : {"Hello {there}", "<|python", "{not json", " <|python_tag|>{\"x\": 1}"}) {
    for (size_t step = 1; step <= text.size(); ++step) {
      ToolCallStream s(ToolStyle::kLlama3);
      std::string out;
      for (const auto& e : feed_all(s, text, step, false)) {
        ASSERT_FALSE(e.call) << text;
        out += e.text;
      }
      EXPECT_EQ(out, text) << step;
    }
  }
  ToolCallStream early(ToolStyle::kLlama3);
  ASSERT_EQ(early.feed("Sure").size(), 1u);  // not held back
  // A forced call is the reply; cut short it is text.
  EXPECT_EQ(parse_tool_calls("{\"name\": \"f\", \"parameters\": {}}", ToolStyle::kLlama3, true).calls.size(), 1u);
  EXPECT_EQ(parse_tool_calls("{\"name\": \"f\", \"par", ToolStyle::kLlama3, true).content, "{\"name\": \"f\", \"par");
  // Its schema's key.
  auto schema = compile_tool_call_schema({R"({"type": "function", "function": {"name": "f"}})"}, "", "parameters");
  ASSERT_TRUE(schema);
  EXPECT_TRUE(JsonSchemaGrammar(*schema).accepts(R"({"name": "f", "parameters": {)"));
  EXPECT_FALSE(JsonSchemaGrammar(*schema).accepts(R"({"name": "f", "arguments")"));
}

TEST(ChatTools, LlamaNeedsAUserTurnForTheTools) {
  auto none = llama32().apply({{"system", "Be brief."}}, true, {R"({"type": "function", "function": {"name": "f"}})"});
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("declares tools in the first user message, and there is none"), std::string::npos);
}

// A reply through ReasoningStream in pieces of `step` bytes: {reasoning, content}.
std::pair<std::string, std::string> split_reasoning(std::string_view reply, size_t step, bool inside = false) {
  ReasoningStream s(inside);
  std::pair<std::string, std::string> out;
  auto take = [&](std::vector<ReasoningStream::Piece> pieces) {
    for (auto& p : pieces) {
      EXPECT_FALSE(p.text.empty());
      (p.reasoning ? out.first : out.second) += p.text;
    }
  };
  for (size_t i = 0; i < reply.size(); i += step) take(s.feed(reply.substr(i, step)));
  take(s.finish());
  return out;
}

TEST(Reasoning, TheThinkBlockIsTheReasoning) {
  // Qwen3's shape: "<think>\n…\n</think>\n\n" then the answer.
  const std::string reply = "<think>\nThe user greets me.\n\nI greet back.\n</think>\n\nHello! How can I help?\n";
  for (size_t step = 1; step <= reply.size(); ++step) {
    const auto [reasoning, content] = split_reasoning(reply, step);
    EXPECT_EQ(reasoning, "The user greets me.\n\nI greet back.") << step;
    EXPECT_EQ(content, "Hello! How can I help?\n") << step;
  }
  // Thinking switched off: the model writes the empty block, or none.
  EXPECT_EQ(split_reasoning("<think>\n\n</think>\n\nHi", 3), std::make_pair(std::string(), std::string("Hi")));
  EXPECT_EQ(split_reasoning("Hi <think>x</think>", 2), std::make_pair(std::string(), std::string("Hi <think>x</think>")));
  EXPECT_EQ(split_reasoning("  <thin", 1), std::make_pair(std::string(), std::string("  <thin")));
  // Never closed (max_tokens): all reasoning; a prompt that opened the block.
  EXPECT_EQ(split_reasoning("<think>\nstill thinking\n", 4).first, "still thinking");
  EXPECT_EQ(split_reasoning("\nfrom the prompt\n</think>\n\nok", 5, true), std::make_pair(std::string("from the prompt"), std::string("ok")));
  // A tool call after the reasoning is content (for the call parser).
  EXPECT_EQ(split_reasoning("<think>\nCall it.\n</think>\n\n<tool_call>\n{}\n</tool_call>", 7).second,
            "<tool_call>\n{}\n</tool_call>");
}

// Reasoning and calls together: a call written while thinking is reasoning,
// the one in the answer is a call; streamed in any pieces, the same.
TEST(Reasoning, ThenToolCallsInTheAnswer) {
  const std::string reply =
      "<think>\nMaybe <tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call>? No: weather.\n</think>\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  for (size_t step = 1; step <= reply.size(); ++step) {
    ReplyParser parser({.reasoning = true, .tools = ToolStyle::kQwen3});
    ASSERT_TRUE(parser.active());
    std::string reasoning, text;
    std::vector<ToolCall> calls;
    auto take = [&](std::vector<ReplyParser::Event> events) {
      for (auto& e : events) {
        if (e.kind == ReplyParser::Event::Kind::kReasoning) reasoning += e.text;
        if (e.kind == ReplyParser::Event::Kind::kText) text += e.text;
        if (e.kind == ReplyParser::Event::Kind::kCall) calls.push_back(*e.call);
      }
    };
    for (size_t i = 0; i < reply.size(); i += step) take(parser.feed(std::string_view(reply).substr(i, step)));
    take(parser.finish(false));
    EXPECT_EQ(reasoning, "Maybe <tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call>? No: weather.") << step;
    EXPECT_EQ(text, "") << step;
    ASSERT_EQ(calls.size(), 1u) << step;
    EXPECT_EQ(calls[0].name, "get_weather");
  }
  EXPECT_FALSE(ReplyParser({}).active());
}

TEST(Reasoning, TemplatesThatThink) {
  EXPECT_TRUE(qwen3().thinks());
  EXPECT_TRUE(qwen3().takes_enable_thinking());
  EXPECT_FALSE(qwen25().thinks());
  EXPECT_FALSE(llama32().thinks());
  // enable_thinking false where the template reads it: the empty block.
  auto off = qwen3().apply({{"user", "Hi"}}, true, {}, false);
  ASSERT_TRUE(off);
  EXPECT_EQ(*off, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(*qwen25().apply({{"user", "Hi"}}, true, {}, false), *qwen25().apply({{"user", "Hi"}}, true));
}

bool accepts_all(JsonSchemaGrammar g, std::string_view text) { return g.advance(text) && g.complete(); }

TEST(ChatTools, AForcedCallsSchema) {
  const std::vector<std::string> tools = {
      R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}})",
      R"({"type": "function", "function": {"name": "now"}})"};
  auto any = compile_tool_call_schema(tools);
  ASSERT_TRUE(any) << any.error().message;
  EXPECT_TRUE(accepts_all(JsonSchemaGrammar(*any), R"({"name": "get_weather", "arguments": {"city": "Paris"}})"));
  EXPECT_TRUE(accepts_all(JsonSchemaGrammar(*any), R"({"name": "get_weather", "arguments": {"city": "P", "unit": "f"}})"));
  EXPECT_TRUE(accepts_all(JsonSchemaGrammar(*any), R"({"name": "now", "arguments": {"anything": [1]}})"));
  EXPECT_FALSE(JsonSchemaGrammar(*any).accepts(R"({"name": "other")"));
  EXPECT_FALSE(JsonSchemaGrammar(*any).accepts(R"({"name": "get_weather", "arguments": {"unit")"));  // city first
  EXPECT_FALSE(JsonSchemaGrammar(*any).accepts(R"({"arguments")"));  // the name first

  auto named = compile_tool_call_schema(tools, "now");
  ASSERT_TRUE(named);
  EXPECT_FALSE(JsonSchemaGrammar(*named).accepts(R"({"name": "get_weather")"));
  EXPECT_TRUE(accepts_all(JsonSchemaGrammar(*named), R"({"name": "now", "arguments": {}})"));

  auto missing = compile_tool_call_schema(tools, "nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "no declared tool is named 'nope'");
  auto unsupported = compile_tool_call_schema(
      {R"({"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer", "not": {"const": 2}}}}}})"});
  ASSERT_FALSE(unsupported);
  EXPECT_NE(unsupported.error().message.find("tools[0].function.parameters (f): "), std::string::npos)
      << unsupported.error().message;
  EXPECT_NE(unsupported.error().message.find("'not' is not supported"), std::string::npos);
}

// Parameters with references of their own (a Pydantic model's "$defs"):
// they resolve inside the call schema as they do in the tool's.
TEST(ChatTools, AForcedCallsSchemaKeepsTheToolsReferences) {
  const std::vector<std::string> tools = {
      R"({"type": "function", "function": {"name": "ship", "parameters": {"type": "object",
          "$defs": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
          "properties": {"to": {"$ref": "#/$defs/Address"}, "also": {"type": "array", "items": {"$ref": "#/$defs/Address"}}},
          "required": ["to"]}}})",
      R"({"type": "function", "function": {"name": "tree", "parameters": {"type": "object",
          "properties": {"label": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
          "required": ["label", "kids"]}}})"};
  auto any = compile_tool_call_schema(tools);
  ASSERT_TRUE(any) << any.error().message;
  EXPECT_TRUE(accepts_all(JsonSchemaGrammar(*any), R"({"name": "ship", "arguments": {"to": {"city": "Oslo"}, "also": [{"city": "Rome"}]}})"));
  EXPECT_FALSE(JsonSchemaGrammar(*any).accepts(R"({"name": "ship", "arguments": {"to": {"zip")"));  // an Address
  EXPECT_TRUE(accepts_all(JsonSchemaGrammar(*any),
                          R"({"name": "tree", "arguments": {"label": "a", "kids": [{"label": "b", "kids": []}]}})"));
  // "#" is the tool's parameters, not the call: a kid is a tree node.
  EXPECT_FALSE(JsonSchemaGrammar(*any).accepts(R"({"name": "tree", "arguments": {"label": "a", "kids": [{"name")"));
  // An integer's bounds hold a forced call's argument.
  auto bounded = compile_tool_call_schema({R"({"type": "function", "function": {"name": "forecast", "parameters": {
      "type": "object", "properties": {"days": {"type": "integer", "minimum": 1, "maximum": 14}}, "required": ["days"]}}})"});
  ASSERT_TRUE(bounded) << bounded.error().message;
  EXPECT_TRUE(accepts_all(JsonSchemaGrammar(*bounded), R"({"name": "forecast", "arguments": {"days": 14}})"));
  EXPECT_FALSE(JsonSchemaGrammar(*bounded).accepts(R"({"name": "forecast", "arguments": {"days": 0)"));
  EXPECT_FALSE(JsonSchemaGrammar(*bounded).accepts(R"({"name": "forecast", "arguments": {"days": 15)"));
  auto broken = compile_tool_call_schema(
      {R"({"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"$ref": "#/$defs/X"}}}}})"});
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().message.find("tools[0].function.parameters (f): "), std::string::npos) << broken.error().message;
  EXPECT_NE(broken.error().message.find("#/$defs/X names nothing"), std::string::npos) << broken.error().message;
}

}  // namespace
}  // namespace minfer
