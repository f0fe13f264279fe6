// Fill-in-the-middle through a real minferd: a synthetic one-layer
// Qwen2.5-0.5B (random weights, Q8_0) carrying Qwen2.5's real tokenizer,
// whose vocabulary has <|fim_prefix|>, <|fim_suffix|> and <|fim_middle|>.
// A completion with a suffix is checked against the same prompt spelled out
// as token ids (the markers' ids around /tokenize's tokens of the prefix and
// the suffix): the same prompt length, the same greedy reply.
#include <gtest/gtest.h>

#include "engine/synth/synth.h"
#include "tests/daemon/daemon_process.h"
#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/http_test_client.h"

namespace minfer::test {
namespace {

using Json = nlohmann::json;

constexpr int kFimPrefix = 151659, kFimMiddle = 151660, kFimSuffix = 151661;  // Qwen2.5's vocabulary

struct FimModelSpec {
  static DaemonSpec spec() {
    static TempDir dir;
    const std::string path = dir.path() + "/qwen-fim.gguf";
    synth::Options o;
    o.preset = *synth::find_preset("qwen2.5-0.5b");
    o.type = "q8_0";
    o.layers = 1;
    o.tokenizer_json = test_data_path("qwen-tokenizer/tokenizer.json");
    o.output_path = path;
    const auto written = synth::write_model(o);
    EXPECT_TRUE(written.has_value()) << written.error().message;
    DaemonSpec s;
    s.args = {"--model", path, "--ctx-size", "512"};
    return s;
  }
};

class DaemonFim : public DaemonSuite<FimModelSpec> {
 protected:
  static Json tokens(const std::string& text) {
    return post("/tokenize", {{"content", text}, {"add_special", false}, {"parse_special", false}})["tokens"];
  }
};

const char* const kPrefix = "def add(a, b):\n    return ";
const char* const kSuffix = "\n\nprint(add(1, 2))\n";

TEST_F(DaemonFim, ModelsSayTheModelFillsInTheMiddle) {
  EXPECT_EQ(post_json(sock(), "/v1/models", {}).status, 405);
  const HttpResponse r = http_request(sock(), "GET", "/v1/models");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["data"][0]["fill_in_middle"], true) << r.body;
}

TEST_F(DaemonFim, SuffixWrapsThePromptInTheMarkers) {
  Json spelled = Json::array({kFimPrefix});
  for (const Json& t : tokens(kPrefix)) spelled.push_back(t);
  spelled.push_back(kFimSuffix);
  for (const Json& t : tokens(kSuffix)) spelled.push_back(t);
  spelled.push_back(kFimMiddle);
  const Json plain = post("/v1/completions", {{"prompt", spelled}, {"max_tokens", 8}, {"temperature", 0}});
  const Json fim = post("/v1/completions", {{"prompt", kPrefix}, {"suffix", kSuffix}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(fim["usage"]["prompt_tokens"], spelled.size()) << fim;
  EXPECT_EQ(fim["choices"][0]["text"], plain["choices"][0]["text"]);
  EXPECT_EQ(fim["choices"][0]["finish_reason"], plain["choices"][0]["finish_reason"]);

  // The prefix as token ids; several prompts, each its own middle; streamed.
  const Json by_ids = post("/v1/completions", {{"prompt", tokens(kPrefix)}, {"suffix", kSuffix}, {"max_tokens", 8},
                                              {"temperature", 0}});
  EXPECT_EQ(by_ids["choices"][0]["text"], fim["choices"][0]["text"]);
  const Json two = post("/v1/completions", {{"prompt", {kPrefix, "x = "}}, {"suffix", kSuffix}, {"max_tokens", 8},
                                           {"temperature", 0}});
  ASSERT_EQ(two["choices"].size(), 2u) << two;
  EXPECT_EQ(two["choices"][0]["text"], fim["choices"][0]["text"]);
  const HttpResponse s = post_json(sock(), "/v1/completions", {{"prompt", kPrefix}, {"suffix", kSuffix}, {"max_tokens", 8},
                                                               {"temperature", 0}, {"stream", true}});
  ASSERT_EQ(s.status, 200) << s.body;
  bool done = false;
  std::string streamed;
  for (const std::string& e : sse_data(s.body, &done)) {
    const Json j = Json::parse(e);
    if (!j["choices"].empty()) streamed += j["choices"][0].value("text", "");
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(streamed, fim["choices"][0]["text"]);

  // An empty suffix is none: a plain completion of the prefix.
  const Json none = post("/v1/completions", {{"prompt", kPrefix}, {"suffix", ""}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(none["usage"]["prompt_tokens"], tokens(kPrefix).size());
  // Not with echo.
  const HttpResponse echo = post_json(sock(), "/v1/completions", {{"prompt", kPrefix}, {"suffix", kSuffix}, {"echo", true}});
  EXPECT_EQ(echo.status, 400) << echo.body;
  EXPECT_EQ(echo.json()["error"]["param"], "suffix");
}

}  // namespace
}  // namespace minfer::test
