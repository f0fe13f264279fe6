// Bad input against a real daemon: malformed HTTP, malformed or non-object
// JSON, wrong types, missing fields, bad roles, prompts longer than the
// context, max_tokens out of range, absurd n, unknown paths, wrong methods,
// oversized bodies. Each gets its status and an OpenAI-style error body, and
// the daemon keeps serving (checked after every case).
#include <gtest/gtest.h>

#include "tests/daemon/daemon_process.h"
#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/http_test_client.h"

namespace minfer::test {
namespace {

using Json = nlohmann::json;

struct BodyLimitSpec {
  static DaemonSpec spec() {
    DaemonSpec s;
    s.args = {"--body-limit-bytes", "65536", "--header-timeout-ms", "2000"};
    return s;
  }
};

class DaemonBadInput : public DaemonSuite<BodyLimitSpec> {
 protected:
  void TearDown() override {
    // Whatever the case sent, the daemon still answers, correctly.
    const HttpResponse h = http_request(sock(), "GET", "/health");
    EXPECT_EQ(h.status, 200) << daemon_->log();
    const HttpResponse t = post_json(sock(), "/tokenize", {{"content", "Once"}});
    EXPECT_EQ(t.json()["tokens"], Json::parse("[403]"));
  }
};

// Checks status, the error object's shape, its type and code, and its param.
void expect_error(const HttpResponse& r, int status, const std::string& code, const std::string& param = "") {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/json");
  const Json j = r.json();
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  const Json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r.body;
  EXPECT_EQ(e["type"], status >= 500 ? "server_error" : "invalid_request_error") << r.body;
  EXPECT_EQ(e["code"], code) << r.body;
  if (param.empty()) {
    EXPECT_TRUE(e["param"].is_null()) << r.body;
  } else {
    EXPECT_EQ(e["param"], param) << r.body;
  }
}

HttpResponse raw(const std::string& socket, const std::string& bytes) {
  TestConnection c(socket);
  if (!c.send(bytes)) return {};
  return c.read_response(10s).value_or(HttpResponse{});
}

TEST_F(DaemonBadInput, MalformedHttpIs400AndTheConnectionCloses) {
  for (const std::string& bytes :
       {std::string("GARBAGE\r\n\r\n"), std::string("\x01\x02\x03 / HTTP/1.1\r\n\r\n"),
        std::string("POST /v1/completions HTTP/1.1\r\nContent-Length: abc\r\n\r\n"),
        std::string("POST /tokenize HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"),
        std::string("GET /health HTTP/1.1\r\nBad Header\r\n\r\n")}) {
    TestConnection c(sock());
    ASSERT_TRUE(c.send(bytes));
    const auto r = c.read_response(10s);
    ASSERT_TRUE(r.has_value()) << bytes;
    expect_error(*r, 400, "malformed_request");
    EXPECT_FALSE(r->keep_alive);
    EXPECT_TRUE(c.wait_closed(5s));
  }
}

TEST_F(DaemonBadInput, OversizedHeadersAre431) {
  const std::string big = "GET /health HTTP/1.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n";
  expect_error(raw(sock(), big), 431, "request_header_too_large");
}

TEST_F(DaemonBadInput, OversizedBodiesAre413EvenBeforeTheyAreSent) {
  const std::string body = "{\"prompt\":\"" + std::string(70000, 'a') + "\"}";
  expect_error(post_json(sock(), "/v1/completions", Json::parse(body)), 413, "request_too_large");
  // A declared length over the limit is refused from the headers alone.
  TestConnection c(sock());
  ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: 1000000000\r\n\r\n"));
  const auto r = c.read_response(10s);
  ASSERT_TRUE(r.has_value());
  expect_error(*r, 413, "request_too_large");
}

TEST_F(DaemonBadInput, MalformedAndNonObjectJson) {
  expect_error(http_request(sock(), "POST", "/v1/completions", "{\"prompt\":"), 400, "invalid_json");
  expect_error(http_request(sock(), "POST", "/v1/completions", "[1,2,3]"), 400, "invalid_json");
  expect_error(http_request(sock(), "POST", "/v1/chat/completions", "42"), 400, "invalid_json");
  expect_error(http_request(sock(), "POST", "/v1/completions", ""), 400, "invalid_json");
  expect_error(http_request(sock(), "POST", "/v1/completions", "{\"prompt\":\"\xc3\x28\"}"), 400, "invalid_json");
  expect_error(http_request(sock(), "POST", "/tokenize", "{\"content\":1"), 400, "invalid_json");
  // 30000 levels of nesting: parsed without recursion, refused as a non-object.
  expect_error(http_request(sock(), "POST", "/v1/completions", std::string(30000, '[') + std::string(30000, ']')),
               400, "invalid_json");
}

TEST_F(DaemonBadInput, WrongTypesAndMissingFields) {
  expect_error(post_json(sock(), "/v1/completions", {{"max_tokens", 5}}), 400, "missing_field", "prompt");
  expect_error(post_json(sock(), "/v1/completions", {{"prompt", 5}}), 400, "invalid_type", "prompt");
  expect_error(post_json(sock(), "/v1/completions", {{"prompt", "x"}, {"max_tokens", "5"}}), 400, "invalid_type",
               "max_tokens");
  expect_error(post_json(sock(), "/v1/completions", {{"prompt", "x"}, {"temperature", "warm"}}), 400, "invalid_type",
               "temperature");
  expect_error(post_json(sock(), "/v1/completions", {{"prompt", "x"}, {"stream", 1}}), 400, "invalid_type", "stream");
  expect_error(post_json(sock(), "/v1/completions", {{"prompt", "x"}, {"stop", {1, 2}}}), 400, "invalid_type", "stop");
  expect_error(post_json(sock(), "/v1/chat/completions", {{"prompt", "x"}}), 400, "missing_field", "messages");
  expect_error(post_json(sock(), "/v1/chat/completions", {{"messages", "hello"}}), 400, "invalid_type", "messages");
  expect_error(post_json(sock(), "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", 5}}}}}), 400,
               "invalid_type", "messages[0].content");
  expect_error(post_json(sock(), "/tokenize", {{"text", "x"}}), 400, "missing_field", "content");
  expect_error(post_json(sock(), "/detokenize", {{"tokens", "403"}}), 400, "invalid_type", "tokens");
}

TEST_F(DaemonBadInput, BadRoles) {
  for (const char* role : {"wizard", "function", ""}) {
    expect_error(post_json(sock(), "/v1/chat/completions",
                           {{"messages", {{{"role", "user"}, {"content", "hi"}}, {{"role", role}, {"content", "x"}}}}}),
                 400, "invalid_value", "messages[1].role");
  }
  expect_error(post_json(sock(), "/v1/chat/completions", {{"messages", {{{"content", "hi"}}}}}), 400, "missing_field",
               "messages[0].role");
  // The shipped model's template (a ChatML fallback) has no tools: a tool
  // result or call is refused, naming the template; so are declared tools.
  const HttpResponse tool = post_json(sock(), "/v1/chat/completions",
                                      {{"messages", {{{"role", "user"}, {"content", "hi"}}, {{"role", "tool"}, {"content", "x"}}}}});
  expect_error(tool, 400, "invalid_value", "messages[1].role");
  EXPECT_NE(tool.body.find("chat template (chatml (fallback)) has no tool calling"), std::string::npos) << tool.body;
  expect_error(post_json(sock(), "/v1/chat/completions",
                         {{"messages", {{{"role", "assistant"}, {"tool_calls", {{{"id", "c"}, {"type", "function"},
                                          {"function", {{"name", "f"}, {"arguments", "{}"}}}}}}}}}}),
               400, "invalid_value", "messages[0].tool_calls");
  expect_error(post_json(sock(), "/v1/chat/completions",
                         {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                          {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}}),
               400, "unsupported_parameter", "tools");
}

// A suffix asks for fill-in-the-middle; the story model's vocabulary has no
// FIM markers, so it is refused, naming why ("" is no suffix).
TEST_F(DaemonBadInput, SuffixWithoutFimMarkersIsRefused) {
  const HttpResponse r = post_json(sock(), "/v1/completions", {{"prompt", "Once"}, {"suffix", " the end."}});
  expect_error(r, 400, "unsupported_parameter", "suffix");
  EXPECT_NE(r.body.find("no FIM markers"), std::string::npos) << r.body;
  EXPECT_EQ(post_json(sock(), "/v1/completions", {{"prompt", "Once"}, {"suffix", ""}, {"max_tokens", 2}}).status, 200);
  EXPECT_EQ(http_request(sock(), "GET", "/v1/models").json()["data"][0]["fill_in_middle"], false);
}

TEST_F(DaemonBadInput, PromptLongerThanTheContext) {
  std::string text = "Once";
  for (int i = 0; i < 299; ++i) text += " Once";
  const size_t n_tokens = post_json(sock(), "/tokenize", {{"content", text}, {"add_special", true}}).json()["tokens"].size();
  ASSERT_GT(n_tokens, 256u);
  const HttpResponse r = post_json(sock(), "/v1/completions", {{"prompt", text}, {"max_tokens", 4}});
  expect_error(r, 400, "context_length_exceeded", "prompt");
  // The message names the prompt's length and the context's.
  const std::string message = r.json()["error"]["message"].get<std::string>();
  EXPECT_NE(message.find(std::to_string(n_tokens) + " tokens"), std::string::npos) << message;
  EXPECT_NE(message.find("256"), std::string::npos) << message;
  expect_error(post_json(sock(), "/v1/completions", {{"prompt", std::vector<int>(256, 403)}}), 400,
               "context_length_exceeded", "prompt");
  expect_error(post_json(sock(), "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", text}}}}}), 400,
               "context_length_exceeded", "messages");
}

TEST_F(DaemonBadInput, MaxTokensOutOfRange) {
  for (int bad : {0, -1, -1000000}) {
    expect_error(post_json(sock(), "/v1/completions", {{"prompt", "x"}, {"max_tokens", bad}}), 400, "invalid_value",
                 "max_tokens");
  }
  expect_error(post_json(sock(), "/v1/completions", {{"prompt", "x"}, {"max_tokens", 100000}}), 400,
               "context_length_exceeded", "max_tokens");
  // 5 prompt tokens + 252 > 256: fits max_tokens alone, not with the prompt.
  const HttpResponse r = post_json(sock(), "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 252}});
  expect_error(r, 400, "context_length_exceeded", "max_tokens");
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("257"), std::string::npos) << r.body;
  expect_error(post_json(sock(), "/v1/chat/completions",
                         {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"max_completion_tokens", -3}}),
               400, "invalid_value", "max_completion_tokens");
}

TEST_F(DaemonBadInput, ChoicesOutOfRange) {
  for (const Json& n : {Json(129), Json(0), Json(1000000000), Json(-1)}) {
    const HttpResponse r = post_json(sock(), "/v1/completions", {{"prompt", "x"}, {"n", n}});
    expect_error(r, 400, "invalid_value", "n");
    EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("allowed 1 to 128"), std::string::npos) << r.body;
  }
  expect_error(post_json(sock(), "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"n", "3"}}),
               400, "invalid_type", "n");
}

TEST_F(DaemonBadInput, OutOfVocabularyTokensAndRanges) {
  expect_error(post_json(sock(), "/v1/completions", {{"prompt", {1, 9999}}}), 400, "invalid_value", "prompt");
  expect_error(post_json(sock(), "/detokenize", {{"tokens", {-1}}}), 400, "invalid_value", "tokens");
  expect_error(post_json(sock(), "/v1/completions", {{"prompt", "x"}, {"logit_bias", {{"99999", 1}}}}), 400,
               "invalid_value", "logit_bias");
  expect_error(post_json(sock(), "/v1/completions", {{"prompt", "x"}, {"top_p", 1.5}}), 400, "invalid_value", "top_p");
  expect_error(post_json(sock(), "/v1/completions", {{"prompt", "x"}, {"logprobs", 25}}), 400, "invalid_value",
               "logprobs");
  for (int bad : {-2, 257}) {
    const HttpResponse r = post_json(sock(), "/v1/completions", {{"prompt", "x"}, {"repeat_last_n", bad}});
    expect_error(r, 400, "invalid_value", "repeat_last_n");
    EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("[-1, 256]"), std::string::npos) << r.body;
  }
  // The window in range, with penalties: served.
  const HttpResponse ok = post_json(sock(), "/v1/completions",
                                    {{"prompt", "Once"}, {"max_tokens", 6}, {"repeat_last_n", -1}, {"repeat_penalty", 1.3},
                                     {"frequency_penalty", 0.5}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.json()["usage"]["completion_tokens"], 6) << ok.body;
}

TEST_F(DaemonBadInput, UnknownPathsAre404AndWrongMethods405WithAllow) {
  const HttpResponse nf = http_request(sock(), "GET", "/v1/engines");
  expect_error(nf, 404, "not_found");
  EXPECT_EQ(nf.json()["error"]["message"], "Invalid URL (GET /v1/engines)");
  const HttpResponse get = http_request(sock(), "GET", "/v1/completions");
  expect_error(get, 405, "method_not_allowed");
  EXPECT_EQ(get.header("allow"), "POST");
  const HttpResponse del = http_request(sock(), "DELETE", "/health");
  expect_error(del, 405, "method_not_allowed");
  EXPECT_EQ(del.header("allow"), "GET");
  const HttpResponse post = http_request(sock(), "POST", "/metrics", "{}");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.header("allow"), "GET");
}

TEST_F(DaemonBadInput, ATricklingRequestIsTimedOut) {
  // Headers that never finish (slowloris): closed after --header-timeout-ms.
  TestConnection c(sock());
  ASSERT_TRUE(c.send("GET /health HTTP/1.1\r\nHost: x\r\n"));
  EXPECT_TRUE(c.wait_closed(15s));
}

TEST_F(DaemonBadInput, ErrorsAreCountedInMetricsByStatus) {
  http_request(sock(), "GET", "/nope");
  const std::string m = http_request(sock(), "GET", "/metrics").body;
  EXPECT_NE(m.find("minfer_requests_total{endpoint=\"other\",status=\"404\"}"), std::string::npos) << m;
}

}  // namespace
}  // namespace minfer::test
