// The engine-free request path: bodies → specs → GenerationRequest, against
// model limits given as plain data (n_ctx 256, vocabulary 512, like the
// shipped model). Each case checks the status, code, param and the values
// named in the message.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "daemon/minferd/request_parse.h"

namespace minfer::daemon {
namespace {

const ModelLimits kLimits{256, 512};
const ModelLimits kFimLimits{256, 512, "", ToolStyle::kNone, true};  // a code model's vocabulary

std::optional<ApiError> completion(const std::string& body, GenerationSpec* spec = nullptr) {
  GenerationSpec s;
  auto e = parse_completion_request(body, kLimits, &s);
  if (spec != nullptr) *spec = s;
  return e;
}

std::optional<ApiError> infill(const std::string& body, GenerationSpec* spec = nullptr) {
  GenerationSpec s;
  auto e = parse_infill_request(body, kFimLimits, &s);
  if (spec != nullptr) *spec = s;
  return e;
}

std::optional<ApiError> chat(const std::string& body, GenerationSpec* spec = nullptr) {
  GenerationSpec s;
  auto e = parse_chat_request(body, kLimits, &s);
  if (spec != nullptr) *spec = s;
  return e;
}

void expect_error(const std::optional<ApiError>& e, const std::string& code, const std::string& param,
                  const std::string& in_message = "") {
  ASSERT_TRUE(e.has_value()) << "expected " << code;
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->type, "invalid_request_error");
  EXPECT_EQ(e->code, code) << e->message;
  EXPECT_EQ(e->param, param) << e->message;
  if (!in_message.empty()) {
    EXPECT_NE(e->message.find(in_message), std::string::npos) << e->message;
  }
}

TEST(CompletionRequest, AcceptsTheOpenAiFields) {
  GenerationSpec s;
  ASSERT_FALSE(completion(R"({"model":"x","prompt":"Once","max_tokens":8,"temperature":0.5,"top_p":0.9,"top_k":7,
    "min_p":0.1,"seed":-3,"stop":["a","b"],"presence_penalty":0.5,"frequency_penalty":-0.5,"repeat_penalty":1.1,
    "repeat_last_n":32,"logit_bias":{"5":-100,"6":2.5},"n":1,"stream":true,"stream_options":{"include_usage":true},"user":"u"})",
                          &s));
  EXPECT_EQ(s.kind, ApiKind::kCompletion);
  ASSERT_EQ(s.prompts.size(), 1u);
  EXPECT_EQ(s.prompts[0].text, "Once");
  EXPECT_FALSE(s.prompts[0].is_tokens);
  EXPECT_EQ(s.max_tokens, 8);
  EXPECT_FLOAT_EQ(s.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(s.sampling.top_p, 0.9f);
  EXPECT_EQ(s.sampling.top_k, 7);
  EXPECT_FLOAT_EQ(s.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(s.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(s.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(s.sampling.repeat_penalty, 1.1f);
  EXPECT_EQ(s.sampling.penalty_last_n, 32);
  EXPECT_EQ(s.seed, static_cast<uint64_t>(-3));
  EXPECT_EQ(s.stop, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(s.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(s.sampling.logit_bias[0], (std::pair<int32_t, float>{5, -100.0f}));
  EXPECT_EQ(s.sampling.logit_bias[1], (std::pair<int32_t, float>{6, 2.5f}));
  EXPECT_TRUE(s.stream);
  EXPECT_TRUE(s.include_usage);
}

// repeat_last_n (llama.cpp's): the penalties' window; -1 the context, 0
// none; left out, the sampler's default (64).
TEST(CompletionRequest, RepeatLastNSetsThePenaltiesWindow) {
  GenerationSpec s;
  ASSERT_FALSE(completion(R"({"prompt":"x","repeat_last_n":-1})", &s));
  EXPECT_EQ(s.sampling.penalty_last_n, 256);
  ASSERT_FALSE(completion(R"({"prompt":"x","repeat_last_n":0,"repeat_penalty":1.5})", &s));
  EXPECT_EQ(s.sampling.penalty_last_n, 0);
  EXPECT_FALSE(s.sampling.penalties());
  ASSERT_FALSE(completion(R"({"prompt":"x"})", &s));
  EXPECT_EQ(s.sampling.penalty_last_n, 64);
  expect_error(completion(R"({"prompt":"x","repeat_last_n":"64"})"), "invalid_type", "repeat_last_n");
}

TEST(CompletionRequest, PromptForms) {
  GenerationSpec s;
  ASSERT_FALSE(completion(R"({"prompt":[1,403,407]})", &s));
  ASSERT_EQ(s.prompts.size(), 1u);
  EXPECT_TRUE(s.prompts[0].is_tokens);
  EXPECT_EQ(s.prompts[0].tokens, (std::vector<int32_t>{1, 403, 407}));
  ASSERT_FALSE(completion(R"({"prompt":["one prompt"]})", &s));
  ASSERT_EQ(s.prompts.size(), 1u);
  EXPECT_EQ(s.prompts[0].text, "one prompt");
  ASSERT_FALSE(completion(R"({"prompt":[[1,2]]})", &s));
  ASSERT_EQ(s.prompts.size(), 1u);
  EXPECT_EQ(s.prompts[0].tokens, (std::vector<int32_t>{1, 2}));
  // Several prompts (OpenAI's batch form), in order, of one form.
  ASSERT_FALSE(completion(R"({"prompt":["a","b c",""]})", &s));
  ASSERT_EQ(s.prompts.size(), 3u);
  EXPECT_EQ(s.prompts[1].text, "b c");
  EXPECT_EQ(s.prompts[2].text, "");
  ASSERT_FALSE(completion(R"({"prompt":[[1,2],[3]],"n":2})", &s));
  ASSERT_EQ(s.prompts.size(), 2u);
  EXPECT_EQ(s.prompts[1].tokens, std::vector<int32_t>{3});
  EXPECT_EQ(s.n, 2);
  expect_error(completion(R"({"prompt":["a",[1]]})"), "invalid_type", "prompt", "mixes strings and token arrays");
  expect_error(completion(R"({"prompt":[[1],[]]})"), "invalid_value", "prompt[1]", "empty array");
  expect_error(completion(R"({"prompt":[[1],[9999]]})"), "invalid_value", "prompt[1]", "9999");
  expect_error(completion(R"({"prompt":[[1],["x"]]})"), "invalid_type", "prompt[1]");
  expect_error(completion(R"({"prompt":["a","b"],"n":65})"), "invalid_value", "n", "2 prompts and 'n' is 65: 130 choices");
  std::string many = R"({"prompt":[)";
  for (int i = 0; i < 129; ++i) many += i ? ",\"x\"" : "\"x\"";
  expect_error(completion(many + "]}"), "invalid_value", "prompt", "129 prompts");
  ASSERT_FALSE(completion(R"({"prompt":"x","stop":"end"})", &s));
  EXPECT_EQ(s.stop, std::vector<std::string>{"end"});
  EXPECT_FALSE(s.max_tokens.has_value());  // the default is applied once the prompt length is known
}

TEST(CompletionRequest, MalformedAndNonObjectBodies) {
  expect_error(completion("{"), "invalid_json", "");
  expect_error(completion(""), "invalid_json", "", "empty");
  expect_error(completion("[1,2]"), "invalid_json", "", "an array");
  expect_error(completion("\"text\""), "invalid_json", "", "a string");
  expect_error(completion("{\"prompt\":\"\xff\xfe\"}"), "invalid_json", "");  // not UTF-8
  // Deep nesting is an error, not a stack overflow.
  expect_error(completion(std::string(100000, '[') + std::string(100000, ']')), "invalid_json", "", "an array");
}

TEST(CompletionRequest, MissingAndMistypedFields) {
  expect_error(completion("{}"), "missing_field", "prompt");
  expect_error(completion(R"({"prompt":null})"), "missing_field", "prompt");
  expect_error(completion(R"({"prompt":5})"), "invalid_type", "prompt", "an integer");
  expect_error(completion(R"({"prompt":{}})"), "invalid_type", "prompt");
  expect_error(completion(R"({"prompt":"x","max_tokens":"16"})"), "invalid_type", "max_tokens", "a string");
  expect_error(completion(R"({"prompt":"x","max_tokens":16.5})"), "invalid_type", "max_tokens");
  expect_error(completion(R"({"prompt":"x","temperature":"hot"})"), "invalid_type", "temperature");
  expect_error(completion(R"({"prompt":"x","stream":"yes"})"), "invalid_type", "stream");
  expect_error(completion(R"({"prompt":"x","stop":5})"), "invalid_type", "stop");
  expect_error(completion(R"({"prompt":"x","stop":["a",1]})"), "invalid_type", "stop");
  expect_error(completion(R"({"prompt":"x","seed":1.5})"), "invalid_type", "seed");
  expect_error(completion(R"({"prompt":"x","model":7})"), "invalid_type", "model");
  expect_error(completion(R"({"prompt":"x","logit_bias":[1]})"), "invalid_type", "logit_bias");
  expect_error(completion(R"({"prompt":"x","logit_bias":{"5":"big"}})"), "invalid_type", "logit_bias");
  expect_error(completion(R"({"prompt":"x","stream":true,"stream_options":3})"), "invalid_type", "stream_options");
  expect_error(completion(R"({"prompt":"x","stream":true,"stream_options":{"include_usage":1}})"), "invalid_type",
               "stream_options.include_usage");
}

TEST(CompletionRequest, ValuesOutOfRange) {
  expect_error(completion(R"({"prompt":"x","max_tokens":0})"), "invalid_value", "max_tokens", "is 0");
  expect_error(completion(R"({"prompt":"x","max_tokens":-5})"), "invalid_value", "max_tokens", "is -5");
  expect_error(completion(R"({"prompt":"x","max_tokens":256})"), "context_length_exceeded", "max_tokens", "256");
  expect_error(completion(R"({"prompt":"x","max_tokens":18446744073709551615})"), "context_length_exceeded",
               "max_tokens");
  expect_error(completion(R"({"prompt":"x","temperature":2.5})"), "invalid_value", "temperature", "[0, 2]");
  expect_error(completion(R"({"prompt":"x","top_p":0})"), "invalid_value", "top_p", "(0, 1]");
  expect_error(completion(R"({"prompt":"x","min_p":1})"), "invalid_value", "min_p");
  expect_error(completion(R"({"prompt":"x","top_k":-1})"), "invalid_value", "top_k");
  expect_error(completion(R"({"prompt":"x","presence_penalty":3})"), "invalid_value", "presence_penalty");
  expect_error(completion(R"({"prompt":"x","frequency_penalty":-2.5})"), "invalid_value", "frequency_penalty");
  expect_error(completion(R"({"prompt":"x","repeat_penalty":0})"), "invalid_value", "repeat_penalty");
  expect_error(completion(R"({"prompt":"x","repeat_last_n":-2})"), "invalid_value", "repeat_last_n", "[-1, 256]");
  expect_error(completion(R"({"prompt":"x","repeat_last_n":257})"), "invalid_value", "repeat_last_n", "is 257");
  expect_error(completion(R"({"prompt":"x","logit_bias":{"512":1}})"), "invalid_value", "logit_bias", "512");
  expect_error(completion(R"({"prompt":"x","logit_bias":{"abc":1}})"), "invalid_value", "logit_bias");
  expect_error(completion(R"({"prompt":"x","logit_bias":{"5":101}})"), "invalid_value", "logit_bias");
  expect_error(completion(R"({"prompt":"x","stop":""})"), "invalid_value", "stop");
  expect_error(completion(R"({"prompt":"x","stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14",
    "15","16","17"]})"),
               "invalid_value", "stop", "17");
  expect_error(completion(R"({"prompt":"x","stream_options":{"include_usage":true}})"), "invalid_value",
               "stream_options");
  expect_error(completion(R"({"prompt":[1,512]})"), "invalid_value", "prompt", "512");
  expect_error(completion(R"({"prompt":[1,-1]})"), "invalid_value", "prompt", "-1");
  expect_error(completion(R"({"prompt":[]})"), "invalid_value", "prompt");
}

TEST(CompletionRequest, ChoicesFromOneToOneHundredTwentyEight) {
  for (const char* n : {"0", "129", "1000000000", "-1"}) {
    expect_error(completion(std::string(R"({"prompt":"x","n":)") + n + "}"), "invalid_value", "n",
                 std::string("'n' is ") + n + "; allowed 1 to 128");
  }
  expect_error(completion(R"({"prompt":"x","n":"2"})"), "invalid_type", "n");
  expect_error(completion(R"({"prompt":"x","n":2.5})"), "invalid_type", "n");
  GenerationSpec s;
  EXPECT_FALSE(completion(R"({"prompt":"x"})", &s));
  EXPECT_EQ(s.n, 1);
  for (const int n : {1, 3, 128}) {
    EXPECT_FALSE(completion(R"({"prompt":"x","n":)" + std::to_string(n) + "}", &s));
    EXPECT_EQ(s.n, n);
    EXPECT_FALSE(chat(R"({"messages":[{"role":"user","content":"x"}],"n":)" + std::to_string(n) + "}", &s));
    EXPECT_EQ(s.n, n);
  }
}

// best_of (completions): n to 128 candidates, prompts × best_of at most 128,
// not above n in a stream.
TEST(CompletionRequest, BestOfIsNToTheChoicesLimit) {
  GenerationSpec s;
  ASSERT_FALSE(completion(R"({"prompt":"x","n":2,"best_of":5})", &s));
  EXPECT_EQ(s.n, 2);
  EXPECT_EQ(s.best_of, 5);
  ASSERT_FALSE(completion(R"({"prompt":"x","best_of":128})", &s));
  EXPECT_EQ(s.best_of, 128);
  ASSERT_FALSE(completion(R"({"prompt":"x","n":3,"best_of":3,"stream":true})", &s));  // best_of = n streams
  expect_error(completion(R"({"prompt":"x","n":3,"best_of":2})"), "invalid_value", "best_of", "allowed n (3) to 128");
  expect_error(completion(R"({"prompt":"x","best_of":0})"), "invalid_value", "best_of");
  expect_error(completion(R"({"prompt":"x","best_of":129})"), "invalid_value", "best_of");
  expect_error(completion(R"({"prompt":"x","best_of":"2"})"), "invalid_type", "best_of");
  expect_error(completion(R"({"prompt":["a","b"],"best_of":65})"), "invalid_value", "best_of", "130 candidates");
  expect_error(completion(R"({"prompt":"x","best_of":2,"stream":true})"), "unsupported_parameter", "best_of",
               "known only at the end");
}

TEST(CompletionRequest, UnsupportedFeaturesAreRefused) {
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"echo":true})"), "unsupported_parameter", "echo");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"best_of":3})"), "unsupported_parameter", "best_of",
               "completions only");
  // suffix: fill-in-the-middle, only where the vocabulary has its markers,
  // not with echo, not on chat.
  expect_error(completion(R"({"prompt":"x","suffix":"end"})"), "unsupported_parameter", "suffix", "no FIM markers");
  ModelLimits fim = kLimits;
  fim.fill_in_middle = true;
  GenerationSpec s;
  ASSERT_FALSE(parse_completion_request(R"({"prompt":"x","suffix":"end"})", fim, &s));
  EXPECT_EQ(s.suffix, "end");
  expect_error(parse_completion_request(R"({"prompt":"x","suffix":"end","echo":true})", fim, &s),
               "unsupported_parameter", "suffix", "echo");
  expect_error(parse_completion_request(R"({"prompt":"x","suffix":3})", fim, &s), "invalid_type", "suffix");
  expect_error(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"suffix":"end"})", fim, &s),
               "unsupported_parameter", "suffix", "completions only");
  // Their neutral values are fine ("" is no suffix).
  EXPECT_FALSE(completion(R"({"prompt":"x","logprobs":null,"echo":false,"best_of":1,"suffix":""})", &s));
  EXPECT_FALSE(s.suffix);
}

// Log-probabilities: completions' "logprobs": N (0-20; false or null: none),
// chat's "logprobs": true with "top_logprobs": N (only with it).
TEST(GenerationRequest, LogprobsInEachEndpointsForm) {
  GenerationSpec s;
  ASSERT_FALSE(completion(R"({"prompt":"x"})", &s));
  EXPECT_EQ(s.top_logprobs, -1);
  for (const char* off : {"null", "false"}) {
    ASSERT_FALSE(completion(std::string(R"({"prompt":"x","logprobs":)") + off + "}", &s));
    EXPECT_EQ(s.top_logprobs, -1) << off;
  }
  ASSERT_FALSE(completion(R"({"prompt":"x","logprobs":0})", &s));
  EXPECT_EQ(s.top_logprobs, 0);
  ASSERT_FALSE(completion(R"({"prompt":"x","logprobs":20})", &s));
  EXPECT_EQ(s.top_logprobs, 20);
  GenerationRequest req;
  ASSERT_FALSE(make_generation_request(s, {1, 2}, kLimits, 7, &req));
  EXPECT_EQ(req.top_logprobs, 20);
  expect_error(completion(R"({"prompt":"x","logprobs":21})"), "invalid_value", "logprobs", "'logprobs' is 21; allowed [0, 20]");
  expect_error(completion(R"({"prompt":"x","logprobs":-1})"), "invalid_value", "logprobs");
  expect_error(completion(R"({"prompt":"x","logprobs":true})"), "invalid_type", "logprobs", "must be an integer");
  expect_error(completion(R"({"prompt":"x","logprobs":"3"})"), "invalid_type", "logprobs");

  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  ASSERT_FALSE(chat("{" + msgs + "}", &s));
  EXPECT_EQ(s.top_logprobs, -1);
  ASSERT_FALSE(chat("{" + msgs + R"(,"logprobs":false})", &s));
  EXPECT_EQ(s.top_logprobs, -1);
  ASSERT_FALSE(chat("{" + msgs + R"(,"logprobs":true})", &s));
  EXPECT_EQ(s.top_logprobs, 0);
  ASSERT_FALSE(chat("{" + msgs + R"(,"logprobs":true,"top_logprobs":4})", &s));
  EXPECT_EQ(s.top_logprobs, 4);
  expect_error(chat("{" + msgs + R"(,"top_logprobs":4})"), "invalid_value", "top_logprobs", "needs \"logprobs\": true");
  expect_error(chat("{" + msgs + R"(,"logprobs":true,"top_logprobs":21})"), "invalid_value", "top_logprobs");
  expect_error(chat("{" + msgs + R"(,"logprobs":2})"), "invalid_type", "logprobs");
}

// Completions' echo: the prompt first in the answer; with logprobs the
// prompt is scored (GenerationRequest::prompt_logprobs), and only then may
// max_tokens be 0. Not with stream.
TEST(CompletionRequest, EchoScoresThePromptWithLogprobs) {
  GenerationSpec s;
  ASSERT_FALSE(completion(R"({"prompt":"x","echo":true,"max_tokens":3})", &s));
  EXPECT_TRUE(s.echo);
  GenerationRequest req;
  ASSERT_FALSE(make_generation_request(s, {1, 2}, kLimits, 7, &req));
  EXPECT_FALSE(req.prompt_logprobs);
  ASSERT_FALSE(completion(R"({"prompt":"x","echo":true,"logprobs":1,"max_tokens":0})", &s));
  EXPECT_EQ(s.max_tokens, 0);
  ASSERT_FALSE(make_generation_request(s, {1, 2}, kLimits, 7, &req));
  EXPECT_TRUE(req.prompt_logprobs);
  EXPECT_EQ(req.top_logprobs, 1);
  EXPECT_EQ(req.max_tokens, 0);
  expect_error(completion(R"({"prompt":"x","max_tokens":0})"), "invalid_value", "max_tokens",
               "'max_tokens' is 0; it must be at least 1 (0 only with echo and logprobs");
  expect_error(completion(R"({"prompt":"x","echo":true,"max_tokens":0})"), "invalid_value", "max_tokens");
  expect_error(completion(R"({"prompt":"x","max_tokens":-1,"echo":true,"logprobs":1})"), "invalid_value", "max_tokens");
  expect_error(completion(R"({"prompt":"x","echo":true,"stream":true})"), "unsupported_parameter", "echo");
  expect_error(completion(R"({"prompt":"x","echo":"yes"})"), "invalid_type", "echo");
}

// response_format: text (the default) or json_object; anything else a 400.
TEST(GenerationRequest, ResponseFormatTextOrJsonObject) {
  GenerationSpec s;
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  ASSERT_FALSE(chat("{" + msgs + "}", &s));
  EXPECT_FALSE(s.json_object);
  ASSERT_FALSE(chat("{" + msgs + R"(,"response_format":{"type":"text"}})", &s));
  EXPECT_FALSE(s.json_object);
  ASSERT_FALSE(chat("{" + msgs + R"(,"response_format":{"type":"json_object"}})", &s));
  EXPECT_TRUE(s.json_object);
  GenerationRequest req;
  ASSERT_FALSE(make_generation_request(s, {1, 2}, kLimits, 7, &req));
  EXPECT_TRUE(req.json_object);
  ASSERT_FALSE(completion(R"({"prompt":"x","response_format":{"type":"json_object"}})", &s));
  EXPECT_TRUE(s.json_object);
  ASSERT_FALSE(chat("{" + msgs + R"(,"response_format":{"type":"json_schema","json_schema":{"name":"mood","strict":true,
      "schema":{"type":"object","properties":{"mood":{"enum":["happy","sad"]}},"required":["mood"],
      "additionalProperties":false}}}})", &s));
  ASSERT_TRUE(s.json_schema);
  EXPECT_FALSE(s.json_object);
  ASSERT_FALSE(make_generation_request(s, {1, 2}, kLimits, 7, &req));
  EXPECT_EQ(req.json_schema, s.json_schema);
  expect_error(chat("{" + msgs + R"(,"response_format":{"type":"json_schema"}})"), "missing_field",
               "response_format.json_schema");
  expect_error(chat("{" + msgs + R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object",
      "properties":{"a":{}},"additionalProperties":true}}}})"),
               "invalid_value", "response_format.json_schema.schema", "may only be false");
  expect_error(chat("{" + msgs + R"(,"response_format":"json"})"), "invalid_type", "response_format");
  expect_error(chat("{" + msgs + R"(,"response_format":{}})"), "invalid_value", "response_format");
  expect_error(chat("{" + msgs + R"(,"response_format":{"type":"yaml"}})"), "invalid_value", "response_format", "'yaml'");
}

TEST(ChatRequest, Messages) {
  GenerationSpec s;
  ASSERT_FALSE(chat(R"({"messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":
    [{"type":"text","text":"Hello "},{"type":"text","text":"there"}]},{"role":"assistant","content":"Hi"}],
    "max_completion_tokens":9,"max_tokens":3})",
                    &s));
  EXPECT_EQ(s.kind, ApiKind::kChat);
  ASSERT_EQ(s.messages.size(), 3u);
  EXPECT_EQ(s.messages[0].role, "system");  // developer is OpenAI's new name for it
  EXPECT_EQ(s.messages[0].content, "Be brief.");
  EXPECT_EQ(s.messages[1].content, "Hello there");
  EXPECT_EQ(s.messages[2].role, "assistant");
  EXPECT_EQ(s.max_tokens, 9);  // max_completion_tokens wins
}

TEST(ChatRequest, BadMessages) {
  expect_error(chat("{}"), "missing_field", "messages");
  expect_error(chat(R"({"messages":"hi"})"), "invalid_type", "messages");
  expect_error(chat(R"({"messages":[]})"), "invalid_value", "messages");
  expect_error(chat(R"({"messages":[5]})"), "invalid_type", "messages[0]");
  expect_error(chat(R"({"messages":[{"content":"hi"}]})"), "missing_field", "messages[0].role");
  expect_error(chat(R"({"messages":[{"role":"wizard","content":"hi"}]})"), "invalid_value", "messages[0].role",
               "wizard");
  expect_error(chat(R"({"messages":[{"role":"function","content":"hi"}]})"), "invalid_value", "messages[0].role",
               "expected system, developer, user, assistant or tool");
  expect_error(chat(R"({"messages":[{"role":"user"}]})"), "missing_field", "messages[0].content");
  expect_error(chat(R"({"messages":[{"role":"user","content":5}]})"), "invalid_type", "messages[0].content");
  expect_error(chat(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})"),
               "unsupported_parameter", "messages[0].content[0]", "image_url");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})"),
               "missing_field", "tools[0].function");
  // A model whose chat template has no tools (kLimits) refuses them, naming the template.
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}]})"),
               "unsupported_parameter", "tools", "has no tool calling");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"functions":[{"name":"f"}]})"),
               "unsupported_parameter", "functions", "use 'tools'");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema",
               "json_schema":{"name":"x","schema":{"type":"integer","not":{"const":2}}}}})"),
               "invalid_value", "response_format.json_schema.schema", "'not' is not supported");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0})"), "invalid_value",
               "max_completion_tokens");
}

TEST(ChatRequest, ToolsAndToolMessages) {
  const ModelLimits limits{256, 512, "chatml", ToolStyle::kQwen25};
  GenerationSpec s;
  // The tools keep the client's key order (the template prints them so).
  ASSERT_FALSE(parse_chat_request(
      R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"get_weather",)"
      R"("parameters":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"number"}},"required":["z"]}}}]})",
      limits, &s));
  ASSERT_EQ(s.tools.size(), 1u);
  EXPECT_EQ(s.tools[0],
            R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"number"}},"required":["z"]}}})");
  EXPECT_EQ(s.tool_choice, ToolChoice::kAuto);
  EXPECT_TRUE(s.parallel_tool_calls);
  EXPECT_FALSE(s.forced_tool_call());
  EXPECT_NE(s.tool_call_schema, nullptr) << "auto: the calls the model opens are held to it";
  // A schema outside the subset: auto takes calls as written (no schema), required is a 400.
  const std::string multiple_of =
      R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f",)"
      R"("parameters":{"type":"object","properties":{"n":{"type":"integer","not":{"const":2}}}}}}])";
  ASSERT_FALSE(parse_chat_request(multiple_of + "}", limits, &s));
  EXPECT_EQ(s.tool_call_schema, nullptr);
  expect_error(parse_chat_request(multiple_of + R"(,"tool_choice":"required"})", limits, &s), "invalid_value", "tools",
               "'not' is not supported");

  const std::string tools = R"("tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}])";
  ASSERT_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],)" + tools +
                                      R"(,"tool_choice":"none"})",
                                  limits, &s));
  EXPECT_EQ(s.tool_choice, ToolChoice::kNone);
  EXPECT_TRUE(s.tools.empty()) << "none: the tools are not shown";
  ASSERT_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],)" + tools +
                                      R"(,"tool_choice":"required","parallel_tool_calls":false})",
                                  limits, &s));
  EXPECT_EQ(s.tool_choice, ToolChoice::kRequired);
  EXPECT_FALSE(s.parallel_tool_calls);
  EXPECT_NE(s.tool_call_schema, nullptr);
  ASSERT_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],)" + tools +
                                      R"(,"tool_choice":{"type":"function","function":{"name":"g"}}})",
                                  limits, &s));
  EXPECT_EQ(s.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(s.tool_choice_name, "g");
  EXPECT_NE(s.tool_call_schema, nullptr);
  // "auto" and "none" without tools are plain chats.
  ASSERT_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"auto"})", limits, &s));
  EXPECT_EQ(s.tool_choice, ToolChoice::kNone);

  // A conversation with a call and its result.
  ASSERT_FALSE(parse_chat_request(
      R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[)"
      R"({"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}},)"
      R"({"id":"call_2","type":"function","function":{"name":"g","arguments":{"b":2}}}]},)"
      R"({"role":"tool","tool_call_id":"call_1","content":"42"}]})",
      limits, &s));
  ASSERT_EQ(s.messages.size(), 3u);
  EXPECT_EQ(s.messages[1].content, "");
  ASSERT_EQ(s.messages[1].tool_calls.size(), 2u);
  EXPECT_EQ(s.messages[1].tool_calls[0].id, "call_1");
  EXPECT_EQ(s.messages[1].tool_calls[0].name, "f");
  EXPECT_EQ(s.messages[1].tool_calls[0].arguments, R"({"a": 1})");
  EXPECT_EQ(s.messages[1].tool_calls[1].arguments, R"({"b":2})");  // an object, taken as its JSON
  EXPECT_EQ(s.messages[2].role, "tool");
  EXPECT_EQ(s.messages[2].tool_call_id, "call_1");
  EXPECT_EQ(s.messages[2].content, "42");

  auto err = [&](const std::string& body) { return parse_chat_request(body, limits, &s); };
  expect_error(err(R"({"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f"}}]}]})"),
               "invalid_type", "messages[0].tool_calls[0].function.arguments");
  expect_error(err(R"({"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"code","function":{"name":"f","arguments":"{}"}}]}]})"),
               "invalid_value", "messages[0].tool_calls[0].type");
  expect_error(err(R"({"messages":[{"role":"assistant","tool_calls":5}]})"), "invalid_type", "messages[0].tool_calls");
  expect_error(err(R"({"messages":[{"role":"tool","tool_call_id":7,"content":"x"}]})"), "invalid_type",
               "messages[0].tool_call_id");
  expect_error(err(R"({"messages":[{"role":"user","content":"x"}],)" + tools + R"(,"tool_choice":{"type":"function"}})"),
               "invalid_value", "tool_choice");
  expect_error(err(R"({"messages":[{"role":"user","content":"x"}],)" + tools + R"(,"parallel_tool_calls":"no"})"),
               "invalid_type", "parallel_tool_calls");
  expect_error(err(R"({"messages":[{"role":"user","content":"x"}],"tools":{}})"), "invalid_type", "tools");
  // Thinking: chat_template_kwargs.enable_thinking, reasoning_format, an earlier turn's reasoning_content.
  ASSERT_FALSE(parse_chat_request(
      R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"4","reasoning_content":"add"},)"
      R"({"role":"user","content":"y"}],"chat_template_kwargs":{"enable_thinking":false},"reasoning_format":"none"})",
      limits, &s));
  EXPECT_EQ(s.enable_thinking, std::optional<bool>(false));
  EXPECT_FALSE(s.split_reasoning);
  EXPECT_EQ(s.messages[1].reasoning_content, std::optional<std::string>("add"));
  EXPECT_EQ(s.messages[0].reasoning_content, std::nullopt);
  ASSERT_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}]})", limits, &s));
  EXPECT_EQ(s.enable_thinking, std::nullopt);
  EXPECT_TRUE(s.split_reasoning) << "reasoning apart by default";
  expect_error(err(R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":"no"}})"),
               "invalid_type", "chat_template_kwargs.enable_thinking");
  expect_error(err(R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"tools":[]}})"),
               "unsupported_parameter", "chat_template_kwargs", "'tools'");
  expect_error(err(R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":5})"), "invalid_type",
               "chat_template_kwargs");
  expect_error(err(R"({"messages":[{"role":"user","content":"x"}],"reasoning_format":"raw"})"), "invalid_value",
               "reasoning_format", "'raw'");
  expect_error(err(R"({"messages":[{"role":"assistant","content":"x","reasoning_content":3}]})"), "invalid_type",
               "messages[0].reasoning_content");

  // Completions have no tools.
  GenerationSpec c;
  expect_error(parse_completion_request(R"({"prompt":"x",)" + tools + "}", limits, &c), "unsupported_parameter", "tools",
               "chat completions only");
}

TEST(TokenRequests, ShapesAndDefaults) {
  TokenizeSpec t;
  ASSERT_FALSE(parse_tokenize_request(R"({"content":"Once"})", &t));
  EXPECT_EQ(t.content, "Once");
  EXPECT_FALSE(t.add_special);  // llama.cpp's defaults
  EXPECT_TRUE(t.parse_special);
  EXPECT_FALSE(t.with_pieces);
  expect_error(parse_tokenize_request("{}", &t), "missing_field", "content");
  expect_error(parse_tokenize_request(R"({"content":1})", &t), "invalid_type", "content");
  DetokenizeSpec d;
  ASSERT_FALSE(parse_detokenize_request(R"({"tokens":[403,407]})", kLimits, &d));
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{403, 407}));
  expect_error(parse_detokenize_request(R"({"tokens":[600]})", kLimits, &d), "invalid_value", "tokens", "600");
  expect_error(parse_detokenize_request(R"({"tokens":"abc"})", kLimits, &d), "invalid_type", "tokens");
  expect_error(parse_detokenize_request(R"({"tokens":[1.5]})", kLimits, &d), "invalid_type", "tokens");
}

TEST(GenerationRequest, ContextRules) {
  GenerationSpec s;
  ASSERT_FALSE(completion(R"({"prompt":"x","max_tokens":100,"temperature":0,"stop":["."],"seed":9})", &s));
  GenerationRequest r;
  ASSERT_FALSE(make_generation_request(s, std::vector<int32_t>(156, 1), kLimits, 77, &r));  // 156 + 100 = 256: fits
  EXPECT_EQ(r.prompt.size(), 156u);
  EXPECT_EQ(r.max_tokens, 100);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.seed, 9u);  // the request's seed, not the fallback
  EXPECT_EQ(r.stop, std::vector<std::string>{"."});
  expect_error(make_generation_request(s, std::vector<int32_t>(157, 1), kLimits, 77, &r), "context_length_exceeded",
               "max_tokens", "157");
  expect_error(make_generation_request(s, std::vector<int32_t>(256, 1), kLimits, 77, &r), "context_length_exceeded",
               "prompt", "256");
  expect_error(make_generation_request(s, {}, kLimits, 77, &r), "invalid_value", "prompt", "empty");

  // Defaults: 16 tokens for completions (OpenAI), the rest of the context for chat.
  ASSERT_FALSE(completion(R"({"prompt":"x"})", &s));
  ASSERT_FALSE(make_generation_request(s, std::vector<int32_t>(10, 1), kLimits, 77, &r));
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_EQ(r.sampling.seed, 77u);
  ASSERT_FALSE(make_generation_request(s, std::vector<int32_t>(250, 1), kLimits, 77, &r));
  EXPECT_EQ(r.max_tokens, 6);
  ASSERT_FALSE(chat(R"({"messages":[{"role":"user","content":"x"}]})", &s));
  ASSERT_FALSE(make_generation_request(s, std::vector<int32_t>(10, 1), kLimits, 77, &r));
  EXPECT_EQ(r.max_tokens, 246);
  expect_error(make_generation_request(s, std::vector<int32_t>(300, 1), kLimits, 77, &r), "context_length_exceeded",
               "messages", "300");
}

// /infill: llama.cpp's fields as llama.vscode and llama.vim send them (their
// other hints ignored), and the shared ones.
TEST(InfillRequest, LlamaCppFields) {
  GenerationSpec s;
  ASSERT_FALSE(infill(R"({"input_prefix":"def f():\n","input_suffix":"\nf()\n","prompt":"    return ",
    "input_extra":[{"filename":"a.py","text":"A = 1\n"},{"text":"B = 2\n"}],"n_predict":8,"temperature":0,"top_k":40,
    "top_p":0.9,"stop":["\n\n"],"seed":3,"stream":true,"cache_prompt":true,"samplers":["top_k","top_p","infill"],
    "t_max_prompt_ms":500,"t_max_predict_ms":1000,"n_indent":4,"response_fields":["content"],"id_slot":-1})",
                      &s));
  EXPECT_EQ(s.kind, ApiKind::kInfill);
  EXPECT_EQ(s.n_prompts(), 1);
  EXPECT_EQ(s.infill.prefix, "def f():\n");
  EXPECT_EQ(s.infill.suffix, "\nf()\n");
  EXPECT_EQ(s.infill.prompt, "    return ");
  ASSERT_EQ(s.infill.extra.size(), 2u);
  EXPECT_EQ(s.infill.extra[0].filename, "a.py");
  EXPECT_EQ(s.infill.extra[0].text, "A = 1\n");
  EXPECT_EQ(s.infill.extra[1].filename, "tmp");  // llama.cpp's default
  EXPECT_EQ(s.infill.extra[1].text, "B = 2\n");
  EXPECT_EQ(s.max_tokens, 8);
  EXPECT_FLOAT_EQ(s.sampling.temperature, 0.0f);
  EXPECT_EQ(s.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(s.sampling.top_p, 0.9f);
  EXPECT_EQ(s.stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(s.seed, 3u);
  EXPECT_TRUE(s.stream);
  EXPECT_EQ(s.top_logprobs, -1);
  EXPECT_EQ(s.min_indent, 4);
  EXPECT_EQ(s.max_predict_ms, 1000);

  // Everything is optional: an empty body is an empty prefix, suffix and
  // prompt, no extra context, no limit.
  ASSERT_FALSE(infill("{}", &s));
  EXPECT_EQ(s.infill.prefix, "");
  EXPECT_EQ(s.infill.suffix, "");
  EXPECT_EQ(s.infill.prompt, "");
  EXPECT_TRUE(s.infill.extra.empty());
  EXPECT_FALSE(s.max_tokens);
  EXPECT_EQ(s.min_indent, 0);  // off, as llama.cpp's defaults
  EXPECT_EQ(s.max_predict_ms, 0);
  ASSERT_FALSE(infill(R"({"input_extra":null,"input_prefix":null,"n_indent":null})", &s));
  EXPECT_TRUE(s.infill.extra.empty());
  EXPECT_EQ(s.min_indent, 0);
}

// n_indent and t_max_predict_ms: integers, 0 (off) or more, handed to the
// engine; /v1/completions ignores them as any field it does not know.
TEST(InfillRequest, LineLimits) {
  GenerationSpec s;
  ASSERT_FALSE(infill(R"({"n_indent":0,"t_max_predict_ms":0})", &s));
  EXPECT_EQ(s.min_indent, 0);
  EXPECT_EQ(s.max_predict_ms, 0);
  ASSERT_FALSE(infill(R"({"n_indent":8,"t_max_predict_ms":2147483647})", &s));
  EXPECT_EQ(s.min_indent, 8);
  EXPECT_EQ(s.max_predict_ms, 2147483647);
  GenerationRequest r;
  ASSERT_FALSE(infill(R"({"n_indent":2,"t_max_predict_ms":250})", &s));
  ASSERT_FALSE(make_generation_request(s, std::vector<int32_t>(10, 1), kFimLimits, 77, &r));
  EXPECT_EQ(r.min_indent, 2);
  EXPECT_EQ(r.max_predict_ms, 250);

  expect_error(infill(R"({"n_indent":-1})"), "invalid_value", "n_indent",
               "'n_indent' is -1; allowed 0 (off) to 2147483647");
  expect_error(infill(R"({"n_indent":"4"})"), "invalid_type", "n_indent",
               "'n_indent' must be an integer, got a string");
  expect_error(infill(R"({"n_indent":4.5})"), "invalid_type", "n_indent", "got a number with a fraction");
  expect_error(infill(R"({"n_indent":true})"), "invalid_type", "n_indent", "got a boolean");
  expect_error(infill(R"({"t_max_predict_ms":-500})"), "invalid_value", "t_max_predict_ms",
               "'t_max_predict_ms' is -500; allowed 0 (off) to 2147483647");
  expect_error(infill(R"({"t_max_predict_ms":2147483648})"), "invalid_value", "t_max_predict_ms", "is 2147483648");
  expect_error(infill(R"({"t_max_predict_ms":1e3})"), "invalid_type", "t_max_predict_ms", "must be an integer");
  expect_error(infill(R"({"t_max_predict_ms":[500]})"), "invalid_type", "t_max_predict_ms", "got an array");

  ASSERT_FALSE(completion(R"({"prompt":"x","n_indent":-1,"t_max_predict_ms":"soon"})", &s));
  EXPECT_EQ(s.min_indent, 0);
  EXPECT_EQ(s.max_predict_ms, 0);
  ASSERT_FALSE(make_generation_request(s, std::vector<int32_t>(10, 1), kLimits, 77, &r));
  EXPECT_EQ(r.min_indent, 0);
  EXPECT_EQ(r.max_predict_ms, 0);
}

TEST(InfillRequest, NPredictAndItsAliasMaxTokens) {
  GenerationSpec s;
  ASSERT_FALSE(infill(R"({"n_predict":-1})", &s));
  EXPECT_FALSE(s.max_tokens);  // llama.cpp's -1: until the end of generation or of the context
  ASSERT_FALSE(infill(R"({"max_tokens":5})", &s));
  EXPECT_EQ(s.max_tokens, 5);
  ASSERT_FALSE(infill(R"({"n_predict":5,"max_tokens":5})", &s));
  EXPECT_EQ(s.max_tokens, 5);
  expect_error(infill(R"({"n_predict":5,"max_tokens":6})"), "invalid_value", "max_tokens",
               "'max_tokens' is 6 and 'n_predict' is 5");
  expect_error(infill(R"({"n_predict":-2})"), "invalid_value", "n_predict", "'n_predict' is -2; it must be -1");
  expect_error(infill(R"({"n_predict":0})"), "invalid_value", "n_predict", "'n_predict' is 0");
  expect_error(infill(R"({"n_predict":"8"})"), "invalid_type", "n_predict", "must be an integer, got a string");
  expect_error(infill(R"({"n_predict":8.5})"), "invalid_type", "n_predict");
  expect_error(infill(R"({"n_predict":256})"), "context_length_exceeded", "n_predict",
               "'n_predict' is 256 but the context holds 256 tokens");

  // Against the context: without a limit, the rest of it.
  GenerationRequest r;
  ASSERT_FALSE(infill("{}", &s));
  ASSERT_FALSE(make_generation_request(s, std::vector<int32_t>(10, 1), kFimLimits, 77, &r));
  EXPECT_EQ(r.max_tokens, 246);
  ASSERT_FALSE(infill(R"({"n_predict":250})", &s));
  expect_error(make_generation_request(s, std::vector<int32_t>(10, 1), kFimLimits, 77, &r), "context_length_exceeded",
               "n_predict", "n_predict is 250: 260 exceeds the context of 256");
  expect_error(make_generation_request(s, std::vector<int32_t>(256, 1), kFimLimits, 77, &r), "context_length_exceeded",
               "input_prefix", "256 tokens");
}

TEST(InfillRequest, BadFieldsAreNamed) {
  expect_error(infill(R"({"input_prefix":5})"), "invalid_type", "input_prefix", "must be a string, got an integer");
  expect_error(infill(R"({"input_suffix":["x"]})"), "invalid_type", "input_suffix");
  expect_error(infill(R"({"prompt":[1,2]})"), "invalid_type", "prompt");  // text only: no token ids here
  expect_error(infill(R"({"input_extra":"a.py"})"), "invalid_type", "input_extra",
               "'input_extra' must be an array of {\"filename\", \"text\"} objects, got a string");
  expect_error(infill(R"({"input_extra":{"text":"x"}})"), "invalid_type", "input_extra", "got an object");
  expect_error(infill(R"({"input_extra":[{"text":"x"},"y"]})"), "invalid_type", "input_extra[1]", "got a string");
  expect_error(infill(R"({"input_extra":[{"filename":"a.py"}]})"), "missing_field", "input_extra[0].text",
               "'input_extra[0]' has no \"text\"");
  expect_error(infill(R"({"input_extra":[{"text":null}]})"), "missing_field", "input_extra[0].text");
  expect_error(infill(R"({"input_extra":[{"text":7}]})"), "invalid_type", "input_extra[0].text",
               "'input_extra[0].text' must be a string, got an integer");
  expect_error(infill(R"({"input_extra":[{"text":"x","filename":["a"]}]})"), "invalid_type", "input_extra[0].filename",
               "got an array");
  expect_error(infill(R"(["x"])"), "invalid_json", "");
  expect_error(infill(R"({"temperature":3})"), "invalid_value", "temperature", "[0, 2]");
}

TEST(InfillRequest, RefusesWhatItsAnswerHasNoPlaceFor) {
  expect_error(infill(R"({"n":2})"), "unsupported_parameter", "n", "/infill answers one");
  expect_error(infill(R"({"best_of":2})"), "unsupported_parameter", "best_of", "several candidates");
  expect_error(infill(R"({"echo":true})"), "unsupported_parameter", "echo");
  expect_error(infill(R"({"suffix":"x"})"), "unsupported_parameter", "suffix", "use 'input_suffix'");
  expect_error(infill(R"({"logprobs":3})"), "unsupported_parameter", "logprobs", "no place for");
  expect_error(infill(R"({"logprobs":true})"), "unsupported_parameter", "logprobs");
  expect_error(infill(R"({"n_probs":3})"), "unsupported_parameter", "n_probs", "no place for");
  expect_error(infill(R"({"messages":[{"role":"user","content":"x"}]})"), "unsupported_parameter", "messages");
  expect_error(infill(R"({"stream":true,"stream_options":{"include_usage":true}})"), "unsupported_parameter",
               "stream_options");
  expect_error(infill(R"({"tools":[{"type":"function","function":{"name":"f"}}]})"), "unsupported_parameter", "tools");
  // n 0 is out of range, not a feature.
  expect_error(infill(R"({"n":0})"), "invalid_value", "n", "allowed 1 to 128");
  // Their neutral values are fine.
  EXPECT_FALSE(infill(R"({"n":1,"best_of":1,"echo":false,"suffix":"","logprobs":false,"n_probs":0})"));
  // A vocabulary without FIM markers: every body.
  GenerationSpec s;
  expect_error(parse_infill_request("{}", kLimits, &s), "unsupported_parameter", "input_suffix", "no FIM markers");
}

}  // namespace
}  // namespace minfer::daemon
