// Tool calls through a real minferd: the shipped story model with Qwen2.5's
// chat template (--chat-template-file), so that the prompts are Qwen2.5's
// renders (its markers are plain text to the story model's vocabulary).
// The renders the daemon sends the model are checked against the reference
// renders of tests/data/chat-templates (made with Hugging Face's Jinja) by
// completing the reference text through /v1/completions: the same tokens,
// the same greedy reply. Forced calls (tool_choice required or named) are
// held to the tools' schemas and come back as tool_calls, streamed too.
#include <gtest/gtest.h>


#include "tests/daemon/daemon_process.h"
#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/http_test_client.h"

namespace minfer::test {
namespace {

using Json = nlohmann::json;
using OJson = nlohmann::ordered_json;

// A file of tests/data, which must be there.
std::string data_file(const std::string& relative) {
  std::string bytes = file_bytes(test_data_path(relative));
  EXPECT_FALSE(bytes.empty()) << "cannot read " << test_data_path(relative);
  return bytes;
}

// A daemon with the template `file` of tests/data/chat-templates. The
// tools' declarations spelled in the story model's 512 pieces take ~500-
// 1,100 tokens: its whole training context. No prefix cache: a prompt
// evaluated in other chunks may differ in the last bits and tip a near tie;
// the comparisons here want each prompt evaluated alike.
DaemonSpec template_spec(const std::string& file) {
  DaemonSpec s;
  s.args = {"--chat-template-file", test_data_path("chat-templates/" + file), "--ctx-size",
            "2048", "--prefix-cache", "false"};
  return s;
}

struct QwenTemplateSpec {
  static DaemonSpec spec() { return template_spec("qwen2.5-instruct.jinja"); }
  static constexpr const char* kRenders = "qwen2.5";  // its renders in tool-renders.json
};
struct Qwen3TemplateSpec {
  static DaemonSpec spec() { return template_spec("qwen3.jinja"); }
  static constexpr const char* kRenders = "qwen3";
};
struct LlamaTemplateSpec {
  static DaemonSpec spec() { return template_spec("llama-3.2-instruct.jinja"); }
  static constexpr const char* kRenders = "llama3.2";
};

template <class Spec>
class ToolsSuite : public DaemonSuite<Spec> {
 public:
  using DaemonSuite<Spec>::sock;
  using DaemonSuite<Spec>::post;
  // A case of tool-cases.json and the template's reference render of it
  // (for Llama without the BOS text: the story model's BOS is "<s>", added
  // to /v1/completions prompts as to chats).
  static std::pair<OJson, std::string> reference_case(const std::string& name) {
    const OJson cases = OJson::parse(data_file("chat-templates/tool-cases.json"));
    const OJson renders = OJson::parse(data_file("chat-templates/tool-renders.json"));
    std::pair<OJson, std::string> out;
    for (const OJson& c : cases) {
      if (c["name"] == name) out.first = c;
    }
    for (const OJson& r : renders) {
      if (r["case"] == name && r["template"] == Spec::kRenders && r.contains("rendered")) {
        out.second = r["rendered"].get<std::string>();
      }
    }
    constexpr std::string_view kLlamaBos = "<|begin_of_text|>";
    if (out.second.rfind(kLlamaBos, 0) == 0) out.second.erase(0, kLlamaBos.size());
    EXPECT_FALSE(out.second.empty()) << name;
    return out;
  }
};
using DaemonTools = ToolsSuite<QwenTemplateSpec>;
using DaemonLlamaTools = ToolsSuite<LlamaTemplateSpec>;
using DaemonQwen3 = ToolsSuite<Qwen3TemplateSpec>;

// The request body of a case, its tools in their order (a raw JSON text: the
// daemon must keep the order the client wrote).
std::string case_body(const OJson& c, const OJson& extra) {
  OJson body = {{"messages", c["messages"]}};
  if (c.contains("tools")) body["tools"] = c["tools"];
  for (const auto& [k, v] : extra.items()) body[k] = v;
  return body.dump();
}

HttpResponse post_raw(const std::string& sock, const std::string& target, const std::string& body) {
  return http_request(sock, "POST", target, body);
}

void expect_valid_call(const Json& call, const std::string& id) {
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"], id);
  const std::string name = call["function"]["name"].get<std::string>();
  const Json args = Json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object()) << call.dump();
  if (name == "add") {
    EXPECT_EQ(args.size(), 2u) << args.dump();
    EXPECT_TRUE(args["a"].is_number() && args["b"].is_number()) << args.dump();
  } else {
    ASSERT_EQ(name, "get_weather");
    EXPECT_TRUE(args["city"].is_string()) << args.dump();
  }
}

// The schema of one call of `tools` (OpenAI's), as a forced call is held
// to, its arguments under `key`.
OJson call_schema(const OJson& tools, const std::string& only, const std::string& key) {
  OJson alternatives = OJson::array();
  for (const OJson& t : tools) {
    const std::string name = t["function"]["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    alternatives.push_back({{"type", "object"},
                            {"properties", {{"name", {{"const", name}}}, {key, t["function"]["parameters"]}}},
                            {"required", {"name", key}}});
  }
  return alternatives.size() == 1 ? alternatives[0] : OJson{{"anyOf", alternatives}};
}

// tool_choice auto: the prompt is the template's reference render with the
// tools declared; the story model answers with text, which comes back as
// the content (the same tokens and greedy text as /v1/completions of the
// reference text).
template <class Suite>
void expect_auto_renders(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    const auto [c, rendered] = Suite::reference_case(name);
    const HttpResponse chat = post_raw(Suite::sock(), "/v1/chat/completions",
                                       case_body(c, {{"max_tokens", 12}, {"temperature", 0}}));
    ASSERT_EQ(chat.status, 200) << chat.body;
    const Json j = chat.json();
    const Json plain = Suite::post("/v1/completions", {{"prompt", rendered}, {"max_tokens", 12}, {"temperature", 0}});
    EXPECT_EQ(j["usage"]["prompt_tokens"], plain["usage"]["prompt_tokens"]) << name;
    EXPECT_EQ(j["choices"][0]["message"]["content"], plain["choices"][0]["text"]) << name;
    EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls")) << j.dump();
    EXPECT_EQ(j["choices"][0]["finish_reason"], plain["choices"][0]["finish_reason"]);
  }
  // tool_choice none: the tools are not shown to the model.
  const auto [c, rendered] = Suite::reference_case("tools, a user turn");
  const Json none = post_raw(Suite::sock(), "/v1/chat/completions",
                             case_body(c, {{"max_tokens", 1}, {"tool_choice", "none"}})).json();
  const Json bare = Suite::post("/v1/chat/completions", {{"messages", c["messages"]}, {"max_tokens", 1}});
  EXPECT_EQ(none["usage"]["prompt_tokens"], bare["usage"]["prompt_tokens"]);
}

// tool_choice required / named: the reply is one call of a declared tool
// with arguments of its schema, no content, finish "tool_calls" — exactly
// what the model writes after the reference render and the template's call
// opener ("<tool_call>\n" for Qwen, nothing for Llama) when held to the
// call's schema (/v1/completions with that json_schema; the arguments under
// `key`), and streamed as one tool_calls delta.
template <class Suite>
void expect_forced_calls(const std::string& opener, const std::string& key) {
  const auto [c, rendered] = Suite::reference_case("tools, a system prompt and two tools");
  for (const std::string only : {"", "add", "get_weather"}) {
    const OJson choice = only.empty() ? OJson("required") : OJson{{"type", "function"}, {"function", {{"name", only}}}};
    const OJson extra = {{"tool_choice", choice}, {"max_tokens", 60}, {"temperature", 0}};
    const HttpResponse r = post_raw(Suite::sock(), "/v1/chat/completions", case_body(c, extra));
    ASSERT_EQ(r.status, 200) << r.body;
    const Json j = r.json();
    const Json& msg = j["choices"][0]["message"];
    EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls") << j.dump();
    EXPECT_TRUE(msg["content"].is_null()) << j.dump();
    ASSERT_EQ(msg["tool_calls"].size(), 1u) << j.dump();
    const std::string id = j["id"].get<std::string>();
    expect_valid_call(msg["tool_calls"][0], "call_" + id.substr(id.find('-') + 1) + "_0");
    if (!only.empty()) {
      EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], only);
    }

    const OJson completion = {{"prompt", rendered + opener},
                              {"max_tokens", 60},
                              {"temperature", 0},
                              {"response_format",
                               {{"type", "json_schema"},
                                {"json_schema", {{"name", "call"}, {"schema", call_schema(c["tools"], only, key)}}}}}};
    const HttpResponse pr = post_raw(Suite::sock(), "/v1/completions", completion.dump());
    ASSERT_EQ(pr.status, 200) << pr.body;
    const Json plain = pr.json();
    EXPECT_EQ(plain["choices"][0]["finish_reason"], "stop") << plain.dump();
    const Json written = Json::parse(plain["choices"][0]["text"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(written.is_object()) << plain.dump();
    EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], written["name"]);
    EXPECT_EQ(Json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()), written[key]);
    EXPECT_EQ(j["usage"], plain["usage"]) << j.dump() << "\n" << plain.dump();
    const std::string text = plain["choices"][0]["text"].get<std::string>();
    EXPECT_LT(text.find("\"name\""), text.find("\"" + key + "\"")) << "the schema's order: " << text;

    // Streamed: the role, one delta with the whole call, the finish.
    OJson streamed = OJson::parse(case_body(c, extra));
    streamed["stream"] = true;
    const HttpResponse s = post_raw(Suite::sock(), "/v1/chat/completions", streamed.dump());
    ASSERT_EQ(s.status, 200) << s.body;
    bool done = false;
    const std::vector<std::string> events = sse_data(s.body, &done);
    EXPECT_TRUE(done);
    Json calls = Json::array();
    std::string content, finish;
    for (const std::string& e : events) {
      const Json chunk = Json::parse(e);
      const Json& delta = chunk["choices"][0]["delta"];
      if (delta.contains("content")) content += delta["content"].get<std::string>();
      if (delta.contains("tool_calls")) {
        for (Json call : delta["tool_calls"]) {
          EXPECT_EQ(call["index"], calls.size());
          call.erase("index");
          calls.push_back(call);
        }
      }
      if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(content, "");
    EXPECT_EQ(finish, "tool_calls");
    ASSERT_EQ(calls.size(), 1u) << s.body;
    EXPECT_EQ(calls[0]["function"], msg["tool_calls"][0]["function"]);
    const std::string sid = Json::parse(events[0])["id"].get<std::string>();
    EXPECT_EQ(calls[0]["id"], "call_" + sid.substr(sid.find('-') + 1) + "_0");
  }
}

TEST_F(DaemonTools, ModelsNameTheTemplate) {
  const Json m = Json::parse(http_request(sock(), "GET", "/v1/models").body);
  EXPECT_EQ(m["data"][0]["chat_template"], "chatml") << m.dump();
  EXPECT_EQ(m["data"][0]["tool_calls"], "qwen2.5") << m.dump();
  EXPECT_EQ(m["data"][0]["thinking"], false) << m.dump();
}

TEST_F(DaemonTools, AutoRendersTheToolsAsTheRealTemplate) {
  expect_auto_renders<DaemonTools>({"tools, a user turn", "a full round: calls, responses, an answer, a new question",
                                    "unicode and escapes in the tools", "a history with calls but no tools declared"});
}

TEST_F(DaemonTools, ForcedCallsAreHeldToTheSchemas) {
  expect_forced_calls<DaemonTools>("<tool_call>\n", "arguments");
  // Six calls (three streamed): counted, and each reply's logged.
  const std::string metrics = http_request(sock(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("\nminfer_tool_calls_total 6\n"), std::string::npos) << metrics;
  EXPECT_NE(daemon_->log().find("TOOL_CALLS=1"), std::string::npos);
}

TEST_F(DaemonLlamaTools, AutoRendersTheToolsAsTheRealTemplate) {
  expect_auto_renders<DaemonLlamaTools>({"tools, a user turn", "an assistant turn with text and a call, then its response",
                                         "unicode and escapes in the tools", "a history with calls but no tools declared"});
  // Two calls in one turn: Llama's template raises, so the request is a 400 saying so.
  const auto cases = OJson::parse(data_file("chat-templates/tool-cases.json"));
  const HttpResponse two = post_raw(sock(), "/v1/chat/completions", case_body(cases[2], {{"max_tokens", 1}}));
  EXPECT_EQ(two.status, 400) << two.body;
  EXPECT_NE(two.body.find("single tool-calls at once"), std::string::npos) << two.body;
}

// Llama's call is the whole reply, {"name", "parameters"}.
TEST_F(DaemonLlamaTools, ForcedCallsAreHeldToTheSchemas) { expect_forced_calls<DaemonLlamaTools>("", "parameters"); }

// A forced call cut by max_tokens is no call: what the model wrote of it
// comes back as the content, finish "length".
// n choices of a forced call: each choice its call, named apart ("_0" for
// the first choice's, "_1_0" for the second's), streamed under its index.
TEST_F(DaemonTools, EachChoiceCallsWithItsOwnIds) {
  const auto [c, rendered] = reference_case("tools, a system prompt and two tools");
  const OJson extra = {{"tool_choice", "required"}, {"max_tokens", 60}, {"temperature", 0}, {"n", 2}};
  const HttpResponse r = post_raw(sock(), "/v1/chat/completions", case_body(c, extra));
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = r.json();
  ASSERT_EQ(j["choices"].size(), 2u) << r.body;
  const std::string id = j["id"].get<std::string>();
  const std::string base = "call_" + id.substr(id.find('-') + 1);
  for (size_t i = 0; i < 2; ++i) {
    const Json& choice = j["choices"][i];
    EXPECT_EQ(choice["index"], i);
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.body;
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.body;
    expect_valid_call(choice["message"]["tool_calls"][0], i == 0 ? base + "_0" : base + "_1_0");
  }
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["function"], j["choices"][1]["message"]["tool_calls"][0]["function"])
      << "greedy choices are the same call";

  OJson streamed = OJson::parse(case_body(c, extra));
  streamed["stream"] = true;
  const HttpResponse s = post_raw(sock(), "/v1/chat/completions", streamed.dump());
  ASSERT_EQ(s.status, 200) << s.body;
  bool done = false;
  std::vector<Json> calls(2);
  std::vector<std::string> finish(2);
  std::string sid;
  for (const std::string& e : sse_data(s.body, &done)) {
    const Json chunk = Json::parse(e);
    sid = chunk["id"].get<std::string>();
    const size_t index = chunk["choices"][0]["index"].get<size_t>();
    ASSERT_LT(index, 2u) << e;
    const Json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("tool_calls")) calls[index] = delta["tool_calls"];
    if (!chunk["choices"][0]["finish_reason"].is_null()) finish[index] = chunk["choices"][0]["finish_reason"];
  }
  EXPECT_TRUE(done);
  const std::string sbase = "call_" + sid.substr(sid.find('-') + 1);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(finish[i], "tool_calls") << i;
    ASSERT_EQ(calls[i].size(), 1u) << s.body;
    EXPECT_EQ(calls[i][0]["id"], i == 0 ? sbase + "_0" : sbase + "_1_0");
    EXPECT_EQ(calls[i][0]["function"], j["choices"][i]["message"]["tool_calls"][0]["function"]);
  }
}

TEST_F(DaemonTools, AForcedCallCutShortIsText) {
  const auto [c, rendered] = reference_case("tools, a system prompt and two tools");
  const Json j = post_raw(sock(), "/v1/chat/completions",
                          case_body(c, {{"tool_choice", "required"}, {"max_tokens", 3}, {"temperature", 0}}))
                     .json();
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length") << j.dump();
  EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(j["choices"][0]["message"]["content"].get<std::string>().rfind("{", 0), 0u) << j.dump();
}

TEST_F(DaemonTools, BadToolsAreClearErrors) {
  const OJson msgs = OJson::array({{{"role", "user"}, {"content", "Hi"}}});
  auto expect_400 = [&](const OJson& body, const std::string& param, const std::string& words) {
    const HttpResponse r = post_raw(sock(), "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    const Json e = Json::parse(r.body, nullptr, false);
    EXPECT_EQ(e["error"]["param"], param) << r.body;
    EXPECT_NE(e["error"]["message"].get<std::string>().find(words), std::string::npos) << r.body;
  };
  const OJson f = {{"type", "function"}, {"function", {{"name", "f"}}}};
  expect_400({{"messages", msgs}, {"tools", {{{"type", "function"}, {"function", {{"name", "a b"}}}}}}},
             "tools[0].function.name", "1 to 64 letters");
  expect_400({{"messages", msgs}, {"tools", {f, f}}}, "tools[1].function.name", "declared twice");
  expect_400({{"messages", msgs}, {"tools", {{{"type", "retrieval"}}}}}, "tools[0].type", "must be \"function\"");
  expect_400({{"messages", msgs}, {"tools", {f}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}},
             "tool_choice", "'g', which 'tools' does not declare");
  expect_400({{"messages", msgs}, {"tool_choice", "required"}}, "tool_choice", "'tools' declares none");
  expect_400({{"messages", msgs}, {"tools", {f}}, {"tool_choice", "sometimes"}}, "tool_choice", "must be \"none\"");
  expect_400({{"messages", msgs},
              {"tools", {{{"type", "function"},
                          {"function", {{"name", "f"}, {"parameters", {{"type", "object"}, {"properties", {{"n", {{"type", "integer"}, {"not", {{"const", 2}}}}}}}}}}}}}},
              {"tool_choice", "required"}},
             "tools", "'not' is not supported");
  expect_400({{"messages", msgs}, {"tools", {f}}, {"response_format", {{"type", "json_object"}}}}, "response_format",
             "give one");
  expect_400({{"messages", {{{"role", "assistant"}, {"tool_calls", {{{"id", "c"}, {"function", {{"name", "f"}}}}}}}}}},
             "messages[0].tool_calls[0].function.arguments", "a string of JSON");
  expect_400({{"messages", {{{"role", "assistant"}, {"content", nullptr}}}}}, "messages[0].content", "is required");
  // The same tools with the schema's keyword are fine when nothing holds the call to it.
  const HttpResponse ok = post_raw(
      sock(), "/v1/chat/completions",
      OJson{{"messages", msgs},
            {"max_tokens", 2},
            {"tools", {{{"type", "function"},
                        {"function", {{"name", "f"}, {"parameters", {{"type", "object"}, {"properties", {{"n", {{"type", "integer"}, {"not", {{"const", 2}}}}}}}}}}}}}}}
          .dump());
  EXPECT_EQ(ok.status, 200) << ok.body;
}

// Qwen3's template: its tools render as the reference, and thinking can be
// switched off (chat_template_kwargs), which writes the empty think block
// after the generation prompt; the story model writes no <think> block, so
// its reply is all content and there is no reasoning_content.
TEST_F(DaemonQwen3, ToolsAndThinkingSwitchedOff) {
  const Json models = Json::parse(http_request(sock(), "GET", "/v1/models").body);
  EXPECT_EQ(models["data"][0]["tool_calls"], "qwen3") << models.dump();
  EXPECT_EQ(models["data"][0]["thinking"], true) << models.dump();
  expect_auto_renders<DaemonQwen3>({"tools, a user turn", "a full round: calls, responses, an answer, a new question"});
  const auto [c, rendered] = reference_case("thinking switched off");
  const HttpResponse off = post_raw(sock(), "/v1/chat/completions",
                                    case_body(c, {{"max_tokens", 12}, {"temperature", 0},
                                                  {"chat_template_kwargs", {{"enable_thinking", false}}}}));
  ASSERT_EQ(off.status, 200) << off.body;
  const Json j = off.json();
  const Json plain = post("/v1/completions", {{"prompt", rendered}, {"max_tokens", 12}, {"temperature", 0}});
  EXPECT_EQ(j["usage"]["prompt_tokens"], plain["usage"]["prompt_tokens"]);
  EXPECT_EQ(j["choices"][0]["message"]["content"], plain["choices"][0]["text"]);
  EXPECT_FALSE(j["choices"][0]["message"].contains("reasoning_content")) << j.dump();
  // Without the switch the prompt lacks the block: 4 tokens fewer here ("<think>\n\n</think>\n\n" as text).
  const Json on = post_raw(sock(), "/v1/chat/completions", case_body(c, {{"max_tokens", 1}})).json();
  EXPECT_LT(on["usage"]["prompt_tokens"].get<int>(), j["usage"]["prompt_tokens"].get<int>());
  // An earlier turn's reasoning_content is the template's to place.
  const auto [h, history] = reference_case("reasoning_content in the history");
  OJson messages = h["messages"];
  messages.erase(messages.size() - 1);  // the last assistant turn: the reply to come
  const Json with = post_raw(sock(), "/v1/chat/completions", OJson{{"messages", messages}, {"max_tokens", 1}}.dump()).json();
  EXPECT_EQ(with["choices"][0]["finish_reason"], "length") << with.dump();
  // Bad values are 400s naming them.
  const HttpResponse bad = post_raw(sock(), "/v1/chat/completions",
                                    case_body(c, {{"chat_template_kwargs", {{"thinking_budget", 5}}}}));
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("'thinking_budget'"), std::string::npos) << bad.body;
}

}  // namespace
}  // namespace minfer::test
