// The `minfer` client commands against a real daemon: complete streams the
// reference text, chat keeps the conversation, health and metrics print and
// set the exit status, and a missing daemon is a clear error.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/api.h"
#include "tests/daemon/daemon_process.h"
#include "tests/daemon/daemon_suite.h"
#include "tests/engine/test_models.h"

namespace minfer::test {
namespace {

struct CommandRun {
  int status = -1;
  std::string out;  // stdout and stderr together
};

// Runs `command` under sh, with `input` on stdin; bounded by timeout(1).
CommandRun run(const std::string& command, const std::string& input = "") {
  TempDir dir;
  std::ofstream(dir.file("in")) << input;
  const std::string full = "timeout 60 " + command + " < " + dir.file("in") + " 2>&1";
  CommandRun r;
  FILE* p = ::popen(full.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// The daemon's log once it holds `n` of `line`: a request's line is written
// after its last byte has gone out, so the client that read that byte may
// have exited before it (CI saw a chat's second turn missing, 2026-12-05).
std::string log_with(const DaemonProcess& d, const std::string& line, int n) {
  std::string log;
  eventually([&] {
    log = d.log();
    int seen = 0;
    for (size_t at = log.find(line); at != std::string::npos; at = log.find(line, at + 1)) ++seen;
    return seen >= n;
  });
  return log;
}

struct DefaultSpec {
  static DaemonSpec spec() { return {}; }
};

class MinferClient : public DaemonSuite<DefaultSpec> {
 protected:
  static std::string minfer(const std::string& args) { return std::string(MINFER_PATH) + " " + args; }
};

TEST_F(MinferClient, CompleteStreamsTheText) {
  const CommandRun r = run(minfer("complete --socket " + sock() + " --temperature 0 -n 27 \"Once upon a time\""));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find(", there was a little girl named Lily. She loved to play outside in the park.\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("5 prompt tokens, 27 generated; finish: length"), std::string::npos) << r.out;
}

// --suffix asks for fill-in-the-middle: the story model has no FIM markers,
// and the client shows the daemon's 400.
TEST_F(MinferClient, SuffixReachesTheDaemon) {
  const CommandRun r = run(minfer("complete --socket " + sock() + " -n 4 --suffix ' the end.' \"Once\""));
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("no FIM markers"), std::string::npos) << r.out;
}

// --repeat-last-n travels as repeat_last_n: a window past the context is the
// daemon's 400, which the client shows; a short one with a penalty serves.
TEST_F(MinferClient, RepeatLastNReachesTheDaemon) {
  const CommandRun bad = run(minfer("complete --socket " + sock() + " --repeat-last-n 1000000 -n 4 \"Once\""));
  EXPECT_NE(bad.status, 0) << bad.out;
  EXPECT_NE(bad.out.find("'repeat_last_n' is 1000000; allowed [-1, "), std::string::npos) << bad.out;
  const CommandRun ok = run(minfer("complete --socket " + sock() +
                                   " --temperature 0.8 --seed 3 --repeat-penalty 1.5 --repeat-last-n 8 -n 12 \"Once\""));
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("12 generated"), std::string::npos) << ok.out;
}

// --json asks for JSON mode: the reply opens an object (the story model
// never closes one within a few tokens); so does `minfer generate --json`.
TEST_F(MinferClient, JsonModeFromTheCommandLine) {
  const CommandRun r = run(minfer("complete --socket " + sock() + " -n 6 --temperature 0 --json 'Once upon a time'"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find_first_not_of(" "), r.out.find('{')) << r.out;
  EXPECT_NE(r.out.find("finish: length"), std::string::npos) << r.out;
  const CommandRun g = run("sh -c \"" + std::string(MINFER_PATH) + " generate -m " + stories_model_path() +
                           " --backend cpu -c 256 -t 1 -n 6 --temp 0 --json -p 'Once upon a time' 2>/dev/null\"");
  ASSERT_EQ(g.status, 0) << g.out;
  EXPECT_EQ(g.out.find_first_not_of(" "), g.out.find('{')) << g.out;  // the continuation may keep a space first
}

// --schema FILE asks for structured output: with an all-enumerated schema the
// reply is such an object, from minferd and from `minfer generate`; a schema
// outside the subset is refused before anything runs.
TEST_F(MinferClient, SchemaFromAFile) {
  TempDir dir;
  std::ofstream(dir.file("mood.json")) << R"({"type": "object", "properties": {"mood": {"enum": ["happy", "sad"]},
      "sure": {"type": "boolean"}}, "required": ["mood", "sure"]})";
  std::ofstream(dir.file("bad.json")) << R"({"type": "integer", "not": {"const": 2}})";
  auto reply = [](const CommandRun& r) {
    const std::string first_line = r.out.substr(0, r.out.find('\n'));
    return nlohmann::json::parse(first_line, nullptr, false);
  };
  const CommandRun c = run(minfer("complete --socket " + sock() + " -n 40 --temperature 0 --schema " + dir.file("mood.json") +
                                  " 'Once upon a time'"));
  ASSERT_EQ(c.status, 0) << c.out;
  const nlohmann::json j = reply(c);
  ASSERT_TRUE(j.is_object()) << c.out;
  EXPECT_TRUE(j["mood"] == "happy" || j["mood"] == "sad") << c.out;
  EXPECT_TRUE(j["sure"].is_boolean()) << c.out;
  EXPECT_NE(c.out.find("finish: stop"), std::string::npos) << c.out;
  const CommandRun g = run("sh -c \"" + std::string(MINFER_PATH) + " generate -m " + stories_model_path() +
                           " --backend cpu -c 256 -t 1 -n 40 --temp 0 --schema " + dir.file("mood.json") +
                           " -p 'Once upon a time' 2>/dev/null\"");
  ASSERT_EQ(g.status, 0) << g.out;
  EXPECT_TRUE(reply(g).is_object()) << g.out;
  const CommandRun bad = run(minfer("complete --socket " + sock() + " -n 4 --schema " + dir.file("bad.json") + " x"));
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("'not' is not supported"), std::string::npos) << bad.out;
  const CommandRun bad_generate = run(std::string(MINFER_PATH) + " generate -m " + stories_model_path() + " --schema " +
                                      dir.file("bad.json") + " -p x");
  EXPECT_EQ(bad_generate.status, 2) << bad_generate.out;
  EXPECT_NE(bad_generate.out.find("'not' is not supported"), std::string::npos) << bad_generate.out;
  const CommandRun missing = run(minfer("complete --socket " + sock() + " --schema /nonexistent.json x"));
  EXPECT_EQ(missing.status, 2) << missing.out;
  EXPECT_NE(missing.out.find("cannot read the schema file /nonexistent.json"), std::string::npos) << missing.out;
}

TEST_F(MinferClient, ChatKeepsTheConversation) {
  const CommandRun r = run(minfer("chat --socket " + sock() + " --temperature 0 -n 6 --system \"Be kind.\""),
                    "Hello\nTell me more\n/quit\n");
  EXPECT_EQ(r.status, 0) << r.out;
  // Two replies, and the daemon saw the second turn with the first in it.
  const std::string log = log_with(*daemon_, "POST /v1/chat/completions 200", 2);
  const size_t first = log.find("POST /v1/chat/completions 200");
  ASSERT_NE(first, std::string::npos) << log;
  const size_t second = log.find("POST /v1/chat/completions 200", first + 1);
  ASSERT_NE(second, std::string::npos) << log;
  auto prompt_tokens = [&](size_t at) {
    const size_t p = log.find("PROMPT_TOKENS=", at);
    return std::stoi(log.substr(p + 14));
  };
  EXPECT_GT(prompt_tokens(second), prompt_tokens(first) + 6) << "the second turn carries the first";
}

// With Qwen2.5's template: `minfer chat --tools` shows the model's call,
// reads the next line as its result and lets the model go on.
struct QwenTemplateSpec {
  static DaemonSpec spec() {
    DaemonSpec s;
    s.args = {"--chat-template-file", test_data_path("chat-templates/qwen2.5-instruct.jinja"),
              "--ctx-size", "2048"};
    return s;
  }
};
class MinferClientTools : public DaemonSuite<QwenTemplateSpec> {};

TEST_F(MinferClientTools, ChatShowsCallsAndSendsResults) {
  TempDir dir;
  std::ofstream(dir.file("tools.json")) << R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";
  const CommandRun r = run(std::string(MINFER_PATH) + " chat --socket " + sock() + " --temperature 0 -n 60 --tools " +
                               dir.file("tools.json") + " --tool-choice get_weather",
                           "Weather in Paris?\nsunny, 21 C\n/quit\n");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("[tool call call_"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" get_weather({\"city\": \""), std::string::npos) << r.out;
  // The call's turn, then the turn with its result (tool_choice auto), longer by the call and the result.
  const std::string log = log_with(*daemon_, "POST /v1/chat/completions 200", 2);
  const size_t first = log.find("POST /v1/chat/completions 200");
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_NE(log.find("FINISH_REASON=tool_calls", first), std::string::npos) << log;
  const size_t second = log.find("POST /v1/chat/completions 200", first + 1);
  ASSERT_NE(second, std::string::npos) << log;
  auto prompt_tokens = [&](size_t at) { return std::stoi(log.substr(log.find("PROMPT_TOKENS=", at) + 14)); };
  EXPECT_GT(prompt_tokens(second), prompt_tokens(first) + 10) << log;
  const CommandRun bad = run(std::string(MINFER_PATH) + " chat --socket " + sock() + " --tools /nonexistent.json", "");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("--tools /nonexistent.json: cannot read"), std::string::npos) << bad.out;
}

TEST_F(MinferClient, HealthAndMetrics) {
  const CommandRun h = run(minfer("health --socket " + sock()));
  EXPECT_EQ(h.status, 0) << h.out;
  EXPECT_NE(h.out.find("\"phase\": \"ready\""), std::string::npos) << h.out;
  const CommandRun m = run(minfer("metrics --socket " + sock()));
  EXPECT_EQ(m.status, 0) << m.out;
  EXPECT_NE(m.out.find("# TYPE minfer_requests_total counter"), std::string::npos) << m.out;
}

TEST_F(MinferClient, NoDaemonIsAClearError) {
  const CommandRun r = run(minfer("health --socket /nonexistent/minferd.sock"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("cannot connect to /nonexistent/minferd.sock"), std::string::npos) << r.out;
  const CommandRun e = run(minfer("complete --socket " + sock() + " -n 0 x"));
  EXPECT_EQ(e.status, 1);
  EXPECT_NE(e.out.find("minferd answered 400: 'max_tokens' is 0"), std::string::npos) << e.out;
}

// The tests a `minfer bench ... -o json` run reports, each checked to have a
// positive speed; none (and a failure) when the run failed.
std::vector<std::string> bench_test_names(const CommandRun& r) {
  const size_t at = r.out.find('{');
  if (r.status != 0 || at == std::string::npos) {
    ADD_FAILURE() << "status " << r.status << ": " << r.out;
    return {};
  }
  const auto report = nlohmann::json::parse(r.out.substr(at));
  std::vector<std::string> names;
  for (const auto& t : report["results"]) {
    names.push_back(t["test"].get<std::string>());
    EXPECT_GT(t["median_tokens_per_s"].get<double>(), 0.0) << t["test"];
  }
  return names;
}

// `minfer bench` needs no daemon: it loads the model itself. -d puts each
// decode test that deep into the context; a negative length is refused.
TEST(MinferBench, DecodeTestsAtDepth) {
  const std::string bench = std::string(MINFER_PATH) + " bench -m " + stories_model_path() + " --backend cpu -r 1";
  EXPECT_EQ(bench_test_names(run(bench + " -p 8 -n 4 -d 0 16 -o json")),
            (std::vector<std::string>{"pp8", "tg4", "tg4@d16"}));
  const CommandRun bad = run(bench + " -n 4 -d -1");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("-p, -n and -d not negative"), std::string::npos) << bad.out;
}

// --temp samples the decode tests (named tgN@tT), --repeat-penalty adds a
// penalty (@rpP); a temperature outside the API's [0, 2], or a penalty
// without a temperature, is refused.
TEST(MinferBench, SampledDecodeTests) {
  const std::string bench = std::string(MINFER_PATH) + " bench -m " + stories_model_path() + " --backend cpu -r 1";
  EXPECT_EQ(bench_test_names(run(bench + " -p 0 -n 4 --temp 0.8 -o json")), (std::vector<std::string>{"tg4@t0.8"}));
  const CommandRun bad = run(bench + " -n 4 --temp 3");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("--temp in [0, 2]"), std::string::npos) << bad.out;
  // --repeat-penalty: the tests named tgN@tT@rpP; only with --temp.
  EXPECT_EQ(bench_test_names(run(bench + " -p 0 -n 4 --temp 0.8 --repeat-penalty 1.1 -o json")),
            (std::vector<std::string>{"tg4@t0.8@rp1.1"}));
  const CommandRun greedy_rp = run(bench + " -n 4 --repeat-penalty 1.1");
  EXPECT_EQ(greedy_rp.status, 2) << greedy_rp.out;
  EXPECT_NE(greedy_rp.out.find("--repeat-penalty in (0, 10] and with --temp"), std::string::npos) << greedy_rp.out;
}

// --logprobs N: the decode tests ask log-probabilities (named @lpN), greedy
// or sampled; outside [0, 20] it is refused. --score: the prompt tests score
// their prompts (ppN@score), the decode tests stay as they were.
TEST(MinferBench, DecodeTestsWithLogprobs) {
  const std::string bench = std::string(MINFER_PATH) + " bench -m " + stories_model_path() + " --backend cpu -r 1";
  EXPECT_EQ(bench_test_names(run(bench + " -p 0 -n 4 --logprobs 5 -o json")), (std::vector<std::string>{"tg4@lp5"}));
  EXPECT_EQ(bench_test_names(run(bench + " -p 0 -n 4 --temp 0.7 --logprobs 0 -o json")),
            (std::vector<std::string>{"tg4@t0.7@lp0"}));
  EXPECT_EQ(bench_test_names(run(bench + " -p 0 -n 4 --json-object -o json")), (std::vector<std::string>{"tg4@json"}));
  EXPECT_EQ(bench_test_names(run(bench + " -p 16 -n 4 --score --logprobs 3 -o json")),
            (std::vector<std::string>{"pp16@score", "tg4@lp3"}));
  const CommandRun bad = run(bench + " -n 4 --logprobs 21");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("--logprobs in [0, 20]"), std::string::npos) << bad.out;
}

// minfer's model-loading commands take minferd's engine switches: with
// every speed switch off the greedy text is still the reference and a seeded
// sample the same text, the warning names what is off, and a deadline that
// is not positive is refused.
// minfer perplexity over a text of the story model's own words (four times
// its reference continuation): chunks of 64 tokens, BOS first, the second
// half of each scored, as llama-perplexity does. The JSON's perplexity, its
// running value after each chunk and its uncertainty are the ones computed
// here from the engine's logits of each chunk (rows 32..62 against tokens
// 33..63); the text form ends with the same value. --chunks caps the
// chunks; a missing file, a text shorter than a chunk, a chunk past the
// context and a chunk of fewer than 3 tokens are refused with the reason.
TEST(MinferPerplexity, IsTheChunksLogitsPerplexity) {
  TempDir dir;
  const std::string text_file = dir.file("story.txt");
  {
    std::ofstream f(text_file);
    for (int i = 0; i < 4; ++i) {
      f << "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, "
           "she saw a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said, \"Lily, "
           "let's go to\n";
    }
  }
  std::ifstream in(text_file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EngineConfig c;
  c.model_path = stories_model_path();
  c.backend = BackendChoice::kCpu;
  c.n_ctx = 256;
  auto engine = Engine::load(c);
  ASSERT_TRUE(engine.has_value()) << engine.error().message;
  const std::vector<int32_t> tokens = (*engine)->tokenize(text, true, false);
  const int vocab = (*engine)->info().vocab_size;
  const size_t n_chunks = tokens.size() / 64;
  ASSERT_GE(n_chunks, 3u);
  double sum = 0.0, sum_sq = 0.0;
  int64_t count = 0;
  std::vector<double> running;
  for (size_t k = 0; k < n_chunks; ++k) {
    std::vector<int32_t> chunk(tokens.begin() + static_cast<ptrdiff_t>(k * 64), tokens.begin() + static_cast<ptrdiff_t>(k * 64 + 64));
    chunk[0] = tokens[0];  // BOS
    const auto logits = (*engine)->eval_logits(chunk);
    ASSERT_TRUE(logits.has_value()) << logits.error().message;
    for (size_t j = 32; j < 63; ++j) {
      const float* row = logits->data() + j * static_cast<size_t>(vocab);
      const double nll = test::log_sum_exp(row, vocab) - row[chunk[j + 1]];
      sum += nll;
      sum_sq += nll * nll;
      ++count;
    }
    running.push_back(std::exp(sum / static_cast<double>(count)));
  }
  const double mean = sum / static_cast<double>(count);
  const double ppl = std::exp(mean);
  const double error = ppl * std::sqrt((sum_sq / static_cast<double>(count) - mean * mean) / static_cast<double>(count - 1));

  const std::string perplexity = std::string(MINFER_PATH) + " perplexity -m " + stories_model_path() +
                                 " --backend cpu -c 256 -t 1 --chunk 64 -f " + text_file;
  const CommandRun as_json = run("sh -c \"" + perplexity + " -o json 2>/dev/null\"");
  ASSERT_EQ(as_json.status, 0) << as_json.out;
  const nlohmann::json j = nlohmann::json::parse(as_json.out);
  EXPECT_EQ(j["chunks"], n_chunks);
  EXPECT_EQ(j["chunk"], 64);
  EXPECT_EQ(j["tokens_scored"], count);
  EXPECT_NEAR(j["ppl"].get<double>(), ppl, 1e-5 * ppl);
  EXPECT_NEAR(j["ppl_error"].get<double>(), error, 1e-4 * error);
  ASSERT_EQ(j["running_ppl"].size(), n_chunks);
  for (size_t k = 0; k < n_chunks; ++k) EXPECT_NEAR(j["running_ppl"][k].get<double>(), running[k], 1e-5 * running[k]) << k;
  EXPECT_GT(ppl, 1.0);
  EXPECT_LT(ppl, 10.0) << "the model's own words";

  const CommandRun as_text = run(perplexity);
  ASSERT_EQ(as_text.status, 0) << as_text.out;
  EXPECT_NE(as_text.out.find(fmt::format("[1]{:.4f},[2]{:.4f}", running[0], running[1])), std::string::npos) << as_text.out;
  EXPECT_NE(as_text.out.find(fmt::format("PPL = {:.4f} +/- ", ppl)), std::string::npos) << as_text.out;
  EXPECT_NE(as_text.out.find(fmt::format("{} chunks of 64 tokens ({} scored)", n_chunks, count)), std::string::npos)
      << as_text.out;
  const CommandRun capped = run("sh -c \"" + perplexity + " --chunks 2 -o json 2>/dev/null\"");
  ASSERT_EQ(capped.status, 0) << capped.out;
  EXPECT_NEAR(nlohmann::json::parse(capped.out)["ppl"].get<double>(), running[1], 1e-5 * running[1]);

  const std::string base = std::string(MINFER_PATH) + " perplexity -m " + stories_model_path() + " --backend cpu -c 256";
  const CommandRun missing = run(base + " -f " + dir.file("none.txt"));
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.out.find("none.txt"), std::string::npos) << missing.out;
  std::ofstream(dir.file("short.txt")) << "Once upon a time";
  const CommandRun short_text = run(base + " --chunk 64 -f " + dir.file("short.txt"));
  EXPECT_EQ(short_text.status, 1);
  EXPECT_NE(short_text.out.find("tokens; a chunk needs 64"), std::string::npos) << short_text.out;
  const CommandRun too_long = run(base + " --chunk 512 -f " + text_file);
  EXPECT_EQ(too_long.status, 1);
  EXPECT_NE(too_long.out.find("--chunk 512 is longer than the context, 256 tokens"), std::string::npos) << too_long.out;
  const CommandRun tiny = run(base + " --chunk 2 -f " + text_file);
  EXPECT_EQ(tiny.status, 2);
  EXPECT_NE(tiny.out.find("--chunk is 2; it must be at least 3"), std::string::npos) << tiny.out;
}

TEST(MinferGenerate, EngineSwitchesLeaveTheTextUnchanged) {
  const std::string generate =
      std::string(MINFER_PATH) + " generate -m " + stories_model_path() + " --backend cpu -c 256 -t 1 -p 'Once upon a time'";
  const std::string off =
      " --cuda-graphs false --fuse-qkv false --fuse-ffn false --fa-prefill false --fused-gemm false --lookahead false "
      "--draw-in-step false "
      "--logprobs-in-step false --constrained-candidates false "
      "--prefix-cache false --step-timeout-ms 5000";
  auto text = [](const std::string& command) { return run("sh -c \"" + command + " 2>/dev/null\""); };
  const CommandRun greedy = text(generate + " -n 27 --temp 0");
  ASSERT_EQ(greedy.status, 0) << greedy.out;
  EXPECT_EQ(greedy.out, ", there was a little girl named Lily. She loved to play outside in the park.");
  const CommandRun greedy_off = text(generate + " -n 27 --temp 0" + off);
  ASSERT_EQ(greedy_off.status, 0) << greedy_off.out;
  EXPECT_EQ(greedy_off.out, greedy.out);
  const CommandRun sampled = text(generate + " -n 48 --temp 0.9 --seed 11");
  const CommandRun sampled_off = text(generate + " -n 48 --temp 0.9 --seed 11" + off);
  ASSERT_EQ(sampled.status, 0) << sampled.out;
  EXPECT_GT(sampled.out.size(), 40u) << sampled.out;
  EXPECT_EQ(sampled_off.out, sampled.out);
  const CommandRun logged = run(generate + " -n 1" + off);
  EXPECT_NE(logged.out.find("engine switches off: cuda-graphs, fuse-qkv, fuse-ffn, fa-prefill, fused-gemm, lookahead, "
                            "draw-in-step, logprobs-in-step, constrained-candidates, prefix-cache"),
            std::string::npos)
      << logged.out;
  const CommandRun bad = run(generate + " -n 1 --step-timeout-ms 0");
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("--step-timeout-ms is 0; it must be a positive number of milliseconds"), std::string::npos)
      << bad.out;
}

}  // namespace
}  // namespace minfer::test
