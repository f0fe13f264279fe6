// Fill-in-the-middle through a real minferd: a synthetic one-layer
// Qwen2.5-0.5B (random weights, Q8_0) carrying Qwen2.5's real tokenizer,
// whose vocabulary has <|fim_prefix|>, <|fim_suffix|> and <|fim_middle|>,
// and the repository markers <|repo_name|> and <|file_sep|>. A completion
// with a suffix, and llama.cpp's /infill, are each checked against the same
// prompt spelled out as token ids (the markers' ids around /tokenize's tokens
// of the text) on /v1/completions: the same prompt length, the same greedy
// reply. The editor plugins' line limits (n_indent, t_max_predict_ms) are
// checked against the reply the same request gets without them.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/synth/synth.h"
#include "tests/daemon/daemon_process.h"
#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/http_test_client.h"
#include "tests/daemon/prometheus_text.h"

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
  // A control token's id, as /tokenize parses its text.
  static int special(const std::string& text) {
    const Json t = post("/tokenize", {{"content", text}, {"add_special", false}, {"parse_special", true}})["tokens"];
    EXPECT_EQ(t.size(), 1u) << text << " is not one token: " << t;
    return t.empty() ? -1 : t[0].get<int>();
  }
  static void append(Json& to, const Json& ids) {
    for (const Json& t : ids) to.push_back(t);
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

// /infill: llama.cpp's prompt. This vocabulary has the repository markers,
// so the FIM part follows <|repo_name|>"myproject\n", each extra file as
// <|file_sep|> its name, "\n" and its text, and <|file_sep|>"filename\n";
// the prompt field (the cursor's line) goes on from the prefix.
const char* const kInfillPrefix = "def add(a, b):\n";
const char* const kInfillLine = "    return ";

class DaemonInfill : public DaemonFim {
 protected:
  // The repository header and extra files, as token ids; `extra` is
  // [{"filename", "text"}].
  static Json context(const Json& extra = Json::array()) {
    const int repo = special("<|repo_name|>"), sep = special("<|file_sep|>");
    Json ids = Json::array({repo});
    append(ids, tokens("myproject\n"));
    for (const Json& chunk : extra) {
      ids.push_back(sep);
      append(ids, tokens(chunk.value("filename", "tmp") + "\n"));
      append(ids, tokens(chunk["text"].get<std::string>()));
    }
    ids.push_back(sep);
    append(ids, tokens("filename\n"));
    return ids;
  }
  // The FIM part, as token ids.
  static Json fim_part(const std::string& prefix = kInfillPrefix) {
    Json ids = Json::array({kFimPrefix});
    append(ids, tokens(prefix));
    append(ids, tokens(kInfillLine));
    ids.push_back(kFimSuffix);
    append(ids, tokens(kSuffix));
    ids.push_back(kFimMiddle);
    return ids;
  }
  static Json infill_body(const Json& extra = nullptr) {
    Json b = {{"input_prefix", kInfillPrefix}, {"input_suffix", kSuffix}, {"prompt", kInfillLine},
              {"n_predict", 8},                {"temperature", 0}};
    if (!extra.is_null()) b["input_extra"] = extra;
    return b;
  }
  // The greedy completion of a prompt given as ids.
  static Json greedy(const Json& ids, int max_tokens = 8) {
    return post("/v1/completions", {{"prompt", ids}, {"max_tokens", max_tokens}, {"temperature", 0}});
  }
  static std::string stop_type_of(const Json& completion) {
    return completion["choices"][0]["finish_reason"] == "length" ? "limit" : "eos";  // no stop strings here
  }
};

// A streamed /infill: its pieces (every event but the last) and the last
// event, the whole object.
struct InfillStream {
  std::vector<Json> pieces;
  Json last;
  std::string text() const {
    std::string t;
    for (const Json& p : pieces) t += p["content"].get<std::string>();
    return t;
  }
};

InfillStream stream_infill(const std::string& sock, Json body) {
  body["stream"] = true;
  const HttpResponse s = post_json(sock, "/infill", body);
  EXPECT_EQ(s.status, 200) << s.body;
  EXPECT_EQ(s.body.find("[DONE]"), std::string::npos) << s.body;
  bool done = false;
  InfillStream out;
  for (const std::string& e : sse_data(s.body, &done)) out.pieces.push_back(Json::parse(e));
  EXPECT_FALSE(done);
  EXPECT_FALSE(out.pieces.empty()) << s.body;
  if (!out.pieces.empty()) {
    out.last = out.pieces.back();
    out.pieces.pop_back();
  }
  return out;
}

// The piece of `s` that holds byte `at` of its text (s.pieces.size() if none).
size_t piece_at(const InfillStream& s, size_t at) {
  size_t end = 0;
  for (size_t i = 0; i < s.pieces.size(); ++i) {
    end += s.pieces[i]["content"].get<std::string>().size();
    if (at < end) return i;
  }
  return s.pieces.size();
}

// llama.cpp's n_indent rule on a whole text, written apart from the engine's:
// where the first line after a newline whose leading blanks (' ', '\t') are
// fewer than n_indent has its first other character; npos if none has.
size_t indent_cut(const std::string& text, size_t n_indent) {
  for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', nl + 1)) {
    const size_t first = text.find_first_not_of(" \t", nl + 1);
    if (first == std::string::npos) return std::string::npos;
    if (first - (nl + 1) < n_indent) return first;
  }
  return std::string::npos;
}

// The line limits need a reply of several lines, which this random model
// writes greedily only when kept from repeating itself: with repeat_penalty
// 1.5, this loop and the cursor's line "    " get 64 tokens whose lines
// after the first start with 1, 1 and 0 blanks, the first newline in the
// 21st token (found by trying a few code prefixes and cursor lines on the
// daemon). Expectations come from the reply without the limits.
Json lines_body(int n_predict = 64) {
  return {{"input_prefix", "for i in range(10):\n"}, {"input_suffix", kSuffix}, {"prompt", "    "},
          {"n_predict", n_predict}, {"temperature", 0}, {"repeat_penalty", 1.5}};
}

TEST_F(DaemonInfill, AnswersLikeACompletionOfTheSpelledOutPrompt) {
  Json spelled = context();
  append(spelled, fim_part());
  const Json plain = greedy(spelled);
  const Json again = greedy(spelled);  // what the prefix cache reuses of this prompt
  const Json r = post("/infill", infill_body());
  EXPECT_EQ(r["content"], plain["choices"][0]["text"]) << r;
  EXPECT_EQ(r["tokens_evaluated"], spelled.size()) << r;
  EXPECT_EQ(r["tokens_predicted"], plain["usage"]["completion_tokens"]) << r;
  EXPECT_EQ(r["tokens_cached"], again["usage"]["prompt_tokens_details"]["cached_tokens"]) << r;
  EXPECT_EQ(r["stop_type"], stop_type_of(plain)) << r;
  EXPECT_EQ(r["stop"], true);
  EXPECT_EQ(r["stopping_word"], "");
  EXPECT_EQ(r["truncated"], false);
  EXPECT_EQ(r["index"], 0);
  EXPECT_EQ(r["id_slot"], 0);
  EXPECT_EQ(r["tokens"], Json::array());
  EXPECT_EQ(r["model"], http_request(sock(), "GET", "/v1/models").json()["data"][0]["id"]);
  // The engine's own figures: the prompt tokens it evaluated (not reused)
  // and their prefill, the generated tokens and the decode loop.
  const Json& t = r["timings"];
  EXPECT_EQ(t["prompt_n"], r["tokens_evaluated"].get<int>() - r["tokens_cached"].get<int>()) << t;
  EXPECT_EQ(t["predicted_n"], r["tokens_predicted"]) << t;
  EXPECT_GT(t["prompt_ms"].get<double>(), 0.0) << t;
  EXPECT_NEAR(t["prompt_per_second"].get<double>(), t["prompt_n"].get<double>() / (t["prompt_ms"].get<double>() / 1000),
              1e-6 * t["prompt_per_second"].get<double>())
      << t;
  EXPECT_GE(t["predicted_ms"].get<double>(), 0.0) << t;

  // max_tokens is n_predict's other name; a stop string is a "word".
  const Json alias = post("/infill", {{"input_prefix", kInfillPrefix}, {"input_suffix", kSuffix},
                                      {"prompt", kInfillLine}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(alias["content"], r["content"]);
  // The reply's last character as a stop string: the reply up to its first
  // occurrence.
  const std::string content = r["content"];
  ASSERT_FALSE(content.empty()) << r;
  size_t last = content.size() - 1;
  while (last > 0 && (static_cast<unsigned char>(content[last]) & 0xC0) == 0x80) --last;
  const std::string word = content.substr(last);
  Json stopped_body = infill_body();
  stopped_body["stop"] = {word};
  const Json stopped = post("/infill", stopped_body);
  EXPECT_EQ(stopped["stop_type"], "word") << stopped;
  EXPECT_EQ(stopped["stopping_word"], word) << stopped;
  EXPECT_EQ(stopped["content"], content.substr(0, content.find(word))) << stopped;
}

TEST_F(DaemonInfill, ExtraFilesComeBeforeTheMiddleAsRepositoryFiles) {
  const Json extra = {{{"filename", "util.py"}, {"text", "def sub(a, b):\n    return a - b\n"}},
                      {{"filename", "consts.py"}, {"text", "ONE = 1\nTWO = 2\n"}}};
  Json spelled = context(extra);
  append(spelled, fim_part());
  const Json plain = greedy(spelled);
  const Json r = post("/infill", infill_body(extra));
  EXPECT_EQ(r["content"], plain["choices"][0]["text"]) << r;
  EXPECT_EQ(r["tokens_evaluated"], spelled.size()) << r;
  EXPECT_EQ(r["stop_type"], stop_type_of(plain)) << r;
  EXPECT_EQ(r["truncated"], false);

  // A chunk without a file name is llama.cpp's "tmp".
  const Json unnamed = {{{"text", "ONE = 1\n"}}};
  Json spelled_unnamed = context({{{"filename", "tmp"}, {"text", "ONE = 1\n"}}});
  append(spelled_unnamed, fim_part());
  EXPECT_EQ(post("/infill", infill_body(unnamed))["tokens_evaluated"], spelled_unnamed.size());
}

TEST_F(DaemonInfill, StreamsLlamaCppEventsWithoutDone) {
  const Json extra = {{{"filename", "util.py"}, {"text", "def sub(a, b):\n    return a - b\n"}}};
  const Json whole = post("/infill", infill_body(extra));
  const InfillStream s = stream_infill(sock(), infill_body(extra));
  ASSERT_FALSE(s.pieces.empty());
  int predicted = 0;
  for (const Json& e : s.pieces) {
    EXPECT_EQ(e["stop"], false) << e;
    EXPECT_EQ(e["index"], 0) << e;
    // Tokens so far: at least one more with each piece, but for held-back
    // text (a partial character) let out at the end.
    EXPECT_GE(e["tokens_predicted"].get<int>(), std::max(1, predicted)) << e;
    predicted = e["tokens_predicted"];
  }
  EXPECT_EQ(s.text(), whole["content"]);
  const Json& last = s.last;
  EXPECT_EQ(last["stop"], true) << last;
  EXPECT_EQ(last["content"], "") << last;
  EXPECT_LE(predicted, last["tokens_predicted"].get<int>());
  for (const char* field : {"tokens_predicted", "tokens_evaluated", "stop_type", "stopping_word", "truncated", "model",
                            "id_slot", "index"}) {
    EXPECT_EQ(last[field], whole[field]) << field << ": " << last;
  }
  EXPECT_EQ(last["timings"]["predicted_n"], whole["tokens_predicted"]) << last;
}

TEST_F(DaemonInfill, BadRequestsNameTheFieldAndTheDaemonGoesOn) {
  const std::string series = "minfer_requests_total{endpoint=\"/infill\",status=\"400\"}";
  const double before = std::max(0.0, scrape(sock(), series));
  struct Case {
    Json body;
    const char* code;
    const char* param;
    const char* message;
  };
  const Case cases[] = {
      {{{"input_extra", "util.py"}}, "invalid_type", "input_extra", "'input_extra' must be an array"},
      {{{"input_extra", {{{"filename", "a.py"}}}}}, "missing_field", "input_extra[0].text", "has no \"text\""},
      {{{"input_extra", {{{"text", "x"}}, {{"text", 5}}}}}, "invalid_type", "input_extra[1].text",
       "'input_extra[1].text' must be a string, got an integer"},
      {{{"n", 2}}, "unsupported_parameter", "n", "several choices"},
      {{{"best_of", 3}}, "unsupported_parameter", "best_of", "several candidates"},
      {{{"suffix", "x"}}, "unsupported_parameter", "suffix", "use 'input_suffix'"},
      {{{"logprobs", 2}}, "unsupported_parameter", "logprobs", "no place"},
      {{{"n_predict", "8"}}, "invalid_type", "n_predict", "'n_predict' must be an integer, got a string"},
      {{{"n_predict", 8}, {"max_tokens", 9}}, "invalid_value", "max_tokens", "'max_tokens' is 9 and 'n_predict' is 8"},
      {{{"n_indent", -4}}, "invalid_value", "n_indent", "'n_indent' is -4; allowed 0 (off)"},
      {{{"n_indent", 4.0}}, "invalid_type", "n_indent", "'n_indent' must be an integer, got a number with a fraction"},
      {{{"t_max_predict_ms", -1}}, "invalid_value", "t_max_predict_ms", "'t_max_predict_ms' is -1; allowed 0 (off)"},
      {{{"t_max_predict_ms", "500"}}, "invalid_type", "t_max_predict_ms", "must be an integer, got a string"},
  };
  for (const Case& c : cases) {
    const HttpResponse r = post_json(sock(), "/infill", c.body);
    ASSERT_EQ(r.status, 400) << c.body << ": " << r.body;
    const Json e = r.json()["error"];
    EXPECT_EQ(e["code"], c.code) << r.body;
    EXPECT_EQ(e["param"], c.param) << r.body;
    EXPECT_NE(e["message"].get<std::string>().find(c.message), std::string::npos) << r.body;
  }
  // llama.cpp clients' hints are ignored; the daemon answers the next request.
  Json hinted = infill_body();
  hinted.update({{"cache_prompt", true}, {"samplers", {"top_k", "top_p", "infill"}}, {"t_max_prompt_ms", 500},
                 {"response_fields", {"content"}}, {"id_slot", -1}});
  const Json ok = post("/infill", hinted);
  EXPECT_EQ(ok["content"], post("/infill", infill_body())["content"]);
  const double expected = before + static_cast<double>(std::size(cases));
  EXPECT_TRUE(eventually([&] { return scrape(sock(), series) == expected; }))
      << "/metrics counts /infill's 400s: " << scrape(sock(), series) << ", expected " << expected;
}

TEST_F(DaemonInfill, ExtraContextTooLongIsCutFromTheFront) {
  // About 1,100 tokens of another file in a 512-token context.
  std::string big;
  for (int i = 0; i < 160; ++i) big += "value_" + std::to_string(i) + " = " + std::to_string(i * 7) + "\n";
  const Json extra = {{{"filename", "big.py"}, {"text", big}}};
  const Json whole_context = context(extra);
  const Json fim = fim_part();
  ASSERT_GT(whole_context.size() + fim.size(), 512u);
  // n_predict 8: the prompt gets 504 tokens, the last of the extra context
  // and the FIM part, as llama.cpp keeps them.
  const size_t kept = 504 - fim.size();
  Json spelled = Json::array();
  for (size_t i = whole_context.size() - kept; i < whole_context.size(); ++i) spelled.push_back(whole_context[i]);
  append(spelled, fim);
  const Json plain = greedy(spelled);
  const Json r = post("/infill", infill_body(extra));
  EXPECT_EQ(r["truncated"], true) << r;
  EXPECT_EQ(r["tokens_evaluated"], 504) << r;
  EXPECT_EQ(r["content"], plain["choices"][0]["text"]) << r;
  // No n_predict: room for one token.
  Json unlimited = infill_body(extra);
  unlimited.erase("n_predict");
  const Json one = post("/infill", unlimited);
  EXPECT_EQ(one["truncated"], true) << one;
  EXPECT_EQ(one["tokens_evaluated"], 511) << one;
  EXPECT_EQ(one["tokens_predicted"], 1) << one;
  EXPECT_EQ(one["stop_type"], "limit") << one;

  // The FIM part is never cut: too long is the usual 400.
  const HttpResponse too_long = post_json(sock(), "/infill", {{"input_prefix", big}, {"n_predict", 8}});
  ASSERT_EQ(too_long.status, 400) << too_long.body;
  EXPECT_EQ(too_long.json()["error"]["code"], "context_length_exceeded") << too_long.body;
  EXPECT_EQ(too_long.json()["error"]["param"], "input_prefix") << too_long.body;
}

// n_indent: the reply up to the first character of the first line (after
// the reply's first) indented by fewer blanks; the newline and the blanks
// stay. The answer ends with the token that brought that character, and a
// stream sends nothing of what is cut.
TEST_F(DaemonInfill, NIndentCutsTheFirstLineIndentedTooLittle) {
  const InfillStream uncut = stream_infill(sock(), lines_body());
  const std::string text = uncut.text();
  ASSERT_EQ(uncut.last["tokens_predicted"], 64) << text;
  // 1: two lines of one blank pass, the third (none) is cut; 2: the first
  // is cut after its blank.
  for (const int n_indent : {1, 2}) {
    SCOPED_TRACE(n_indent);
    const size_t cut = indent_cut(text, static_cast<size_t>(n_indent));
    ASSERT_NE(cut, std::string::npos) << "no line of the reply has fewer than " << n_indent << " blanks: " << text;
    const size_t piece = piece_at(uncut, cut);
    ASSERT_LT(piece, uncut.pieces.size());
    const Json tokens = uncut.pieces[piece]["tokens_predicted"];
    Json body = lines_body();
    body["n_indent"] = n_indent;
    const Json r = post("/infill", body);
    EXPECT_EQ(r["content"], text.substr(0, cut)) << r;
    EXPECT_EQ(r["stop_type"], "limit") << r;
    EXPECT_EQ(r["stopping_word"], "") << r;
    EXPECT_EQ(r["tokens_predicted"], tokens) << r;
    EXPECT_EQ(r["timings"]["predicted_n"], tokens) << r;
    const InfillStream s = stream_infill(sock(), body);
    EXPECT_EQ(s.text(), text.substr(0, cut));
    EXPECT_EQ(s.last["tokens_predicted"], tokens) << s.last;
    EXPECT_EQ(s.last["stop_type"], "limit") << s.last;
  }
  EXPECT_GE(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(indent_cut(text, 1)), '\n'), 3)
      << "n_indent 1 lets lines through before the one it cuts";

  // A stop string held back when the line is cut (it would start at the cut
  // line's newline and never completes) is let out: the same answer.
  const size_t cut = indent_cut(text, 2);
  const size_t nl = text.rfind('\n', cut);
  const std::string stop = text.substr(nl, cut - nl) + "~never~";
  ASSERT_EQ(text.find(stop), std::string::npos);
  Json body = lines_body();
  body["n_indent"] = 2;
  body["stop"] = {stop};
  const InfillStream s = stream_infill(sock(), body);
  EXPECT_EQ(s.text(), text.substr(0, cut));
  EXPECT_EQ(s.last["stop_type"], "limit") << s.last;
}

// A daemon each of whose tokens takes 5 ms or more (the test hook
// --debug-token-delay-ms sleeps after handing each out): a t_max_predict_ms
// of 1 is past for every token after the first, however fast the machine.
struct SlowFimModelSpec {
  static DaemonSpec spec() {
    DaemonSpec s = FimModelSpec::spec();
    s.args.insert(s.args.end(), {"--debug-token-delay-ms", "5"});
    return s;
  }
};
class DaemonInfillSlow : public DaemonSuite<SlowFimModelSpec> {};

// t_max_predict_ms: once past, the completion ends with the first token that
// brings a newline (llama.cpp's "only upon another new line"), so that it
// ends with a whole line.
TEST_F(DaemonInfillSlow, TMaxPredictMsEndsWithTheFirstNewlinePastIt) {
  constexpr int kNPredict = 32;  // enough for the reply's first newline
  const InfillStream uncut = stream_infill(sock(), lines_body(kNPredict));
  const std::string text = uncut.text();
  const size_t piece = piece_at(uncut, text.find('\n'));
  // Not the first token: its time is the one the delay does not bound.
  ASSERT_GT(piece, 0u) << text;
  ASSERT_LT(piece, uncut.pieces.size()) << "the reply has no newline: " << text;
  size_t end = 0;
  for (size_t i = 0; i <= piece; ++i) end += uncut.pieces[i]["content"].get<std::string>().size();
  const Json tokens = uncut.pieces[piece]["tokens_predicted"];
  ASSERT_LT(tokens.get<int>(), kNPredict);

  Json body = lines_body(kNPredict);
  body["t_max_predict_ms"] = 1;
  const Json r = post("/infill", body);
  EXPECT_EQ(r["content"], text.substr(0, end)) << r;
  EXPECT_EQ(r["stop_type"], "limit") << r;
  EXPECT_EQ(r["tokens_predicted"], tokens) << r;
  // predicted_ms counts from the same start as the limit: past it.
  EXPECT_GT(r["timings"]["predicted_ms"].get<double>(), 1.0) << r;
  const InfillStream s = stream_infill(sock(), body);
  EXPECT_EQ(s.text(), text.substr(0, end));
  EXPECT_EQ(s.last["tokens_predicted"], tokens) << s.last;
  // Ten minutes is never past here: the whole reply.
  body["t_max_predict_ms"] = 600000;
  EXPECT_EQ(post("/infill", body)["content"], text);
}

}  // namespace
}  // namespace minfer::test
