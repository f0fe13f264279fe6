// `minfer bench`: prefill and decode speed, measured like llama-bench.
//
// ppN: N random prompt tokens evaluated from an empty context (time to the
// first token's logits). tgN: N decode steps after a one-token prompt; with
// -d D, after a prompt of D + 1 tokens ("tgN@dD": decode D tokens deep into
// the context, where attention reads D cached rows a layer). Each
// test runs once to warm up, then -r times; the table shows the median and the
// spread. Decode also shows the weight bandwidth it achieves (weight bytes
// read per token / time per token). --temp T samples the decode tests'
// tokens (the engine's default sampling otherwise: top-k 40, top-p 0.95,
// min-p 0.05) instead of taking the argmax, and names them tgN@tT;
// --repeat-penalty P adds that penalty over the last 64 tokens (@rpP).
// --logprobs N asks each decode token's log-probability and its N most
// likely alternatives (@lpN), as a request with `logprobs` does: the decode
// steps compute them after their pick (with --logprobs-in-step false the
// host, from logits copied back each step, and it picks the token). --score
// has the prompt tests score every prompt token instead (ppN@score: `echo`
// with `logprobs` and max_tokens 0, what evaluation harnesses send; each
// prefill step scores its rows, or the host from copied logits with
// --logprobs-in-step false). --json-object holds the
// decode tests to one JSON object (@json): {"items": [strings...]} of at
// least a million strings, so that no test ends it and every token is
// constrained (JSON mode's {} would end a random model's test at once).
// Greedy: each step lists its best candidates and the host takes the first
// allowed ("fetched" in the JSON output counts the steps whose logits were
// copied because none was; with --constrained-candidates false every step's
// are); with --constrained-lookahead the steps take their argmax where it is
// allowed, and "repicked" counts those refused.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "daemon/minfer/command.h"
#include "daemon/minfer/engine_options.h"
#include "engine/sampling/json_schema.h"

namespace minfer::cli {
namespace {

struct TestResult {
  std::string name;
  int n_tokens = 0;
  std::vector<double> tokens_per_s;
  std::vector<std::tuple<std::string, double, int64_t>> profile;
  int repicked = 0;  // GenerationResult::n_repicked, over the timed runs
  int fetched = 0;   // GenerationResult::n_logits_fetched, over the timed runs
  double median() const {
    std::vector<double> v = tokens_per_s;
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
  }
  double stddev() const {
    if (tokens_per_s.size() < 2) return 0.0;
    double mean = 0;
    for (double x : tokens_per_s) mean += x;
    mean /= static_cast<double>(tokens_per_s.size());
    double var = 0;
    for (double x : tokens_per_s) var += (x - mean) * (x - mean);
    return std::sqrt(var / static_cast<double>(tokens_per_s.size() - 1));
  }
};

// What the decode tests ask besides their length.
struct DecodeOptions {
  float temperature = 0.0f;
  float repeat_penalty = 1.0f;
  int top_logprobs = -1;  // -1: none
  bool json_object = false;
  bool score = false;  // prompt tests: every prompt token scored
};

GenerationRequest bench_request(const Engine& e, int n_prompt, int n_gen, const DecodeOptions& o, std::mt19937& rng) {
  GenerationRequest req;
  std::uniform_int_distribution<int> dist(0, e.info().vocab_size - 1);
  for (int i = 0; i < n_prompt; ++i) req.prompt.push_back(dist(rng));
  req.max_tokens = n_gen;
  if (o.score) {
    req.prompt_logprobs = true;
    req.top_logprobs = std::max(0, o.top_logprobs);
    req.max_tokens = 0;
    return req;
  }
  req.sampling.temperature = o.temperature;  // 0, greedy: the decode path the appliance is judged by
  req.sampling.repeat_penalty = o.repeat_penalty;
  req.top_logprobs = o.top_logprobs;
  if (o.json_object) {
    static const std::shared_ptr<const JsonSchema> kLongObject =
        *JsonSchema::compile(R"({"type": "object", "properties": {"items": {"type": "array", "items": {"type": "string"},
            "minItems": 1000000}}, "required": ["items"]})");
    req.json_schema = kLongObject;
  }
  req.ignore_eos = true;
  return req;
}

}  // namespace

int cmd_bench(const std::vector<std::string>& args) {
  EngineOptions eo;
  eo.n_ctx = 0;
  std::vector<int> pp{512}, tg{128}, depth{0};
  int repeats = 3;
  DecodeOptions decode;
  float& temperature = decode.temperature;
  float& repeat_penalty = decode.repeat_penalty;
  std::string output = "md";
  po::options_description desc("minfer bench options");
  eo.add_to(desc);
  desc.add_options()
      ("n-prompt,p", po::value(&pp)->multitoken()->default_value(pp, "512"), "prompt lengths to test (0: none)")
      ("n-gen,n", po::value(&tg)->multitoken()->default_value(tg, "128"), "decode lengths to test (0: none)")
      ("n-depth,d", po::value(&depth)->multitoken()->default_value(depth, "0"),
       "context tokens before each decode test (tgN@dD)")
      ("repetitions,r", po::value(&repeats)->default_value(repeats), "timed runs per test")
      ("temp", po::value(&temperature)->default_value(temperature),
       "decode tests sample at this temperature (0: greedy), with the default top-k, top-p and min-p")
      ("repeat-penalty", po::value(&repeat_penalty)->default_value(repeat_penalty),
       "decode tests with this repetition penalty over the last 64 tokens (1: off; needs --temp)")
      ("logprobs", po::value(&decode.top_logprobs)->default_value(-1, "off"),
       "decode tests ask each token's log-probability and this many alternatives (0-20; with --score, the "
       "prompt tests' alternatives)")
      ("score", po::bool_switch(&decode.score),
       "prompt tests score every prompt token (echo with logprobs, max_tokens 0: ppN@score)")
      ("json-object", po::bool_switch(&decode.json_object),
       "decode tests hold the output to one JSON object (JSON mode: the host takes the first allowed of each "
       "step's best candidates, from copied logits where none is or with --constrained-candidates false; with "
       "--constrained-lookahead it checks the steps' argmax first)")
      ("output,o", po::value(&output)->default_value(output), "md | json")
      ("profile", "also report where the time goes, per op kind");
  po::variables_map vm;
  int code = 0;
  if (!parse_args("usage: minfer bench -m FILE [-p 512] [-n 128] [-d 0] [-r 3] [-o md|json]", desc, nullptr, args, vm,
                  &code)) {
    return code;
  }
  const bool negative = std::any_of(pp.begin(), pp.end(), [](int v) { return v < 0; }) ||
                        std::any_of(tg.begin(), tg.end(), [](int v) { return v < 0; }) ||
                        std::any_of(depth.begin(), depth.end(), [](int v) { return v < 0; });
  if (repeats < 1 || (output != "md" && output != "json") || negative || !(temperature >= 0.0f && temperature <= 2.0f) ||
      !(repeat_penalty > 0.0f && repeat_penalty <= 10.0f) || (repeat_penalty != 1.0f && temperature == 0.0f) ||
      decode.top_logprobs < -1 || decode.top_logprobs > 20) {
    std::cerr << "minfer: -r must be >= 1, -p, -n and -d not negative, --temp in [0, 2], --repeat-penalty in (0, 10] "
                 "and with --temp, --logprobs in [0, 20], and -o md or json\n";
    return 2;
  }
  int longest = 1;
  for (int p : pp) longest = std::max(longest, p + 1);
  for (int g : tg) {
    for (int d : depth) longest = std::max(longest, d + g + 2);
  }
  if (eo.n_ctx == 0) eo.n_ctx = longest;
  auto loaded = load_engine(eo);
  if (!loaded) {
    std::cerr << "minfer: " << loaded.error().message << "\n";
    return 1;
  }
  Engine& e = **loaded;
  const bool profile = vm.count("profile") > 0;
  std::mt19937 rng(42);
  std::vector<TestResult> results;

  auto run_test = [&](const std::string& name, int n_prompt, int n_gen, bool prefill) -> bool {
    TestResult t;
    t.name = name;
    t.n_tokens = prefill ? n_prompt : n_gen;
    for (int rep = 0; rep <= repeats; ++rep) {  // rep 0 warms up
      DecodeOptions o = prefill ? DecodeOptions{} : decode;
      o.score = false;
      if (prefill && decode.score) {
        o.score = true;
        o.top_logprobs = decode.top_logprobs;
      }
      GenerationRequest req = bench_request(e, n_prompt, n_gen, o, rng);
      if (rep == 1) e.set_profiling(profile);
      GenerationResult r = e.generate(req, nullptr, nullptr);
      if (r.finish == FinishReason::kError) {
        std::cerr << "minfer: " << name << ": " << r.error->message << "\n";
        return false;
      }
      if (rep == 0) continue;
      // Decode: n_gen tokens, the first from the prefill, n_gen - 1 decode steps.
      t.tokens_per_s.push_back(prefill ? r.prefill_tokens_per_s() : r.decode_tokens_per_s());
      t.repicked += r.n_repicked;
      t.fetched += r.n_logits_fetched;
    }
    if (profile) {
      t.profile = e.profile();
      e.set_profiling(false);
    }
    results.push_back(std::move(t));
    return true;
  };
  for (int p : pp) {
    if (p > 0 && !run_test(fmt::format("pp{}{}", p, decode.score ? "@score" : ""), p, 1, true)) return 1;
  }
  for (int d : depth) {
    for (int g : tg) {
      // g decode steps: one more token than steps, the first comes from the prompt.
      std::string name = d > 0 ? fmt::format("tg{}@d{}", g, d) : fmt::format("tg{}", g);
      if (temperature > 0.0f) name += fmt::format("@t{}", temperature);
      if (repeat_penalty != 1.0f) name += fmt::format("@rp{}", repeat_penalty);
      if (decode.top_logprobs >= 0) name += fmt::format("@lp{}", decode.top_logprobs);
      if (decode.json_object) name += "@json";
      if (g > 0 && !run_test(name, d + 1, g + 1, false)) return 1;
    }
  }

  const ModelInfo& info = e.info();
  // Decode is judged against the device's copy bandwidth (bytes read per
  // token over time per token); measured here, in the same run.
  double copy_gbps = 0.0;
  if (info.backend == "cuda") {
    auto bw = measure_device_copy_bandwidth_gbps();
    if (bw) copy_gbps = *bw;
  }
  auto decode_gbps = [&](const TestResult& t) { return t.median() * static_cast<double>(info.decode_bytes_per_token) / 1e9; };
  const double size_gib = static_cast<double>(info.weight_bytes) / (1024.0 * 1024.0 * 1024.0);
  if (output == "json") {
    nlohmann::json j;
    j["model"] = info.path;
    j["arch"] = info.arch;
    j["weight_bytes"] = info.weight_bytes;
    j["weight_types"] = info.weight_types;
    j["backend"] = info.backend;
    j["backend_detail"] = info.backend_detail;
    j["decode_bytes_per_token"] = info.decode_bytes_per_token;
    j["load_ms"] = {{"file", info.load_file_ms}, {"backend", info.load_backend_ms}, {"warmup", info.load_warmup_ms},
                    {"capture", info.load_capture_ms}};
    j["decode_launches"] = info.decode_launches;
    j["rss_after_load_bytes"] = info.rss_after_load_bytes;
    j["released_weight_bytes"] = info.released_weight_bytes;
    if (copy_gbps > 0) j["device_copy_gb_per_s"] = copy_gbps;
    for (const TestResult& t : results) {
      nlohmann::json r;
      r["test"] = t.name;
      r["tokens_per_s"] = t.tokens_per_s;
      r["median_tokens_per_s"] = t.median();
      if (t.name.rfind("tg", 0) == 0) {
        r["weight_gb_per_s"] = decode_gbps(t);
        if (copy_gbps > 0) r["fraction_of_copy_bandwidth"] = decode_gbps(t) / copy_gbps;
      }
      if (decode.json_object && t.name.rfind("tg", 0) == 0) {
        r["repicked"] = t.repicked;
        r["fetched"] = t.fetched;
      }
      for (const auto& [op, ms, calls] : t.profile) r["profile_ms"][op] = ms;
      j["results"].push_back(r);
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "| model | size | types | backend | test | t/s | weight GB/s |\n"
               "|---|---:|---|---|---:|---:|---:|\n";
  for (const TestResult& t : results) {
    const bool decode = t.name.rfind("tg", 0) == 0;
    std::cout << fmt::format("| {} ({}) | {:.2f} GiB | {} | {} ({}) | {} | {:.2f} ± {:.2f} | {} |\n", info.name, info.arch,
                             size_gib, info.weight_types, info.backend, info.backend_detail, t.name, t.median(),
                             t.stddev(),
                             decode ? (copy_gbps > 0 ? fmt::format("{:.1f} ({:.0f}% of {:.0f})", decode_gbps(t),
                                                                   100.0 * decode_gbps(t) / copy_gbps, copy_gbps)
                                                     : fmt::format("{:.1f}", decode_gbps(t)))
                                    : std::string("-"));
  }
  for (const TestResult& t : results) {
    if (t.profile.empty()) continue;
    double total = 0;
    for (const auto& [op, ms, calls] : t.profile) total += ms;
    std::cout << fmt::format("\n{}: time by op kind (all timed runs)\n\n| op | ms | calls | share |\n|---|---:|---:|---:|\n",
                             t.name);
    auto rows = t.profile;
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return std::get<1>(a) > std::get<1>(b); });
    for (const auto& [op, ms, calls] : rows) {
      std::cout << fmt::format("| {} | {:.1f} | {} | {:.1f}% |\n", op, ms, calls, 100.0 * ms / total);
    }
  }
  return 0;
}

}  // namespace minfer::cli
