// A real minferd on a real socket in a temp dir, serving the shipped
// stories260K model on the CPU: every endpoint's happy path, with bodies
// asserted. Greedy outputs are checked against the reference continuation
// (tests/engine/stories_e2e_test.cpp); chat is checked against the same
// prompt tokenized by /tokenize and completed by /v1/completions, and streams
// against the non-streamed answer for the same seed.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <regex>

#include "tests/daemon/daemon_process.h"
#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/http_test_client.h"
#include "tests/daemon/prometheus_text.h"

namespace minfer::test {
namespace {

using Json = nlohmann::json;

// What the model continues "Once upon a time" with in 27 greedy tokens.
constexpr const char* kGreedy27 = ", there was a little girl named Lily. She loved to play outside in the park.";
constexpr const char* kChatMlRendered = "<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n";

struct DefaultSpec {
  static DaemonSpec spec() { return {}; }
};

class DaemonApi : public DaemonSuite<DefaultSpec> {};

// Joins the streamed text and checks the chunk shapes on the way.
struct Reassembled {
  std::string text;
  std::string finish_reason;
  Json usage;
  bool done = false;
  size_t chunks = 0;
  // The chunks' log-probabilities joined: completions' four lists, chat's content entries.
  Json logprobs = Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
                       {"text_offset", Json::array()}, {"content", Json::array()}};
};

// Each choice's stream, by its index (n choices: chunks name theirs).
std::vector<Reassembled> reassemble_choices(const std::string& body, const std::string& object, bool usage_expected) {
  std::vector<Reassembled> out(1);
  bool done = false;
  Json usage;
  const std::vector<std::string> events = sse_data(body, &done);
  std::string id;
  for (const std::string& e : events) {
    const Json j = Json::parse(e, nullptr, false);
    EXPECT_TRUE(j.is_object()) << e;
    if (!j.is_object()) continue;
    EXPECT_EQ(j["object"], object) << e;
    if (id.empty()) id = j["id"].get<std::string>();
    EXPECT_EQ(j["id"], id) << "every chunk of a stream has the stream's id";
    EXPECT_EQ(j.contains("usage"), usage_expected) << e;
    if (j["choices"].empty()) {
      usage = j["usage"];
      continue;
    }
    EXPECT_TRUE(j.contains("usage") ? j["usage"].is_null() : true) << e;
    EXPECT_EQ(j["choices"].size(), 1u) << e;
    const Json& c = j["choices"][0];
    const size_t index = c["index"].get<size_t>();
    if (index >= out.size()) out.resize(index + 1);
    Reassembled& r = out[index];
    ++r.chunks;
    EXPECT_TRUE(r.finish_reason.empty()) << "a chunk after its choice's finish: " << e;
    if (c.contains("text")) r.text += c["text"].get<std::string>();
    if (c.contains("delta") && c["delta"].contains("content")) r.text += c["delta"]["content"].get<std::string>();
    if (!c["finish_reason"].is_null()) r.finish_reason = c["finish_reason"].get<std::string>();
    if (!c["logprobs"].is_null()) {
      for (auto& [key, list] : r.logprobs.items()) {
        if (c["logprobs"].contains(key)) list.insert(list.end(), c["logprobs"][key].begin(), c["logprobs"][key].end());
      }
    }
  }
  for (Reassembled& r : out) {
    r.done = done;
    r.usage = usage;
  }
  return out;
}

Reassembled reassemble(const std::string& body, const std::string& object, bool usage_expected) {
  std::vector<Reassembled> choices = reassemble_choices(body, object, usage_expected);
  EXPECT_EQ(choices.size(), 1u) << "one choice: every chunk's index is 0";
  return choices.front();
}

// The characters of a UTF-8 string (its lead bytes).
int64_t chars(const std::string& s) {
  int64_t n = 0;
  for (const unsigned char b : s) n += (b & 0xC0) != 0x80;
  return n;
}

TEST_F(DaemonApi, HealthIsReadyWithBackendModelAndUptime) {
  const HttpResponse r = http_request(sock(), "GET", "/health");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/json");
  const Json j = r.json();
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["phase"], "ready");
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_TRUE(j["backend_reason"].is_string() && !j["backend_reason"].get<std::string>().empty()) << j;
  EXPECT_EQ(j["model"], "stories260K.gguf");
  EXPECT_EQ(j["chat_template"], "chatml (fallback)");
  EXPECT_GE(j["uptime_s"].get<double>(), 0.0);
  EXPECT_LT(j["uptime_s"].get<double>(), 600.0);
  EXPECT_EQ(j["queue_capacity"], 16);
}

TEST_F(DaemonApi, ModelsListTheModelWithTemplateAndBackend) {
  const HttpResponse r = http_request(sock(), "GET", "/v1/models");
  ASSERT_EQ(r.status, 200);
  const Json j = r.json();
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  const Json& m = j["data"][0];
  EXPECT_EQ(m["id"], "stories260K.gguf");
  EXPECT_EQ(m["object"], "model");
  EXPECT_EQ(m["owned_by"], "minfer");
  EXPECT_EQ(m["chat_template"], "chatml (fallback)");
  EXPECT_TRUE(m["tool_calls"].is_null()) << m;  // a fallback template has no tools
  EXPECT_EQ(m["thinking"], false);
  EXPECT_EQ(m["backend"], "cpu");
  EXPECT_EQ(m["arch"], "llama");
  EXPECT_EQ(m["n_ctx"], 256);
  EXPECT_EQ(m["vocab_size"], 512);
  const HttpResponse one = http_request(sock(), "GET", "/v1/models/stories260K.gguf");
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(one.json()["id"], "stories260K.gguf");
  const HttpResponse missing = http_request(sock(), "GET", "/v1/models/gpt-4");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.json()["error"]["code"], "model_not_found");
}

TEST_F(DaemonApi, GreedyCompletionIsTheReferenceContinuation) {
  const HttpResponse r = post_json(sock(), "/v1/completions",
                                   {{"model", "anything"}, {"prompt", "Once upon a time"}, {"max_tokens", 27},
                                    {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = r.json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["model"], "stories260K.gguf");
  EXPECT_NEAR(j["created"].get<double>(), static_cast<double>(std::time(nullptr)), 600);
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["text"], kGreedy27);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  Json usage = j["usage"];
  ASSERT_TRUE(usage.contains("prompt_tokens_details")) << usage;
  usage.erase("prompt_tokens_details");  // what the prefix cache reused depends on the request before (below)
  EXPECT_EQ(usage, Json::parse(R"({"prompt_tokens":5,"completion_tokens":27,"total_tokens":32})"));
  EXPECT_NE(r.header("server-timing").find("engine;dur="), std::string::npos);
  EXPECT_FALSE(r.header("x-request-id").empty());
}

// A completion's text goes on from its prompt's: the story model continues
// "Once upon" with " a time" (SPM's "▁a"), space included, so that the prompt
// and the text make the story — with echo too. A chat reply starts a text of
// its own and loses the space, as the start of a document does.
TEST_F(DaemonApi, CompletionTextContinuesThePromptsText) {
  const Json plain = post("/v1/completions", {{"prompt", "Once upon"}, {"max_tokens", 5}, {"temperature", 0}});
  EXPECT_EQ(plain["choices"][0]["text"], " a time, there was");
  const Json echoed =
      post("/v1/completions", {{"prompt", "Once upon"}, {"max_tokens", 5}, {"temperature", 0}, {"echo", true}});
  EXPECT_EQ(echoed["choices"][0]["text"], "Once upon a time, there was");
  Json streamed = {{"prompt", "Once upon"}, {"max_tokens", 5}, {"temperature", 0}, {"stream", true}};
  const HttpResponse r = post_json(sock(), "/v1/completions", streamed);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(reassemble(r.body, "text_completion", false).text, " a time, there was");
  const Json chat = post("/v1/chat/completions",
                         {{"messages", {{{"role", "user"}, {"content", "Once upon"}}}}, {"max_tokens", 5}, {"temperature", 0}});
  const std::string content = chat["choices"][0]["message"]["content"].get<std::string>();
  ASSERT_FALSE(content.empty());
  EXPECT_NE(content[0], ' ') << content;
}

TEST_F(DaemonApi, TokenPromptGivesTheSameText) {
  const Json j = post("/v1/completions", {{"prompt", {1, 403, 407, 261, 378}}, {"max_tokens", 27}, {"temperature", 0}});
  EXPECT_EQ(j["choices"][0]["text"], kGreedy27);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
}

// usage.prompt_tokens_details.cached_tokens (OpenAI's field) counts the prompt
// tokens whose KV the prefix cache reused from an earlier request: all but the
// last for the same prompt, the longest common prefix otherwise (the BOS at
// least), also after a request with another prompt; /metrics adds them up and
// shows the histories kept, and the request's log line carries them.
TEST_F(DaemonApi, CachedTokensCountWhatThePrefixCacheReused) {
  const Json a = {{"prompt", {1, 403, 407, 261, 378}}, {"max_tokens", 3}, {"temperature", 0}};
  post("/v1/completions", a);
  auto cached_total = [] {
    return metric_value(http_request(sock(), "GET", "/metrics").body, "minfer_prompt_tokens_cached_total");
  };
  const double before = cached_total();
  auto cached = [](const Json& r) { return r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(); };
  const Json again = post("/v1/completions", a);
  EXPECT_EQ(again["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(cached(again), 4);
  EXPECT_EQ(again["choices"][0]["text"], post("/v1/completions", a)["choices"][0]["text"]);
  const Json longer = post("/v1/completions", {{"prompt", {1, 403, 407, 261, 378, 261}}, {"max_tokens", 3}, {"temperature", 0}});
  EXPECT_EQ(cached(longer), 5);
  const Json other = post("/v1/completions", {{"prompt", {1, 99, 100}}, {"max_tokens", 3}, {"temperature", 0}});
  EXPECT_EQ(cached(other), 1);
  const Json back = post("/v1/completions", a);  // the longer prompt's history is still kept
  EXPECT_EQ(cached(back), 4);
  EXPECT_EQ(back["choices"][0]["text"], again["choices"][0]["text"]);
  const Json chat = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}});
  EXPECT_GE(cached(chat), 0);
  EXPECT_EQ(cached_total() - before, 4 + 4 + 5 + 1 + 4 + cached(chat));
  const std::string metrics = http_request(sock(), "GET", "/metrics").body;
  EXPECT_GE(metric_value(metrics, "minfer_prefix_cache_histories"), 2) << metrics;  // a's and the other's at least
  const double kept = metric_value(metrics, "minfer_kv_cells{state=\"kept\"}");
  EXPECT_GE(kept, 6 + 3) << metrics;
  EXPECT_EQ(kept + metric_value(metrics, "minfer_kv_cells{state=\"free\"}"), 256) << metrics;
  EXPECT_TRUE(eventually([] { return daemon_->log().find(" prompt 5 (4 cached) gen 3") != std::string::npos; }, 5s))
      << daemon_->log();
  EXPECT_NE(daemon_->log().find("CACHED_TOKENS=5"), std::string::npos) << daemon_->log();
}

// A chat's next turn reuses its conversation's history (the rendered turn
// before and the reply's tokens) though another conversation ran in between:
// the prefix cache keeps both (README, *Prefix cache*).
TEST_F(DaemonApi, AChatsNextTurnReusesItsHistoryAcrossAnotherConversation) {
  auto cached = [](const Json& r) { return r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(); };
  auto turn = [](const Json& messages) {
    return post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 12}, {"temperature", 0}});
  };
  const Json cat = {{{"role", "user"}, {"content", "Tell me a story about a cat."}}};
  const Json c1 = turn(cat);
  const Json d1 = turn({{{"role", "user"}, {"content", "Tell me a story about a dog."}}});
  Json cat2 = cat;
  cat2.push_back({{"role", "assistant"}, {"content", c1["choices"][0]["message"]["content"]}});
  cat2.push_back({{"role", "user"}, {"content", "What happened next?"}});
  const Json c2 = turn(cat2);
  const int p1 = c1["usage"]["prompt_tokens"].get<int>();
  EXPECT_LT(cached(d1), p1 - 4) << "the two first turns part after \"a \"";
  // The whole history: the first turn's prompt and its reply's tokens but
  // the last, which no step evaluated (the reply's text tokenizes as it was
  // generated here).
  EXPECT_EQ(cached(c2), p1 + c1["usage"]["completion_tokens"].get<int>() - 1) << c2;
  EXPECT_LT(cached(c2), c2["usage"]["prompt_tokens"].get<int>());
}

// Completions' "logprobs": N: a token list that spells the text, each
// token's log-probability (greedy: the best of its list of N), text offsets
// in characters; the stream carries the same lists in its chunks. The text
// is the one without log-probabilities.
TEST_F(DaemonApi, CompletionLogprobsSpellTheTextAndStreamTheSame) {
  Json req = {{"prompt", "Once upon a time"}, {"max_tokens", 27}, {"temperature", 0}, {"logprobs", 3}};
  const Json j = post("/v1/completions", req);
  EXPECT_EQ(j["choices"][0]["text"], kGreedy27);
  const Json& lp = j["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << j;
  ASSERT_EQ(lp["tokens"].size(), 27u) << lp;
  ASSERT_EQ(lp["token_logprobs"].size(), 27u);
  ASSERT_EQ(lp["top_logprobs"].size(), 27u);
  ASSERT_EQ(lp["text_offset"].size(), 27u);
  std::string spelled;
  int64_t offset = 0;
  for (size_t i = 0; i < 27; ++i) {
    const std::string token = lp["tokens"][i].get<std::string>();
    const double logprob = lp["token_logprobs"][i].get<double>();
    EXPECT_EQ(lp["text_offset"][i], offset);
    offset += chars(token);
    spelled += token;
    EXPECT_LE(logprob, 0.0);
    const Json& top = lp["top_logprobs"][i];
    ASSERT_EQ(top.size(), 3u) << top;
    double best = -1e30;
    for (const auto& [t, v] : top.items()) best = std::max(best, v.get<double>());
    EXPECT_EQ(best, logprob) << "greedy takes its step's most likely token";
    ASSERT_TRUE(top.contains(token)) << top;
    EXPECT_EQ(top[token], logprob);
  }
  EXPECT_EQ(spelled, kGreedy27);

  req["stream"] = true;
  const HttpResponse r = post_json(sock(), "/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  const Reassembled s = reassemble(r.body, "text_completion", false);
  EXPECT_EQ(s.text, kGreedy27);
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
    EXPECT_EQ(s.logprobs[key], lp[key]) << key;
  }
  // Without the field, and with false: no log-probabilities.
  req.erase("stream");
  req["logprobs"] = false;
  EXPECT_TRUE(post("/v1/completions", req)["choices"][0]["logprobs"].is_null());
}

// Chat's "logprobs": true with "top_logprobs": N: an entry a token with its
// bytes, the same when streamed; a stop string ends the text but the tokens
// generated up to it keep their entries, the streamed ones included.
TEST_F(DaemonApi, ChatLogprobsAreEntriesWithBytesStreamedAlike) {
  Json req = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}}, {"max_tokens", 20},
              {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 2}};
  const Json j = post("/v1/chat/completions", req);
  const Json& lp = j["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << j;
  EXPECT_TRUE(lp["refusal"].is_null());
  const Json& content = lp["content"];
  ASSERT_EQ(content.size(), j["usage"]["completion_tokens"].get<size_t>());
  std::string spelled;
  for (const Json& e : content) {
    std::string bytes;
    for (const Json& b : e["bytes"]) bytes.push_back(static_cast<char>(b.get<int>()));
    EXPECT_EQ(e["token"], bytes) << "ASCII tokens: the string is the bytes";
    spelled += bytes;
    ASSERT_EQ(e["top_logprobs"].size(), 2u) << e;
    EXPECT_EQ(e["top_logprobs"][0]["token"], e["token"]) << e;
    EXPECT_EQ(e["top_logprobs"][0]["logprob"], e["logprob"]);
    EXPECT_LE(e["top_logprobs"][1]["logprob"].get<double>(), e["logprob"].get<double>());
  }
  EXPECT_EQ(spelled, j["choices"][0]["message"]["content"]);

  Json sreq = req;
  sreq["stream"] = true;
  const HttpResponse r = post_json(sock(), "/v1/chat/completions", sreq);
  ASSERT_EQ(r.status, 200) << r.body;
  const Reassembled s = reassemble(r.body, "chat.completion.chunk", false);
  EXPECT_EQ(s.logprobs["content"], content);

  // A stop string inside the text: the entries run to the token that held it.
  const std::string text = j["choices"][0]["message"]["content"].get<std::string>();
  ASSERT_GT(text.size(), 12u) << text;
  req["stop"] = text.substr(8, 4);
  const Json stopped = post("/v1/chat/completions", req);
  EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop");
  const Json& stopped_content = stopped["choices"][0]["logprobs"]["content"];
  ASSERT_GE(stopped_content.size(), 1u);
  ASSERT_LE(stopped_content.size(), content.size());
  EXPECT_EQ(stopped_content, Json(std::vector<Json>(content.begin(), content.begin() + stopped_content.size())));
  sreq["stop"] = req["stop"];
  const HttpResponse rs = post_json(sock(), "/v1/chat/completions", sreq);
  const Reassembled ss = reassemble(rs.body, "chat.completion.chunk", false);
  EXPECT_EQ(ss.text, stopped["choices"][0]["message"]["content"]);
  EXPECT_EQ(ss.logprobs["content"], stopped_content);
}

// Scoring with echo, as evaluation harnesses do: max_tokens 0 answers the
// prompt's text and its tokens' log-probabilities (the first null); with
// tokens generated, they follow the prompt's, the same as without echo; a
// prompt token's log-probability is the one a generation from the prompt
// before it gives that token.
TEST_F(DaemonApi, EchoScoresThePromptAndListsItsTokensFirst) {
  const Json scored = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 1}});
  const Json& choice = scored["choices"][0];
  EXPECT_EQ(choice["text"], "Once upon a time");
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(scored["usage"]["completion_tokens"], 0);
  const Json& lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 5u) << lp;
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  for (size_t i = 1; i < 5; ++i) {
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    EXPECT_EQ(lp["top_logprobs"][i].size(), 1u);
  }
  EXPECT_EQ(lp["tokens"][1], " Once");

  const Json plain = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 27}, {"temperature", 0}, {"logprobs", 1}});
  const Json echoed = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 27}, {"temperature", 0},
                                              {"logprobs", 1}, {"echo", true}});
  EXPECT_EQ(echoed["choices"][0]["text"], std::string("Once upon a time") + kGreedy27);
  const Json& elp = echoed["choices"][0]["logprobs"];
  ASSERT_EQ(elp["tokens"].size(), 32u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(elp["token_logprobs"][i], lp["token_logprobs"][i]) << i;
  for (size_t i = 0; i < 27; ++i) {
    EXPECT_EQ(elp["tokens"][5 + i], plain["choices"][0]["logprobs"]["tokens"][i]);
    EXPECT_EQ(elp["token_logprobs"][5 + i], plain["choices"][0]["logprobs"]["token_logprobs"][i]);
  }
  // Echo alone: the text, no log-probabilities.
  const Json text_only = post("/v1/completions", {{"prompt", {1, 403, 407, 261, 378}}, {"max_tokens", 27}, {"temperature", 0},
                                                 {"echo", true}});
  EXPECT_EQ(text_only["choices"][0]["text"], std::string("Once upon a time") + kGreedy27);
  EXPECT_TRUE(text_only["choices"][0]["logprobs"].is_null());

  // The generation's first token scored as the sixth prompt token.
  const Json ids = post("/tokenize", {{"content", "Once upon a time,"}, {"add_special", true}})["tokens"];
  ASSERT_EQ(ids, Json::parse("[1, 403, 407, 261, 378, 432]"));
  ASSERT_EQ(plain["choices"][0]["logprobs"]["tokens"][0], ",");
  const Json six = post("/v1/completions", {{"prompt", ids}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 0}});
  EXPECT_EQ(six["choices"][0]["logprobs"]["tokens"][5], ",");
  ASSERT_EQ(six["choices"][0]["logprobs"]["token_logprobs"].size(), 6u);
  EXPECT_NEAR(six["choices"][0]["logprobs"]["token_logprobs"][5].get<double>(),
              plain["choices"][0]["logprobs"]["token_logprobs"][0].get<double>(), 1e-4);
}

// response_format json_object: the reply is held to one JSON object — the
// story model's greedy reply opens one and is cut by max_tokens ("length");
// pushed toward '}' (token 128) it closes at once and finishes with "stop",
// streamed the same.
TEST_F(DaemonApi, JsonObjectResponseFormatHoldsTheReplyToAnObject) {
  Json req = {{"messages", {{{"role", "user"}, {"content", "Give me JSON"}}}}, {"max_tokens", 30}, {"temperature", 0},
              {"response_format", {{"type", "json_object"}}}};
  const Json open = post("/v1/chat/completions", req);
  const std::string content = open["choices"][0]["message"]["content"].get<std::string>();
  EXPECT_EQ(open["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(content.substr(0, 1), "{") << content;
  const Json free_text = post("/v1/chat/completions", {{"messages", req["messages"]}, {"max_tokens", 30}, {"temperature", 0}});
  EXPECT_NE(free_text["choices"][0]["message"]["content"].get<std::string>().substr(0, 1), "{");

  req["logit_bias"] = {{"128", 50}};
  const Json closed = post("/v1/chat/completions", req);
  EXPECT_EQ(closed["choices"][0]["message"]["content"], "{}");
  EXPECT_EQ(closed["choices"][0]["finish_reason"], "stop");
  EXPECT_LE(closed["usage"]["completion_tokens"].get<int>(), 3);  // a space may come first (the decoder drops it)
  req["stream"] = true;
  const HttpResponse r = post_json(sock(), "/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  const Reassembled s = reassemble(r.body, "chat.completion.chunk", false);
  EXPECT_EQ(s.text, "{}");
  EXPECT_EQ(s.finish_reason, "stop");
  // A completion goes on from its prompt: the object's first piece keeps
  // its space (JSON allows it; see CompletionTextContinuesThePromptsText).
  const Json completion = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"logit_bias", {{"128", 50}}},
                                                   {"response_format", {{"type", "json_object"}}}});
  EXPECT_EQ(completion["choices"][0]["text"], " {}");
}

// response_format json_schema: a schema whose values are enumerated leaves
// the story model one shape to write; the reply is such an object, ends with
// "stop", and streams the same.
TEST_F(DaemonApi, JsonSchemaResponseFormatGivesAnObjectOfTheSchema) {
  Json req = {{"messages", {{{"role", "user"}, {"content", "How do you feel?"}}}}, {"max_tokens", 40}, {"temperature", 0},
              {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "mood"}, {"strict", true},
                 {"schema", {{"type", "object"}, {"properties", {{"mood", {{"enum", {"happy", "sad"}}}}, {"sure", {{"type", "boolean"}}}}},
                             {"required", {"mood", "sure"}}, {"additionalProperties", false}}}}}}}};
  const Json r = post("/v1/chat/completions", req);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  const std::string content = r["choices"][0]["message"]["content"].get<std::string>();
  const Json object = Json::parse(content, nullptr, false);
  ASSERT_TRUE(object.is_object()) << content;
  EXPECT_TRUE(object["mood"] == "happy" || object["mood"] == "sad") << content;
  EXPECT_TRUE(object["sure"].is_boolean()) << content;
  EXPECT_EQ(object.size(), 2u);
  EXPECT_LT(content.find("\"mood\""), content.find("\"sure\"")) << "the schema's order";
  req["stream"] = true;
  const HttpResponse s = post_json(sock(), "/v1/chat/completions", req);
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_EQ(reassemble(s.body, "chat.completion.chunk", false).text, content);
}

// The schema's keys in the order the client wrote them, not sorted: "zeta"
// before "alpha" (the body is sent as written).
TEST_F(DaemonApi, JsonSchemaKeepsTheClientsKeyOrder) {
  const std::string body =
      R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 40, "temperature": 0, "response_format":
          {"type": "json_schema", "json_schema": {"name": "order", "schema": {"type": "object", "properties":
          {"zeta": {"type": "boolean"}, "alpha": {"type": "boolean"}}, "required": ["zeta", "alpha"]}}}})";
  const HttpResponse r = http_request(sock(), "POST", "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string content = r.json()["choices"][0]["message"]["content"].get<std::string>();
  ASSERT_TRUE(Json::parse(content, nullptr, false).is_object()) << content;
  EXPECT_LT(content.find("\"zeta\""), content.find("\"alpha\"")) << content;
}

// A chat completion under response_format json_schema: its content parsed
// (null, and a failure, unless the request got a 200 that ends with "stop").
Json structured_reply(const std::string& sock, const std::string& body, std::string* content) {
  const HttpResponse r = http_request(sock, "POST", "/v1/chat/completions", body);
  if (r.status != 200) {
    ADD_FAILURE() << "status " << r.status << ": " << r.body;
    return Json();
  }
  EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "stop") << r.body;
  *content = r.json()["choices"][0]["message"]["content"].get<std::string>();
  return Json::parse(*content, nullptr, false);
}

// A schema as OpenAI's SDKs send a Pydantic model: the enum a definition in
// "$defs", named by "$ref" (an optional field: anyOf with null), and an
// integer field with bounds (conint(ge=1, le=3)).
TEST_F(DaemonApi, JsonSchemaWithLocalReferences) {
  const std::string body =
      R"({"messages": [{"role": "user", "content": "How do you feel?"}], "max_tokens": 100, "temperature": 0,
          "response_format": {"type": "json_schema", "json_schema": {"name": "Feeling", "strict": true, "schema": {
          "$defs": {"Mood": {"enum": ["happy", "sad"], "title": "Mood", "type": "string"}},
          "properties": {"mood": {"$ref": "#/$defs/Mood"},
                         "before": {"anyOf": [{"$ref": "#/$defs/Mood"}, {"type": "null"}]},
                         "times": {"type": "integer", "minimum": 1, "maximum": 3}},
          "required": ["mood", "before", "times"], "title": "Feeling", "type": "object", "additionalProperties": false}}}})";
  std::string content;
  const Json object = structured_reply(sock(), body, &content);
  ASSERT_TRUE(object.is_object()) << content;
  EXPECT_TRUE(object["mood"] == "happy" || object["mood"] == "sad") << content;
  EXPECT_TRUE(object["before"] == "happy" || object["before"] == "sad" || object["before"].is_null()) << content;
  ASSERT_TRUE(object["times"].is_number_integer()) << content;
  EXPECT_GE(object["times"].get<int>(), 1) << content;
  EXPECT_LE(object["times"].get<int>(), 3) << content;
  EXPECT_EQ(object.size(), 3u) << content;
  // A reference to what is not there: a 400 that names it.
  const HttpResponse bad = http_request(
      sock(), "POST", "/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": "Hi"}], "response_format": {"type": "json_schema", "json_schema":
          {"name": "x", "schema": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"]}}}})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("#/$defs/A names nothing in the schema"), std::string::npos) << bad.body;
}

// A discriminated union (oneOf told apart by a constant, as Pydantic writes
// Field(discriminator=...)) and a map (dict[str, int], its keys bounded): the
// reply is one alternative whole, and the map's keys and values keep to theirs.
TEST_F(DaemonApi, JsonSchemaDiscriminatedUnionsAndMaps) {
  const std::string body =
      R"({"messages": [{"role": "user", "content": "Pet?"}], "max_tokens": 200, "temperature": 0,
          "response_format": {"type": "json_schema", "json_schema": {"name": "Home", "schema": {"$defs": {
          "Cat": {"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer", "minimum": 1,
                  "maximum": 9}}, "required": ["kind", "lives"], "additionalProperties": false},
          "Dog": {"type": "object", "properties": {"kind": {"const": "dog"}, "good": {"type": "boolean"}},
                  "required": ["kind", "good"], "additionalProperties": false}},
          "type": "object", "properties": {"pet": {"oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
          "discriminator": {"propertyName": "kind"}}, "toys": {"type": "object", "additionalProperties": {"type": "integer",
          "minimum": 0, "maximum": 99}, "maxProperties": 2, "propertyNames": {"pattern": "^[a-z ]+$", "maxLength": 8}}}, "required": ["pet", "toys"], "additionalProperties": false}}}})";
  std::string content;
  const Json object = structured_reply(sock(), body, &content);
  ASSERT_TRUE(object.is_object()) << content;
  const Json& pet = object["pet"];
  ASSERT_TRUE(pet.is_object()) << content;
  if (pet["kind"] == "cat") {
    EXPECT_EQ(pet.size(), 2u) << content;
    EXPECT_TRUE(pet["lives"].is_number_integer() && pet["lives"] >= 1 && pet["lives"] <= 9) << content;
  } else {
    EXPECT_EQ(pet["kind"], "dog") << content;
    EXPECT_EQ(pet.size(), 2u) << content;
    EXPECT_TRUE(pet["good"].is_boolean()) << content;
  }
  ASSERT_TRUE(object["toys"].is_object()) << content;
  EXPECT_LE(object["toys"].size(), 2u) << content;
  for (const auto& [name, count] : object["toys"].items()) {
    EXPECT_TRUE(std::regex_match(name, std::regex("[a-z ]{1,8}"))) << name << ": " << content;
    EXPECT_TRUE(count.is_number_integer() && count >= 0 && count <= 99) << name << ": " << content;
  }
  // Alternatives a value could match both of: a 400 that says why.
  const HttpResponse bad = http_request(
      sock(), "POST", "/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": "Hi"}], "response_format": {"type": "json_schema", "json_schema":
          {"name": "x", "schema": {"oneOf": [{"type": "number"}, {"type": "integer"}]}}}})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("'oneOf' is supported where no value can match two alternatives"), std::string::npos)
      << bad.body;
}

// Strings held to a format and a pattern (a Pydantic date field, a
// constr(pattern=...)): what the story model writes spells them.
TEST_F(DaemonApi, JsonSchemaFormatsAndPatterns) {
  const std::string body =
      R"({"messages": [{"role": "user", "content": "When?"}], "max_tokens": 120, "temperature": 0,
          "response_format": {"type": "json_schema", "json_schema": {"name": "When", "schema": {"type": "object",
          "properties": {"day": {"type": "string", "format": "date"}, "code": {"type": "string", "pattern": "^[A-Z]{2}\\d$"}},
          "required": ["day", "code"], "additionalProperties": false}}}})";
  std::string content;
  const Json object = structured_reply(sock(), body, &content);
  ASSERT_TRUE(object.is_object()) << content;
  ASSERT_TRUE(object["day"].is_string() && object["code"].is_string()) << content;
  EXPECT_TRUE(std::regex_match(object["day"].get<std::string>(),
                               std::regex(R"re(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))re")))
      << content;
  EXPECT_TRUE(std::regex_match(object["code"].get<std::string>(), std::regex(R"re([A-Z]{2}\d)re"))) << content;
  // A pattern outside the subset: a 400 that says where.
  const HttpResponse bad = http_request(
      sock(), "POST", "/v1/chat/completions",
      R"json({"messages": [{"role": "user", "content": "Hi"}], "response_format": {"type": "json_schema", "json_schema":
          {"name": "x", "schema": {"type": "string", "pattern": "(?=a)"}}}})json");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("pattern at offset 1: lookaround"), std::string::npos) << bad.body;
}

// Numbers held to bounds and multiples, and the formats OpenAI's strict mode
// lists: whatever the story model writes, the reply parses and keeps to them.
TEST_F(DaemonApi, JsonSchemaNumberBoundsMultiplesAndAddresses) {
  const std::string body =
      R"({"messages": [{"role": "user", "content": "Order?"}], "max_tokens": 200, "temperature": 0,
          "response_format": {"type": "json_schema", "json_schema": {"name": "Order", "schema": {"type": "object",
          "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1},
                         "price": {"type": "number", "multipleOf": 0.01, "exclusiveMinimum": 0, "maximum": 100},
                         "count": {"type": "integer", "multipleOf": 5, "minimum": 5, "maximum": 50},
                         "contact": {"type": "string", "format": "email", "maxLength": 24},
                         "host": {"type": "string", "format": "ipv4"}},
          "required": ["score", "price", "count", "contact", "host"], "additionalProperties": false}}}})";
  std::string content;
  const Json object = structured_reply(sock(), body, &content);
  ASSERT_TRUE(object.is_object()) << content;
  ASSERT_TRUE(object["score"].is_number() && object["price"].is_number() && object["count"].is_number_integer()) << content;
  const double score = object["score"].get<double>(), price = object["price"].get<double>();
  const int64_t count = object["count"].get<int64_t>();
  EXPECT_TRUE(score >= 0 && score <= 1) << content;
  EXPECT_TRUE(price > 0 && price <= 100) << content;
  EXPECT_NEAR(price * 100, std::round(price * 100), 1e-6) << content;
  EXPECT_TRUE(count >= 5 && count <= 50 && count % 5 == 0) << content;
  ASSERT_TRUE(object["contact"].is_string() && object["host"].is_string()) << content;
  const std::string contact = object["contact"].get<std::string>();
  EXPECT_LE(contact.size(), 24u) << content;
  EXPECT_TRUE(std::regex_match(contact, std::regex(R"re([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+)re")))
      << content;
  EXPECT_TRUE(std::regex_match(object["host"].get<std::string>(),
                               std::regex(R"re(((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))re")))
      << content;
  // A multiple with more decimals than a number holds: a 400 that says so.
  const HttpResponse bad = http_request(
      sock(), "POST", "/v1/chat/completions",
      R"json({"messages": [{"role": "user", "content": "Hi"}], "response_format": {"type": "json_schema", "json_schema":
          {"name": "x", "schema": {"type": "number", "multipleOf": 1e-12}}}})json");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("'multipleOf' 1e-12 has more than 9 decimals"), std::string::npos) << bad.body;
}

TEST_F(DaemonApi, StopStringEndsTheTextAndFinishesWithStop) {
  const Json j = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0},
                                          {"stop", {"Lily", "never"}}});
  EXPECT_EQ(j["choices"][0]["text"], ", there was a little girl named ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

TEST_F(DaemonApi, DefaultMaxTokensIsOpenAisSixteen) {
  const Json j = post("/v1/completions", {{"prompt", "Once upon a time"}, {"temperature", 0}});
  EXPECT_EQ(j["usage"]["completion_tokens"], 16);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
}

TEST_F(DaemonApi, ChatAppliesTheTemplateWithSpecialTokensAndBos) {
  // The same prompt through /tokenize (special tokens parsed, BOS added) and
  // /v1/completions must give what /v1/chat/completions gives.
  const Json tokens = post("/tokenize", {{"content", kChatMlRendered}, {"add_special", true}})["tokens"];
  ASSERT_GT(tokens.size(), 5u);
  EXPECT_EQ(tokens[0], 1) << "BOS first";
  const Json via_completion = post("/v1/completions", {{"prompt", tokens}, {"max_tokens", 12}, {"temperature", 0}});
  const Json chat = post("/v1/chat/completions",
                         {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                          {"max_tokens", 12},
                          {"temperature", 0}});
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  ASSERT_EQ(chat["choices"].size(), 1u);
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], via_completion["choices"][0]["text"]);
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(chat["usage"]["prompt_tokens"], tokens.size());
  EXPECT_EQ(chat["usage"]["completion_tokens"], 12);
}

TEST_F(DaemonApi, StreamReassemblesToTheNonStreamedTextForTheSameSeed) {
  const Json req = {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 1.0}, {"top_k", 0},
                    {"top_p", 1.0}, {"min_p", 0.0}, {"seed", 42}};
  const Json whole = post("/v1/completions", req);
  Json sreq = req;
  sreq["stream"] = true;
  sreq["stream_options"] = {{"include_usage", true}};
  TestConnection c(sock());
  ASSERT_TRUE(c.send(make_request("POST", "/v1/completions", sreq.dump())));
  const auto r = c.read_response();
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->header("content-type"), "text/event-stream");
  EXPECT_EQ(r->header("transfer-encoding"), "chunked");
  EXPECT_EQ(r->body.substr(r->body.size() - 14), "data: [DONE]\n\n");
  const Reassembled s = reassemble(r->body, "text_completion", true);
  EXPECT_TRUE(s.done);
  EXPECT_GT(s.chunks, 3u);
  EXPECT_EQ(s.text, whole["choices"][0]["text"]);
  EXPECT_EQ(s.finish_reason, whole["choices"][0]["finish_reason"]);
  // The same counts; the stream's prompt is the one just served, so the
  // prefix cache reused all of it but the last token, evaluated again.
  EXPECT_EQ(s.usage["prompt_tokens"], whole["usage"]["prompt_tokens"]);
  EXPECT_EQ(s.usage["completion_tokens"], whole["usage"]["completion_tokens"]);
  EXPECT_EQ(s.usage["total_tokens"], whole["usage"]["total_tokens"]);
  EXPECT_EQ(s.usage["prompt_tokens_details"]["cached_tokens"], 4);
  // And a second seed gives another text (the seed is honoured, not ignored).
  Json other = req;
  other["seed"] = 43;
  EXPECT_NE(post("/v1/completions", other)["choices"][0]["text"], whole["choices"][0]["text"]);
}

TEST_F(DaemonApi, ChatStreamStartsWithTheRoleAndMatchesTheNonStreamedReply) {
  const Json req = {{"messages", {{{"role", "system"}, {"content", "Tell a story."}}, {{"role", "user"}, {"content", "A dog"}}}},
                    {"max_tokens", 20},
                    {"seed", 7}};
  const Json whole = post("/v1/chat/completions", req);
  Json sreq = req;
  sreq["stream"] = true;
  const HttpResponse r = http_request(sock(), "POST", "/v1/chat/completions", sreq.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  bool done = false;
  const std::vector<std::string> events = sse_data(r.body, &done);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(Json::parse(events[0])["choices"][0]["delta"], Json::parse(R"({"role":"assistant","content":""})"));
  EXPECT_EQ(Json::parse(events.back())["choices"][0]["delta"], Json::object());
  const Reassembled s = reassemble(r.body, "chat.completion.chunk", false);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.text, whole["choices"][0]["message"]["content"]);
  EXPECT_EQ(s.finish_reason, whole["choices"][0]["finish_reason"]);
}

// n choices: choice i is what the same request with n 1 and the seed + i
// gives (each after the first reusing the prompt's KV); usage counts the
// prompt once and every choice's tokens; streams carry each choice's chunks
// under its index, one choice after another.
TEST_F(DaemonApi, NChoicesAreTheSeedsInTurnAndStreamByIndex) {
  Json req = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 1.0}, {"top_k", 0},
              {"top_p", 1.0}, {"min_p", 0.0}, {"seed", 42}, {"logprobs", 1}};
  std::vector<Json> singles;
  int generated = 0;
  for (int i = 0; i < 3; ++i) {
    Json one = req;
    one["seed"] = 42 + i;
    singles.push_back(post("/v1/completions", one));
    generated += singles.back()["usage"]["completion_tokens"].get<int>();
  }
  ASSERT_NE(singles[0]["choices"][0]["text"], singles[1]["choices"][0]["text"]) << "the seeds give different texts";
  req["n"] = 3;
  auto metric = [](const char* name) { return metric_value(http_request(sock(), "GET", "/metrics").body, name); };
  const double prompt_before = metric("minfer_prompt_tokens_total");
  const double cached_before = metric("minfer_prompt_tokens_cached_total");
  const Json whole = post("/v1/completions", req);
  ASSERT_EQ(whole["choices"].size(), 3u) << whole;
  // The metrics count as usage does: the prompt and its reuse once.
  EXPECT_EQ(metric("minfer_prompt_tokens_total") - prompt_before, 5);
  EXPECT_EQ(metric("minfer_prompt_tokens_cached_total") - cached_before, 4);
  for (size_t i = 0; i < 3; ++i) {
    const Json& c = whole["choices"][i];
    EXPECT_EQ(c["index"], i);
    EXPECT_EQ(c["text"], singles[i]["choices"][0]["text"]) << i;
    EXPECT_EQ(c["finish_reason"], singles[i]["choices"][0]["finish_reason"]) << i;
    EXPECT_EQ(c["logprobs"]["tokens"], singles[i]["choices"][0]["logprobs"]["tokens"]) << i;
  }
  EXPECT_EQ(whole["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(whole["usage"]["completion_tokens"], generated);
  EXPECT_EQ(whole["usage"]["total_tokens"], 5 + generated);
  EXPECT_EQ(whole["usage"]["prompt_tokens_details"]["cached_tokens"], 4) << "the first choice's reuse";

  Json sreq = req;
  sreq["stream"] = true;
  sreq["stream_options"] = {{"include_usage", true}};
  const HttpResponse r = post_json(sock(), "/v1/completions", sreq);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<Reassembled> s = reassemble_choices(r.body, "text_completion", true);
  ASSERT_EQ(s.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s[i].text, whole["choices"][i]["text"]) << i;
    EXPECT_EQ(s[i].finish_reason, whole["choices"][i]["finish_reason"]) << i;
    EXPECT_EQ(s[i].logprobs["tokens"], whole["choices"][i]["logprobs"]["tokens"]) << i;
    EXPECT_EQ(s[i].logprobs["text_offset"], whole["choices"][i]["logprobs"]["text_offset"]) << i;
    EXPECT_TRUE(s[i].done);
  }
  EXPECT_EQ(s[0].usage["completion_tokens"], generated);
  // One choice after another: every chunk of choice 0 comes before choice 1's.
  bool done = false;
  int last_index = 0;
  for (const std::string& e : sse_data(r.body, &done)) {
    const Json j = Json::parse(e);
    if (j["choices"].empty()) continue;
    const int index = j["choices"][0]["index"].get<int>();
    EXPECT_GE(index, last_index) << e;
    last_index = index;
  }
}

// Several prompts (OpenAI's batch form): prompt p's choice i is index
// p * n + i and is what a request of that prompt alone with the seed + i
// gives; usage counts each prompt once. Scoring a batch with echo (what
// evaluation harnesses send) gives each prompt its own scores. A prompt too
// long for the context is a 400 naming it, before any is generated for.
TEST_F(DaemonApi, SeveralPromptsEachGetTheirChoices) {
  const std::vector<std::string> prompts = {"Once upon a time", "A dog"};
  Json req = {{"max_tokens", 12}, {"temperature", 1.0}, {"top_k", 0}, {"top_p", 1.0}, {"min_p", 0.0}, {"seed", 42}};
  std::vector<Json> singles;
  int prompt_tokens = 0, generated = 0;
  for (const std::string& p : prompts) {
    for (int i = 0; i < 2; ++i) {
      Json one = req;
      one["prompt"] = p;
      one["seed"] = 42 + i;
      singles.push_back(post("/v1/completions", one));
      if (i == 0) prompt_tokens += singles.back()["usage"]["prompt_tokens"].get<int>();
      generated += singles.back()["usage"]["completion_tokens"].get<int>();
    }
  }
  req["prompt"] = prompts;
  req["n"] = 2;
  const HttpResponse whole = post_json(sock(), "/v1/completions", req);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Json batch = whole.json();
  ASSERT_EQ(batch["choices"].size(), 4u) << batch;
  // Its log line counts the four choices and all their tokens.
  const std::string id = "REQUEST_ID=" + whole.header("x-request-id") + " ";
  ASSERT_TRUE(eventually([&] { return daemon_->log().find(id) != std::string::npos; }, 5s)) << daemon_->log();
  const std::string log = daemon_->log();
  const size_t at = log.find(id), begin = log.rfind('\n', at) + 1;
  const std::string line = log.substr(begin, log.find('\n', at) - begin);
  EXPECT_NE(line.find(fmt::format(" gen {} in 4 choices", generated)), std::string::npos) << line;
  EXPECT_NE(line.find("CHOICES=4"), std::string::npos) << line;
  EXPECT_NE(line.find(fmt::format("GEN_TOKENS={}", generated)), std::string::npos) << line;
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(batch["choices"][k]["index"], k);
    EXPECT_EQ(batch["choices"][k]["text"], singles[k]["choices"][0]["text"]) << k;
  }
  EXPECT_EQ(batch["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(batch["usage"]["completion_tokens"], generated);

  Json sreq = req;
  sreq["stream"] = true;
  const HttpResponse r = post_json(sock(), "/v1/completions", sreq);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<Reassembled> s = reassemble_choices(r.body, "text_completion", false);
  ASSERT_EQ(s.size(), 4u);
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(s[k].text, batch["choices"][k]["text"]) << k;

  const Json scored = post("/v1/completions", {{"prompt", {"Once upon a time", "Once upon a time, there"}},
                                              {"max_tokens", 0}, {"echo", true}, {"logprobs", 1}});
  ASSERT_EQ(scored["choices"].size(), 2u) << scored;
  for (size_t k = 0; k < 2; ++k) {
    const Json alone = post("/v1/completions", {{"prompt", scored["choices"][k]["text"]}, {"max_tokens", 0},
                                               {"echo", true}, {"logprobs", 1}});
    EXPECT_EQ(scored["choices"][k]["logprobs"], alone["choices"][0]["logprobs"]) << k;
  }
  EXPECT_EQ(scored["choices"][1]["logprobs"]["tokens"].size(), 7u);

  std::vector<int> long_prompt(300, 403);
  const HttpResponse too_long = post_json(sock(), "/v1/completions", {{"prompt", {Json({1, 403}), Json(long_prompt)}},
                                                                      {"max_tokens", 4}});
  EXPECT_EQ(too_long.status, 400) << too_long.body;
  EXPECT_EQ(too_long.json()["error"]["code"], "context_length_exceeded");
  EXPECT_NE(too_long.json()["error"]["message"].get<std::string>().find("prompt 1 of 2"), std::string::npos)
      << too_long.body;
  EXPECT_EQ(post("/v1/completions", {{"prompt", {"Once upon a time"}}, {"max_tokens", 27}, {"temperature", 0}})
                ["choices"][0]["text"],
            kGreedy27);
}

// Chat: each choice's role chunk first, then the choices in turn; greedy
// choices are all the greedy reply; echo with logprobs gives every choice the
// prompt's scores.
// best_of: the candidates are the choices n = best_of would give (the seed
// + i each); the n with the highest log-probability per token come back,
// best first, and the usage counts every candidate's tokens.
TEST_F(DaemonApi, BestOfAnswersTheCandidatesWithTheMostLikelyTokens) {
  Json req = {{"prompt", "Once upon a time"}, {"max_tokens", 10}, {"temperature", 1.2}, {"top_k", 0},
              {"top_p", 1.0},                {"min_p", 0.0},     {"seed", 7}};
  Json all = req;
  all["n"] = 5;
  all["logprobs"] = 0;
  const Json candidates = post("/v1/completions", all);
  ASSERT_EQ(candidates["choices"].size(), 5u) << candidates;
  std::vector<std::pair<double, size_t>> ranked;  // (-mean, index): a stable order, best first
  for (size_t k = 0; k < 5; ++k) {
    const Json& lp = candidates["choices"][k]["logprobs"]["token_logprobs"];
    ASSERT_FALSE(lp.empty()) << k;
    double sum = 0;
    for (const Json& v : lp) sum += v.get<double>();
    ranked.emplace_back(-sum / static_cast<double>(lp.size()), k);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) { return a.first < b.first; });
  ASSERT_NE(ranked[0].second, 0u) << "the seed's first candidate is the best: pick another seed for a test that can fail";

  Json best = req;
  best["n"] = 2;
  best["best_of"] = 5;
  const Json got = post("/v1/completions", best);
  ASSERT_EQ(got["choices"].size(), 2u) << got;
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(got["choices"][k]["index"], k);
    EXPECT_EQ(got["choices"][k]["text"], candidates["choices"][ranked[k].second]["text"]) << k;
    EXPECT_TRUE(got["choices"][k]["logprobs"].is_null()) << "not asked for";
  }
  EXPECT_EQ(got["usage"]["completion_tokens"], candidates["usage"]["completion_tokens"]);
  EXPECT_EQ(got["usage"]["prompt_tokens"], candidates["usage"]["prompt_tokens"]);

  // Asked for, they are the candidates' own.
  best["logprobs"] = 0;
  const Json with_lp = post("/v1/completions", best);
  ASSERT_EQ(with_lp["choices"].size(), 2u) << with_lp;
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(with_lp["choices"][k]["logprobs"], candidates["choices"][ranked[k].second]["logprobs"]) << k;
  }

  // Greedy candidates are all the same: the first n.
  const Json greedy = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0},
                                               {"best_of", 3}});
  const Json one = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}});
  ASSERT_EQ(greedy["choices"].size(), 1u) << greedy;
  EXPECT_EQ(greedy["choices"][0]["text"], one["choices"][0]["text"]);
  EXPECT_EQ(greedy["usage"]["completion_tokens"].get<int>(), 3 * one["usage"]["completion_tokens"].get<int>());

  // Not in a stream, not for chat; the daemon keeps serving.
  Json streamed = best;
  streamed["stream"] = true;
  const HttpResponse refused = post_json(sock(), "/v1/completions", streamed);
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(refused.json()["error"]["param"], "best_of");
  const HttpResponse chat = post_json(sock(), "/v1/chat/completions",
                                      {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"best_of", 2}});
  EXPECT_EQ(chat.status, 400) << chat.body;
  EXPECT_EQ(chat.json()["error"]["code"], "unsupported_parameter");
  EXPECT_EQ(post_json(sock(), "/v1/completions", req).status, 200);
}

TEST_F(DaemonApi, NChatChoicesGreedyAndEchoed) {
  const Json chat = {{"messages", {{{"role", "user"}, {"content", "A dog"}}}}, {"max_tokens", 16}, {"seed", 7}, {"n", 2}};
  const Json whole = post("/v1/chat/completions", chat);
  ASSERT_EQ(whole["choices"].size(), 2u) << whole;
  Json sreq = chat;
  sreq["stream"] = true;
  const HttpResponse r = post_json(sock(), "/v1/chat/completions", sreq);
  ASSERT_EQ(r.status, 200) << r.body;
  bool done = false;
  const std::vector<std::string> events = sse_data(r.body, &done);
  ASSERT_GE(events.size(), 4u);
  for (int i = 0; i < 2; ++i) {
    const Json role = Json::parse(events[static_cast<size_t>(i)])["choices"][0];
    EXPECT_EQ(role["index"], i);
    EXPECT_EQ(role["delta"], Json::parse(R"({"role":"assistant","content":""})"));
  }
  const std::vector<Reassembled> s = reassemble_choices(r.body, "chat.completion.chunk", false);
  ASSERT_EQ(s.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(s[i].text, whole["choices"][i]["message"]["content"]) << i;
    EXPECT_EQ(s[i].finish_reason, whole["choices"][i]["finish_reason"]) << i;
  }

  const Json greedy = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 27}, {"temperature", 0}, {"n", 3}});
  ASSERT_EQ(greedy["choices"].size(), 3u);
  for (const Json& c : greedy["choices"]) EXPECT_EQ(c["text"], kGreedy27);
  EXPECT_EQ(greedy["usage"]["completion_tokens"], 81);

  const Json one = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0},
                                           {"echo", true}, {"logprobs", 1}});
  const Json two = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0},
                                           {"echo", true}, {"logprobs", 1}, {"n", 2}});
  ASSERT_EQ(two["choices"].size(), 2u);
  for (const Json& c : two["choices"]) {
    EXPECT_EQ(c["text"], one["choices"][0]["text"]);
    EXPECT_EQ(c["logprobs"]["tokens"].size(), 9u) << "the prompt's 5 tokens, then 4 generated";
    EXPECT_EQ(c["logprobs"]["token_logprobs"], one["choices"][0]["logprobs"]["token_logprobs"]);
  }
}

TEST_F(DaemonApi, TokenizeAndDetokenizeLikeLlamaCppServer) {
  EXPECT_EQ(post("/tokenize", {{"content", "Once upon a time"}})["tokens"], Json::parse("[403,407,261,378]"));
  EXPECT_EQ(post("/tokenize", {{"content", "Once upon a time"}, {"add_special", true}})["tokens"],
            Json::parse("[1,403,407,261,378]"));
  EXPECT_EQ(post("/detokenize", {{"tokens", {403, 407, 261, 378}}})["content"], "Once upon a time");
  const Json pieces = post("/tokenize", {{"content", "Once upon"}, {"with_pieces", true}})["tokens"];
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0]["id"], 403);
  EXPECT_EQ(pieces[0]["piece"], "Once");
  EXPECT_EQ(pieces[1]["id"], 407);
}

TEST_F(DaemonApi, MetricsArePrometheusText) {
  post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}});
  const HttpResponse r = http_request(sock(), "GET", "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_GE(metric_value(r.body, "minfer_requests_total{endpoint=\"/v1/completions\",status=\"200\"}"), 1);
  EXPECT_EQ(metric_value(r.body, "minfer_engine_state{state=\"ready\"}"), 1);
  EXPECT_EQ(metric_value(r.body, "minfer_queue_capacity"), 16);
  EXPECT_EQ(metric_value(r.body, "minfer_queue_depth"), 0);
  EXPECT_GE(metric_value(r.body, "minfer_generated_tokens_total"), 4);
  EXPECT_GE(metric_value(r.body, "minfer_prompt_tokens_total"), 5);
  EXPECT_GE(metric_value(r.body, "minfer_time_to_first_token_seconds_count"), 1);
  EXPECT_GE(metric_value(r.body, "minfer_token_latency_seconds_count"), 3);
  EXPECT_GE(metric_value(r.body, "minfer_request_overhead_seconds_count"), 1);
  EXPECT_GT(metric_value(r.body, "minfer_decode_tokens_per_second"), 0);
  EXPECT_EQ(metric_value(r.body, "minfer_cancellations_total{reason=\"client_gone\"}"), 0);
  EXPECT_EQ(metric_value(r.body, "minfer_watchdog_trips_total"), 0);
}

TEST_F(DaemonApi, KeepAliveAndPipelinedRequestsAreAnsweredInOrder) {
  TestConnection c(sock());
  ASSERT_TRUE(c.send(make_request("GET", "/health", "", true) +
                     make_request("POST", "/tokenize", R"({"content":"Once"})", true) +
                     make_request("GET", "/v1/models", "", true)));
  const auto a = c.read_response();
  const auto b = c.read_response();
  const auto m = c.read_response();
  ASSERT_TRUE(a && b && m);
  EXPECT_EQ(a->json()["phase"], "ready");
  EXPECT_EQ(b->json()["tokens"], Json::parse("[403]"));
  EXPECT_EQ(m->json()["object"], "list");
  EXPECT_EQ(std::stoll(b->header("x-request-id")), std::stoll(a->header("x-request-id")) + 1);
  EXPECT_TRUE(m->keep_alive);
  ASSERT_TRUE(c.send(make_request("GET", "/health")));  // the same connection, again
  const auto last = c.read_response();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->status, 200);
  EXPECT_TRUE(c.wait_closed(5s)) << "Connection: close is honoured";
}

TEST_F(DaemonApi, ExpectContinueGetsAnInterimAnswerBeforeTheBody) {
  const std::string body = R"({"content":"Once"})";
  TestConnection c(sock());
  ASSERT_TRUE(c.send("POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
                     "Content-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n"));
  const auto interim = c.read_response(10s);
  ASSERT_TRUE(interim.has_value());
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(c.send(body));
  const auto r = c.read_response(10s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->json()["tokens"], Json::parse("[403]"));
}

TEST_F(DaemonApi, Http10GetsAnAnswerAndAClose) {
  TestConnection c(sock());
  ASSERT_TRUE(c.send("GET /health HTTP/1.0\r\n\r\n"));
  const auto r = c.read_response();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(c.wait_closed(5s));
}

TEST_F(DaemonApi, EachRequestIsOneLogLineWithPeerCredentialsAndFields) {
  // 23 tokens: no other test asks for that many, so the line is this request's.
  post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 23}, {"temperature", 0}});
  ASSERT_TRUE(eventually([] { return daemon_->log().find("GEN_TOKENS=23") != std::string::npos; }, 5s))
      << daemon_->log();
  const std::string log = daemon_->log();
  const size_t end = log.find('\n', log.find("GEN_TOKENS=23"));
  const size_t begin = log.rfind('\n', end - 1) + 1;
  const std::string line = log.substr(begin, end - begin);
  EXPECT_NE(line.find(" info request "), std::string::npos) << line;
  EXPECT_NE(line.find("POST /v1/completions 200"), std::string::npos) << line;
  for (const std::string& field :
       {std::string("PEER_PID=") + std::to_string(::getpid()), std::string("PEER_UID=") + std::to_string(::getuid()),
        std::string("PEER_GID="), std::string("REQUEST_ID="), std::string("PROMPT_TOKENS=5"),
        std::string("GEN_TOKENS=23"), std::string("CHOICES=1"), std::string("TTFT_MS="), std::string("TOKENS_PER_S="),
        std::string("FINISH_REASON=length"), std::string("BACKEND=cpu")}) {
    EXPECT_NE(line.find(field), std::string::npos) << field << " missing from: " << line;
  }
  // Nothing per token: the 27 tokens left no other line behind.
  EXPECT_EQ(log.find("token 1 "), std::string::npos);
}

}  // namespace
}  // namespace minfer::test
