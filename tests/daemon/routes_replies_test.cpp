// Routes (404/405 with Allow), HTTP reply framing, the OpenAI response
// shapes and /infill's llama.cpp ones, without a daemon.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "daemon/minferd/http_reply.h"
#include "daemon/minferd/infill_response.h"
#include "daemon/minferd/openai_response.h"
#include "daemon/minferd/routes.h"

namespace minfer::daemon {
namespace {

using Json = nlohmann::json;

TEST(Routes, KnownPathsMethodsAndQueries) {
  auto r = route("POST", "/v1/completions?x=1");
  ASSERT_TRUE(std::holds_alternative<Route>(r));
  EXPECT_EQ(std::get<Route>(r).endpoint, Endpoint::kCompletions);
  EXPECT_EQ(std::get<Route>(route("GET", "/metrics")).endpoint, Endpoint::kMetrics);
  EXPECT_EQ(std::get<Route>(route("POST", "/infill")).endpoint, Endpoint::kInfill);
  EXPECT_STREQ(endpoint_label(Endpoint::kInfill), "/infill");
  auto m = route("GET", "/v1/models/stories260K.gguf");
  EXPECT_EQ(std::get<Route>(m).endpoint, Endpoint::kModel);
  EXPECT_EQ(std::get<Route>(m).model_id, "stories260K.gguf");
}

TEST(Routes, UnknownPathIs404AndWrongMethodIs405WithAllow) {
  auto r = route("GET", "/v2/nothing");
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).status, 404);
  EXPECT_EQ(std::get<ApiError>(r).code, "not_found");
  EXPECT_EQ(std::get<ApiError>(r).message, "Invalid URL (GET /v2/nothing)");
  auto w = route("GET", "/v1/chat/completions");
  ASSERT_TRUE(std::holds_alternative<ApiError>(w));
  EXPECT_EQ(std::get<ApiError>(w).status, 405);
  EXPECT_EQ(std::get<ApiError>(w).allow, "POST");
  EXPECT_EQ(std::get<ApiError>(route("DELETE", "/health")).allow, "GET");
  EXPECT_EQ(std::get<ApiError>(route("GET", "/infill")).allow, "POST");
  EXPECT_EQ(std::get<ApiError>(route("POST", "/v1/models/x")).allow, "GET");
}

TEST(HttpReply, ErrorReplyCarriesTheOpenAiBodyAndHeaders) {
  ApiError e = server_error(503, "queue_full", "full", 1);
  const std::string bytes = serialize_reply(error_reply(e), 11, true);
  EXPECT_EQ(bytes.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u) << bytes;
  EXPECT_NE(bytes.find("Retry-After: 1\r\n"), std::string::npos) << bytes;
  const std::string body = bytes.substr(bytes.find("\r\n\r\n") + 4);
  EXPECT_NE(bytes.find("Content-Length: " + std::to_string(body.size()) + "\r\n"), std::string::npos);
  const Json j = Json::parse(body);
  EXPECT_EQ(j, Json::parse(R"({"error":{"message":"full","type":"server_error","param":null,"code":"queue_full"}})"));
  EXPECT_NE(serialize_reply(error_reply(e), 11, false).find("Connection: close\r\n"), std::string::npos);
}

TEST(HttpReply, StreamFraming) {
  const std::string head = stream_head(11, true, "7");
  EXPECT_NE(head.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  EXPECT_NE(head.find("Content-Type: text/event-stream\r\n"), std::string::npos);
  EXPECT_NE(head.find("X-Request-Id: 7\r\n"), std::string::npos);
  EXPECT_EQ(stream_piece("data: x\n\n", 11), "9\r\ndata: x\n\n\r\n");
  EXPECT_EQ(stream_piece("", 11), "");  // an empty chunk would end the body
  EXPECT_EQ(stream_end(11), "0\r\n\r\n");
  // HTTP/1.0 has no chunks: the body runs to the end of the connection.
  EXPECT_NE(stream_head(10, true, "7").find("Connection: close\r\n"), std::string::npos);
  EXPECT_EQ(stream_piece("abc", 10), "abc");
  EXPECT_EQ(stream_end(10), "");
}

TEST(OpenAiResponse, CompletionAndChatObjects) {
  ResponseIdentity id{ApiKind::kCompletion, "cmpl-1", 123, "m.gguf"};
  const Json c = Json::parse(completion_body(id, "hi", "length", Usage{5, 2}));
  EXPECT_EQ(c, Json::parse(R"({"id":"cmpl-1","object":"text_completion","created":123,"model":"m.gguf",
    "system_fingerprint":null,"choices":[{"index":0,"text":"hi","logprobs":null,"finish_reason":"length"}],
    "usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":0}}})"));
  EXPECT_EQ(Json::parse(completion_body(id, "hi", "length", Usage{5, 2, 4}))["usage"]["prompt_tokens_details"],
            Json::parse(R"({"cached_tokens":4})"));
  id.kind = ApiKind::kChat;
  const Json ch = Json::parse(completion_body(id, "yo", "stop", Usage{1, 1}));
  EXPECT_EQ(ch["object"], "chat.completion");
  EXPECT_EQ(ch["choices"][0]["message"], Json::parse(R"({"role":"assistant","content":"yo"})"));
}

TEST(OpenAiResponse, StreamChunks) {
  ResponseIdentity id{ApiKind::kChat, "chatcmpl-1", 5, "m"};
  EXPECT_EQ(Json::parse(role_chunk(id, 0, false))["choices"][0]["delta"], Json::parse(R"({"role":"assistant","content":""})"));
  const Json t = Json::parse(text_chunk(id, 0, "abc", true));
  EXPECT_EQ(t["object"], "chat.completion.chunk");
  EXPECT_EQ(t["choices"][0]["delta"]["content"], "abc");
  EXPECT_TRUE(t["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(t.contains("usage") && t["usage"].is_null());
  EXPECT_FALSE(Json::parse(text_chunk(id, 0, "abc", false)).contains("usage"));
  EXPECT_EQ(Json::parse(finish_chunk(id, 0, "stop", false))["choices"][0]["finish_reason"], "stop");
  const Json u = Json::parse(usage_chunk(id, Usage{3, 4, 2}));
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["total_tokens"], 7);
  EXPECT_EQ(u["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  id.kind = ApiKind::kCompletion;
  EXPECT_EQ(Json::parse(text_chunk(id, 0, "abc", false))["choices"][0]["text"], "abc");
  EXPECT_EQ(sse_event("{}"), "data: {}\n\n");
}

// /infill's answers in llama.cpp's native shape, worked by hand: 10 prompt
// tokens, 4 reused, 6 evaluated in 12 ms (500/s); 3 generated, the decode
// loop 20 ms for the 2 that decode steps produced (100/s).
TEST(InfillResponse, LlamaCppNativeObjects) {
  GenerationResult r;
  r.finish = FinishReason::kStop;
  r.text = "a + b";
  r.stop_string = "\n";
  r.n_prompt = 10;
  r.n_cached = 4;
  r.n_generated = 3;
  r.prefill_ms = 12;
  r.decode_ms = 20;
  EXPECT_EQ(Json::parse(infill_body("m.gguf", r, true, false)), Json::parse(R"({"index":0,"content":"a + b","tokens":[],
    "id_slot":0,"stop":true,"model":"m.gguf","tokens_predicted":3,"tokens_evaluated":10,"tokens_cached":4,
    "truncated":true,"stop_type":"word","stopping_word":"\n","timings":{"prompt_n":6,"prompt_ms":12.0,
    "prompt_per_second":500.0,"predicted_n":3,"predicted_ms":20.0,"predicted_per_second":100.0}})"));
  // The stream's last event: the same, its content sent already.
  EXPECT_EQ(Json::parse(infill_body("m.gguf", r, true, true))["content"], "");
  EXPECT_EQ(Json::parse(infill_chunk("a +", 2)), Json::parse(R"({"index":0,"content":"a +","stop":false,
    "tokens_predicted":2})"));
  r.finish = FinishReason::kLength;
  r.stop_string.clear();
  EXPECT_STREQ(infill_stop_type(r), "limit");
  r.finish = FinishReason::kEos;
  EXPECT_STREQ(infill_stop_type(r), "eos");
  r.finish = FinishReason::kStop;  // a constrained output that closed: the model's own end
  EXPECT_STREQ(infill_stop_type(r), "eos");
}

// Tool calls and a thinking model's reasoning in the chat shapes.
TEST(OpenAiResponse, ToolCallsAndReasoning) {
  const ResponseIdentity id{ApiKind::kChat, "chatcmpl-6b1a000002", 5, "m"};
  EXPECT_EQ(tool_call_id(id, 0, 3), "call_6b1a000002_3");
  ToolReply reply{"", {{"", "get_weather", R"({"city": "Paris"})"}, {"", "add", R"({"a": 1})"}}};
  const Json calls = Json::parse(completion_body(id, "(unused)", "tool_calls", Usage{1, 9}, nullptr, &reply, "Look it up."));
  EXPECT_EQ(calls["choices"][0]["message"], Json::parse(R"({"role": "assistant", "content": null,
    "reasoning_content": "Look it up.", "tool_calls": [
    {"id": "call_6b1a000002_0", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
    {"id": "call_6b1a000002_1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1}"}}]})"));
  EXPECT_EQ(calls["choices"][0]["finish_reason"], "tool_calls");
  // Content and no calls: a string, no tool_calls, no reasoning_content when there was none.
  const ToolReply text{"Hello", {}};
  EXPECT_EQ(Json::parse(completion_body(id, "x", "stop", Usage{1, 1}, nullptr, &text))["choices"][0]["message"],
            Json::parse(R"({"role": "assistant", "content": "Hello"})"));
  const ToolReply empty{"", {}};
  EXPECT_EQ(Json::parse(completion_body(id, "x", "stop", Usage{1, 1}, nullptr, &empty))["choices"][0]["message"]["content"], "");
  // Streamed: a call whole in one delta with its index; reasoning as reasoning_content deltas.
  EXPECT_EQ(Json::parse(tool_call_chunk(id, 0, 1, reply.calls[1], false))["choices"][0]["delta"],
            Json::parse(R"({"tool_calls": [{"index": 1, "id": "call_6b1a000002_1", "type": "function",
              "function": {"name": "add", "arguments": "{\"a\": 1}"}}]})"));
  EXPECT_EQ(Json::parse(reasoning_chunk(id, 0, "hmm", false))["choices"][0]["delta"], Json::parse(R"({"reasoning_content": "hmm"})"));
  EXPECT_STREQ(openai_finish_reason(FinishReason::kEos, true), "tool_calls");
  EXPECT_STREQ(openai_finish_reason(FinishReason::kStop, true), "tool_calls");
  EXPECT_STREQ(openai_finish_reason(FinishReason::kLength, true), "length");
  EXPECT_STREQ(openai_finish_reason(FinishReason::kEos, false), "stop");
}

// n choices: each its index, its own finish and log-probabilities, and a
// chat choice's calls named apart from another choice's; chunks carry their
// choice's index.
TEST(OpenAiResponse, SeveralChoices) {
  ResponseIdentity id{ApiKind::kCompletion, "cmpl-6b1a000002", 5, "m"};
  const TokenLogprobs tok{{7, -0.25f, "ab"}, {}};
  const ChoiceLogprobs lp{std::span<const TokenLogprobs>(&tok, 1), 0};
  const ChoiceBody two[] = {{"ab", "length", &lp}, {"cd!", "stop", nullptr}};
  const Json c = Json::parse(completion_body(id, two, Usage{4, 3, 2}));
  EXPECT_EQ(c["choices"], Json::parse(R"([
    {"index": 0, "text": "ab", "finish_reason": "length",
     "logprobs": {"tokens": ["ab"], "token_logprobs": [-0.25], "top_logprobs": [{}], "text_offset": [0]}},
    {"index": 1, "text": "cd!", "finish_reason": "stop", "logprobs": null}])"));
  EXPECT_EQ(c["usage"]["total_tokens"], 7);
  EXPECT_EQ(Json::parse(text_chunk(id, 2, "x", false))["choices"][0]["index"], 2);
  EXPECT_EQ(Json::parse(finish_chunk(id, 1, "stop", false))["choices"][0]["index"], 1);

  id.kind = ApiKind::kChat;
  EXPECT_EQ(tool_call_id(id, 1, 0), "call_6b1a000002_1_0");
  const ToolReply calls{"", {{"", "add", R"({"a": 1})"}}};
  const ToolReply text{"Hi", {}};
  const ChoiceBody chat[] = {{"", "stop", nullptr, &text}, {"", "tool_calls", nullptr, &calls}};
  const Json ch = Json::parse(completion_body(id, chat, Usage{1, 2}));
  EXPECT_EQ(ch["choices"][0]["message"], Json::parse(R"({"role": "assistant", "content": "Hi"})"));
  EXPECT_EQ(ch["choices"][1]["index"], 1);
  EXPECT_EQ(ch["choices"][1]["message"]["tool_calls"][0]["id"], "call_6b1a000002_1_0");
  const Json role = Json::parse(role_chunk(id, 1, false));
  EXPECT_EQ(role["choices"][0]["index"], 1);
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(Json::parse(tool_call_chunk(id, 1, 0, calls.calls[0], false))["choices"][0]["delta"]["tool_calls"][0]["id"],
            "call_6b1a000002_1_0");
  EXPECT_EQ(Json::parse(reasoning_chunk(id, 3, "hmm", false))["choices"][0]["index"], 3);
}

TEST(OpenAiResponse, FinishReasons) {
  EXPECT_STREQ(openai_finish_reason(FinishReason::kLength), "length");
  EXPECT_STREQ(openai_finish_reason(FinishReason::kEos), "stop");
  EXPECT_STREQ(openai_finish_reason(FinishReason::kStop), "stop");
  EXPECT_EQ(openai_finish_reason(FinishReason::kCancelled), nullptr);
}

TEST(OpenAiResponse, InvalidUtf8IsReplacedNotThrown) {
  ResponseIdentity id{ApiKind::kCompletion, "c", 1, "m"};
  const Json j = Json::parse(text_chunk(id, 0, "a\xff", false));
  EXPECT_EQ(j["choices"][0]["text"], "a\xEF\xBF\xBD");
}

}  // namespace
}  // namespace minfer::daemon
