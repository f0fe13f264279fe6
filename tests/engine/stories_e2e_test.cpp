// End to end on the shipped model (stories260K, trained, all F32): greedy
// decoding must reproduce the reference ids token for token. The reference
// (tests/data/models/reference-greedy.json) was computed by an independent
// float64 Python forward pass from BOS; a greedy run from a prefix of that
// sequence must continue it exactly.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/api.h"
#include "engine/sampling/json_schema.h"
#include "tests/engine/test_models.h"

namespace minfer {
namespace {

std::vector<int32_t> reference_ids() {
  std::ifstream in(test::data_path("models/reference-greedy.json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  return j.at("stories260K.gguf").at("greedy_ids_including_bos").get<std::vector<int32_t>>();
}

// The story model on the CPU backend with a 256-token context, `adjust`ed;
// null (and a failure) when it does not load.
std::unique_ptr<Engine> stories_engine(const std::function<void(EngineConfig&)>& adjust) {
  EngineConfig c;
  c.model_path = test::stories_path();
  c.backend = BackendChoice::kCpu;
  c.n_ctx = 256;
  adjust(c);
  auto e = Engine::load(c);
  EXPECT_TRUE(e.has_value()) << e.error().message;
  return e ? std::move(*e) : nullptr;
}

GenerationRequest greedy(std::vector<int32_t> prompt, int n) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = n;
  r.sampling.temperature = 0.0f;
  return r;
}

// Every test below runs in both decode orders (EngineConfig::lookahead): a
// step submitted once the host has handled the token before it, and steps
// submitted ahead (greedy: two, the second fed with the first's argmax).
template <int N>
struct Lookahead {
  static constexpr int value = N;
};

template <class Order>
class Stories : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineConfig c;
    c.model_path = test::stories_path();
    c.backend = BackendChoice::kCpu;
    c.n_ctx = 256;
    c.lookahead = Order::value;
    auto e = Engine::load(c);
    ASSERT_TRUE(e.has_value()) << e.error().message;
    engine_ = std::move(*e).release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  static Engine* engine_;
};
template <class Order>
Engine* Stories<Order>::engine_ = nullptr;
using Orders = testing::Types<Lookahead<0>, Lookahead<1>>;
TYPED_TEST_SUITE(Stories, Orders);

TYPED_TEST(Stories, ModelInfo) {
  const ModelInfo& i = this->engine_->info();
  EXPECT_EQ(i.arch, "llama");
  EXPECT_EQ(i.n_layers, 5);
  EXPECT_EQ(i.d_model, 64);
  EXPECT_EQ(i.n_heads, 8);
  EXPECT_EQ(i.n_kv_heads, 4);
  EXPECT_EQ(i.vocab_size, 512);
  EXPECT_EQ(i.backend, "cpu");
}

TYPED_TEST(Stories, TokenizesThePrompt) {
  EXPECT_EQ(this->engine_->tokenize("Once upon a time", true, false), (std::vector<int32_t>{1, 403, 407, 261, 378}));
}

TYPED_TEST(Stories, GreedyFromBosMatchesReference80Tokens) {
  const std::vector<int32_t> ref = reference_ids();
  ASSERT_EQ(ref.size(), 81u);
  GenerationResult r = this->engine_->generate(greedy({1}, 80), nullptr, nullptr);
  ASSERT_NE(r.finish, FinishReason::kError) << r.error->message;
  EXPECT_EQ(r.tokens, std::vector<int32_t>(ref.begin() + 1, ref.end()));
}

TYPED_TEST(Stories, OnceUponATimeContinuesTheReference48Tokens) {
  const std::vector<int32_t> ref = reference_ids();
  const std::vector<int32_t> prompt = this->engine_->tokenize("Once upon a time", true, false);
  ASSERT_EQ(prompt, std::vector<int32_t>(ref.begin(), ref.begin() + 5));
  GenerationResult r = this->engine_->generate(greedy(prompt, 48), nullptr, nullptr);
  ASSERT_NE(r.finish, FinishReason::kError) << r.error->message;
  EXPECT_EQ(r.tokens, std::vector<int32_t>(ref.begin() + 5, ref.begin() + 53));
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(r.n_generated, 48);
  // The reference text (README of the data): "… Once upon a time, there was a little girl named Lily. …"
  EXPECT_EQ(r.text.rfind(", there was a little girl named Lily. She loved to play outside in the park.", 0), 0u) << r.text;
}

TYPED_TEST(Stories, StreamedPiecesJoinToTheText) {
  std::string streamed;
  int token_events = 0;
  GenerationRequest req = greedy({1}, 40);
  req.stop = {"zzz"};  // never completes; a trailing "z" would be held back and flushed as a tail
  GenerationResult r = this->engine_->generate(req, [&](const TokenEvent& e) {
    streamed += e.text;
    token_events += e.tail ? 0 : 1;
    return true;
  }, nullptr);
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(token_events, r.n_generated);  // one event per token, plus at most one tail
  EXPECT_EQ(*this->engine_->detokenize(r.tokens), r.text);
}

TYPED_TEST(Stories, SameSeedSameOutputOtherSeedOtherOutput) {
  GenerationRequest req = greedy({1, 403, 407}, 40);
  req.sampling.temperature = 1.0f;
  req.sampling.top_k = 0;
  req.sampling.top_p = 1.0f;
  req.sampling.min_p = 0.0f;
  req.sampling.seed = 42;
  const GenerationResult a = this->engine_->generate(req, nullptr, nullptr);
  const GenerationResult b = this->engine_->generate(req, nullptr, nullptr);
  EXPECT_EQ(a.tokens, b.tokens);
  req.sampling.seed = 43;
  const GenerationResult c = this->engine_->generate(req, nullptr, nullptr);
  EXPECT_NE(a.tokens, c.tokens);
}

TYPED_TEST(Stories, CallbackCancelStopsWithinOneStep) {
  int calls = 0;
  GenerationResult r = this->engine_->generate(greedy({1}, 40), [&](const TokenEvent&) { return ++calls < 3; }, nullptr);
  EXPECT_EQ(r.finish, FinishReason::kCancelled);
  EXPECT_EQ(r.n_generated, 3);
  EXPECT_EQ(calls, 3);
}

TYPED_TEST(Stories, CancelFlagStopsWithinOneStep) {
  std::atomic<bool> cancel{false};
  int calls = 0;
  GenerationResult r = this->engine_->generate(greedy({1}, 40), [&](const TokenEvent&) {
    if (++calls == 5) cancel = true;
    return true;
  }, &cancel);
  EXPECT_EQ(r.finish, FinishReason::kCancelled);
  EXPECT_EQ(r.n_generated, 5);
}

TYPED_TEST(Stories, StopStringEndsTheTextBeforeIt) {
  GenerationResult r = this->engine_->generate(greedy({1}, 80), nullptr, nullptr);
  GenerationRequest req = greedy({1}, 80);
  req.stop = {"girl"};
  GenerationResult s = this->engine_->generate(req, nullptr, nullptr);
  EXPECT_EQ(s.finish, FinishReason::kStop);
  EXPECT_EQ(s.text, r.text.substr(0, r.text.find("girl")));
}

TYPED_TEST(Stories, PrefixCacheReusesTheCommonPrefixAndChangesNothing) {
  const std::vector<int32_t> prompt = this->engine_->tokenize("Once upon a time there was a dog", true, false);
  const GenerationResult a = this->engine_->generate(greedy(prompt, 20), nullptr, nullptr);
  const GenerationResult b = this->engine_->generate(greedy(prompt, 20), nullptr, nullptr);
  EXPECT_EQ(b.n_cached, static_cast<int>(prompt.size()) - 1);
  EXPECT_EQ(a.tokens, b.tokens);
}

// Log-probabilities: each generated token's equals the log-softmax of the
// logits a teacher-forced evaluation of the same sequence gives (an
// independent path: one prefill, no decode steps); the greedy pick is the
// most likely token; the tokens and text are those of the request without
// log-probabilities (greedy, and sampled with a seed, whose steps otherwise
// draw their tokens themselves); top lists are best first, and each event
// carries its token's.
TYPED_TEST(Stories, LogprobsAreTheModelsAndChangeNoToken) {
  const std::vector<int32_t> prompt = this->engine_->tokenize("Once upon a time", true, false);
  GenerationRequest req = greedy(prompt, 24);
  const GenerationResult plain = this->engine_->generate(req, nullptr, nullptr);
  req.top_logprobs = 5;
  std::vector<TokenLogprobs> streamed;
  const GenerationResult r = this->engine_->generate(req, [&](const TokenEvent& e) {
    if (e.logprobs) streamed.push_back(*e.logprobs);
    EXPECT_EQ(e.logprobs.has_value(), !e.tail);
    return true;
  }, nullptr);
  ASSERT_NE(r.finish, FinishReason::kError) << r.error->message;
  EXPECT_EQ(r.tokens, plain.tokens);
  EXPECT_EQ(r.text, plain.text);
  ASSERT_EQ(r.logprobs.size(), r.tokens.size());
  ASSERT_EQ(streamed.size(), r.tokens.size());

  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), r.tokens.begin(), r.tokens.end());
  const auto logits = this->engine_->eval_logits(seq);
  ASSERT_TRUE(logits.has_value()) << logits.error().message;
  const int vocab = this->engine_->info().vocab_size;
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    const TokenLogprobs& lp = r.logprobs[i];
    const float* row = logits->data() + (prompt.size() - 1 + i) * static_cast<size_t>(vocab);
    const double log_z = test::log_sum_exp(row, vocab);
    EXPECT_EQ(lp.chosen.token, r.tokens[i]);
    EXPECT_NEAR(lp.chosen.logprob, row[r.tokens[i]] - log_z, 1e-3) << "token " << i;
    ASSERT_EQ(lp.top.size(), 5u);
    EXPECT_EQ(lp.top[0].token, lp.chosen.token) << "greedy takes the most likely";
    EXPECT_EQ(lp.top[0].logprob, lp.chosen.logprob);
    double mass = 0.0;
    for (size_t k = 0; k < lp.top.size(); ++k) {
      EXPECT_NEAR(lp.top[k].logprob, row[lp.top[k].token] - log_z, 1e-3);
      if (k > 0) {
        EXPECT_LE(lp.top[k].logprob, lp.top[k - 1].logprob);
      }
      mass += std::exp(lp.top[k].logprob);
    }
    EXPECT_LE(mass, 1.0 + 1e-5);
    EXPECT_EQ(streamed[i].chosen.token, lp.chosen.token);
    EXPECT_EQ(streamed[i].chosen.logprob, lp.chosen.logprob);
  }
  // The tokens' bytes join to the text (no stop string cut it, and its first
  // token, ",", has no leading space for the decoder to drop).
  std::string joined;
  for (const TokenLogprobs& lp : r.logprobs) joined += lp.chosen.bytes;
  EXPECT_EQ(joined, r.text);

  GenerationRequest sampled = greedy(prompt, 24);
  sampled.sampling.temperature = 0.9f;
  sampled.sampling.seed = 5;
  const GenerationResult s_plain = this->engine_->generate(sampled, nullptr, nullptr);
  sampled.top_logprobs = 0;
  const GenerationResult s_lp = this->engine_->generate(sampled, nullptr, nullptr);
  EXPECT_EQ(s_lp.tokens, s_plain.tokens);
  ASSERT_EQ(s_lp.logprobs.size(), s_lp.tokens.size());
  for (const TokenLogprobs& lp : s_lp.logprobs) {
    EXPECT_TRUE(lp.top.empty());
    EXPECT_LE(lp.chosen.logprob, 0.0f);
  }
  sampled.top_logprobs = kMaxTopLogprobs + 1;
  const GenerationResult bad = this->engine_->generate(sampled, nullptr, nullptr);
  ASSERT_EQ(bad.finish, FinishReason::kError);
  EXPECT_NE(bad.error->message.find("top_logprobs is 21; allowed -1 (none) to 20"), std::string::npos) << bad.error->message;
}

// Log-probabilities computed by the steps that pick the tokens
// (EngineConfig::logprobs_in_step, Op::kLogprobs) are the host's from the
// copied logits, bit for bit on the CPU backend (one function computes
// both): the same tokens, log-probabilities and top lists, greedy and
// drawn, for 0, 3 and 20 listed; the steps' op ran, and never with the
// switch off.
TYPED_TEST(Stories, LogprobsInTheStepAreTheHostsBitForBit) {
  Engine* steps = this->engine_;  // the default: the steps'
  ASSERT_TRUE(EngineConfig{}.logprobs_in_step);
  auto host = stories_engine([](EngineConfig& c) {
    c.lookahead = TypeParam::value;
    c.logprobs_in_step = false;
  });
  ASSERT_NE(host, nullptr);
  const std::vector<int32_t> prompt = this->engine_->tokenize("Once upon a time", true, false);
  for (const bool sampled : {false, true}) {
    for (const int n : {0, 3, kMaxTopLogprobs}) {
      SCOPED_TRACE(testing::Message() << (sampled ? "sampled" : "greedy") << ", top " << n);
      GenerationRequest req = greedy(prompt, 16);
      req.top_logprobs = n;
      if (sampled) {
        req.sampling.temperature = 0.9f;
        req.sampling.seed = 7;
      }
      steps->set_profiling(true);
      const GenerationResult a = steps->generate(req, nullptr, nullptr);
      const int64_t in_step = test::op_calls(*steps, "logprobs");
      steps->set_profiling(false);
      host->set_profiling(true);
      const GenerationResult b = host->generate(req, nullptr, nullptr);
      EXPECT_EQ(test::op_calls(*host, "logprobs"), 0);
      host->set_profiling(false);
      ASSERT_NE(a.finish, FinishReason::kError) << a.error->message;
      ASSERT_NE(b.finish, FinishReason::kError) << b.error->message;
      EXPECT_GE(in_step, a.n_generated - 1);  // every decode step's; the first token's are the prefill's
      EXPECT_GT(in_step, 0);
      EXPECT_EQ(a.tokens, b.tokens);
      ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
      for (size_t i = 0; i < a.logprobs.size(); ++i) {
        const TokenLogprobs &x = a.logprobs[i], &y = b.logprobs[i];
        EXPECT_EQ(x.chosen.token, y.chosen.token) << i;
        EXPECT_EQ(x.chosen.logprob, y.chosen.logprob) << i;
        EXPECT_EQ(x.chosen.bytes, y.chosen.bytes) << i;
        ASSERT_EQ(x.top.size(), static_cast<size_t>(n)) << i;
        ASSERT_EQ(y.top.size(), static_cast<size_t>(n)) << i;
        for (size_t k = 0; k < x.top.size(); ++k) {
          EXPECT_EQ(x.top[k].token, y.top[k].token) << i << " " << k;
          EXPECT_EQ(x.top[k].logprob, y.top[k].logprob) << i << " " << k;
        }
      }
    }
  }
}

// JSON mode: the story model's output, greedy or sampled, is always a prefix
// of one JSON object (it never closes one by itself within 150 tokens, but
// every token keeps the text valid); biased toward '}', the object closes at
// once and generation ends there with kStop.
TYPED_TEST(Stories, JsonModeKeepsTheOutputAJsonObject) {
  const std::vector<int32_t> prompt = this->engine_->tokenize("Once upon a time", true, false);
  for (int seed = 0; seed < 4; ++seed) {
    GenerationRequest req = greedy(prompt, 150);
    req.json_object = true;
    if (seed > 0) {
      req.sampling.temperature = 0.8f;
      req.sampling.seed = static_cast<uint64_t>(seed);
    }
    const GenerationResult r = this->engine_->generate(req, nullptr, nullptr);
    ASSERT_NE(r.finish, FinishReason::kError) << r.error->message;
    JsonSchemaGrammar g(JsonSchema::any_object());
    EXPECT_TRUE(g.advance(r.text)) << "seed " << seed << ": " << r.text;
    EXPECT_EQ(r.text.find('{'), r.text.find_first_not_of(' ')) << r.text;
    if (r.finish == FinishReason::kStop) {
      EXPECT_TRUE(g.complete());
      EXPECT_TRUE(nlohmann::json::parse(r.text, nullptr, false).is_object()) << r.text;
    }
  }
  // Every token that decodes to a closing brace, pushed up.
  GenerationRequest req = greedy(prompt, 40);
  req.json_object = true;
  for (int32_t id = 0; id < this->engine_->info().vocab_size; ++id) {
    const auto text = this->engine_->detokenize({id});
    if (text && text->find('}') != std::string::npos) req.sampling.logit_bias.emplace_back(id, 50.0f);
  }
  ASSERT_FALSE(req.sampling.logit_bias.empty());
  const GenerationResult closed = this->engine_->generate(req, nullptr, nullptr);
  ASSERT_NE(closed.finish, FinishReason::kError) << closed.error->message;
  EXPECT_EQ(closed.finish, FinishReason::kStop);
  EXPECT_LE(closed.n_generated, 3);
  const nlohmann::json object = nlohmann::json::parse(closed.text, nullptr, false);
  EXPECT_TRUE(object.is_object() && object.empty()) << closed.text;
}

// Structured output: with a schema whose values are all enumerated the story
// model has to write exactly such an object, and generation ends with it.
TYPED_TEST(Stories, JsonSchemaOutputIsAnObjectTheSchemaDescribes) {
  auto schema = JsonSchema::compile(R"({"type": "object", "properties": {"mood": {"enum": ["happy", "sad"]},
      "ok": {"type": "boolean"}, "n": {"type": ["null", "boolean"]}}, "required": ["mood", "ok"]})");
  ASSERT_TRUE(schema.has_value()) << schema.error().message;
  for (int seed = 0; seed < 3; ++seed) {
    GenerationRequest req = greedy(this->engine_->tokenize("Once upon a time", true, false), 60);
    req.json_schema = *schema;
    if (seed > 0) {
      req.sampling.temperature = 0.8f;
      req.sampling.seed = static_cast<uint64_t>(seed);
    }
    const GenerationResult r = this->engine_->generate(req, nullptr, nullptr);
    ASSERT_NE(r.finish, FinishReason::kError) << r.error->message;
    EXPECT_EQ(r.finish, FinishReason::kStop) << r.text;
    const nlohmann::json j = nlohmann::json::parse(r.text, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.text;
    EXPECT_TRUE(j["mood"] == "happy" || j["mood"] == "sad") << r.text;
    EXPECT_TRUE(j["ok"].is_boolean()) << r.text;
    EXPECT_TRUE(!j.contains("n") || j["n"].is_null() || j["n"].is_boolean()) << r.text;
    EXPECT_LE(j.size(), 3u);
  }
  GenerationRequest both = greedy({1}, 4);
  both.json_schema = *schema;
  both.json_object = true;
  const GenerationResult refused = this->engine_->generate(both, nullptr, nullptr);
  ASSERT_EQ(refused.finish, FinishReason::kError);
  EXPECT_NE(refused.error->message.find("pick one"), std::string::npos);
}

// The two decode orders side by side over one series of requests — each
// reusing the previous one's prefix — that ends at the end-of-text token, a
// stop string, a cancelling callback, the length, and a sampled request:
// the same tokens, text, ends, reused prefixes and counted steps.
TEST(EngineLookahead, BothOrdersGiveTheSameResults) {
  std::unique_ptr<Engine> engines[2];
  for (int order = 0; order < 2; ++order) {
    engines[order] = stories_engine([&](EngineConfig& c) { c.lookahead = order; });
    ASSERT_TRUE(engines[order]);
  }
  std::vector<GenerationRequest> requests;
  // Into the end-of-text token (the model never picks it unaided): greedy
  // with a bias, so the host picks the tokens and one step is submitted ahead.
  GenerationRequest eos = greedy({1}, 200);
  eos.sampling.logit_bias = {{2, 21.0f}};
  requests.push_back(eos);
  GenerationRequest stop = greedy({1, 403, 407}, 80);
  stop.stop = {"girl"};
  requests.push_back(stop);
  requests.push_back(greedy({1, 403, 407, 261}, 40));  // cancelled by its callback at the 3rd token
  requests.push_back(greedy({1, 403, 407, 261, 378}, 7));
  GenerationRequest sampled = greedy({1, 403, 407, 261, 378, 432}, 30);
  sampled.sampling.temperature = 1.0f;
  sampled.sampling.seed = 7;
  requests.push_back(sampled);
  requests.push_back(greedy({1}, 12));
  std::vector<FinishReason> ends;
  for (size_t i = 0; i < requests.size(); ++i) {
    GenerationResult r[2];
    uint64_t steps[2];
    for (int order = 0; order < 2; ++order) {
      int calls = 0;
      const uint64_t before = engines[order]->health().steps;
      r[order] = engines[order]->generate(requests[i], [&](const TokenEvent&) { return i != 2 || ++calls < 3; }, nullptr);
      steps[order] = engines[order]->health().steps - before;
      ASSERT_NE(r[order].finish, FinishReason::kError) << r[order].error->message;
    }
    SCOPED_TRACE(testing::Message() << "request " << i);
    EXPECT_EQ(r[0].tokens, r[1].tokens);
    EXPECT_EQ(r[0].text, r[1].text);
    EXPECT_EQ(r[0].finish, r[1].finish);
    EXPECT_EQ(r[0].n_cached, r[1].n_cached);
    EXPECT_EQ(steps[0], steps[1]);
    ends.push_back(r[1].finish);
    if (i == 0) {
      EXPECT_GE(r[1].n_generated, 3) << "the end-of-text token comes too early to test much";
    }
  }
  EXPECT_EQ(ends, (std::vector<FinishReason>{FinishReason::kEos, FinishReason::kStop, FinishReason::kCancelled,
                                             FinishReason::kLength, FinishReason::kLength, FinishReason::kLength}));
}

// Greedy constrained requests whose steps list their best candidates, the
// host taking the first allowed (EngineConfig::constrained_candidates; the
// logits copied where none is), and that take their steps' argmax, checked by
// the constraint (EngineConfig::constrained_lookahead, with steps ahead;
// without them the switch changes nothing; with the lists a refused argmax's
// step runs again only where its list holds nothing allowed), against the
// host picking from every step's logits: the same tokens, text and ends —
// JSON mode, schemas the story model keeps running into (its argmax and at
// times its whole list refused), a forced tool call, and a request that
// reuses a prefix.
TEST(EngineConstrained, CheckedArgmaxGivesTheHostsTokens) {
  struct Arm {
    bool constrained_candidates;
    bool constrained_lookahead;
    int lookahead;
  };
  constexpr int kArms = 5;
  const Arm arms[kArms] = {{false, false, 0}, {false, true, 1}, {false, true, 0}, {true, false, 0}, {true, true, 1}};
  std::unique_ptr<Engine> engines[kArms];
  for (int a = 0; a < kArms; ++a) {
    engines[a] = stories_engine([&](EngineConfig& c) {
      c.constrained_candidates = arms[a].constrained_candidates ? 1 : 0;  // 1: on the CPU backend too
      c.constrained_lookahead = arms[a].constrained_lookahead;
      c.lookahead = arms[a].lookahead;
    });
    ASSERT_TRUE(engines[a]);
  }
  const std::vector<int32_t> story = engines[0]->tokenize("Once upon a time", true, false);
  auto schema = [](const char* text) {
    auto s = JsonSchema::compile(text);
    EXPECT_TRUE(s.has_value()) << text;
    return s ? *s : nullptr;
  };
  std::vector<GenerationRequest> requests;
  GenerationRequest json = greedy(story, 80);
  json.json_object = true;
  requests.push_back(json);
  GenerationRequest mood = greedy(story, 60);
  mood.json_schema = schema(R"({"type": "object", "properties": {"mood": {"enum": ["happy", "sad"]},
      "ok": {"type": "boolean"}}, "required": ["mood", "ok"]})");
  requests.push_back(mood);
  GenerationRequest order = greedy(story, 120);
  order.json_schema = schema(R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 7},
      "price": {"type": "number", "multipleOf": 0.5, "maximum": 9}, "day": {"type": "string", "format": "date"},
      "tags": {"type": "array", "items": {"enum": ["a", "bb"]}, "maxItems": 2}}, "required": ["n", "price", "day", "tags"]})");
  requests.push_back(order);
  GenerationRequest again = order;  // its prompt's prefix in the cache
  again.prompt.push_back(story.back());
  requests.push_back(again);
  GenerationRequest call = greedy(story, 60);
  call.tool_call_schema = schema(R"({"type": "object", "properties": {"name": {"const": "weather"},
      "arguments": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"]}},
      "required": ["name", "arguments"]})");
  call.tool_call_style = ToolStyle::kLlama3;
  requests.push_back(call);

  int repicked[kArms] = {}, fetched[kArms] = {}, generated[kArms] = {};
  uint64_t steps[kArms] = {};
  for (size_t i = 0; i < requests.size(); ++i) {
    GenerationResult results[kArms];
    for (int a = 0; a < kArms; ++a) {
      const uint64_t before = engines[a]->health().steps;
      results[a] = engines[a]->generate(requests[i], nullptr, nullptr);
      ASSERT_NE(results[a].finish, FinishReason::kError) << "request " << i << ", arm " << a << ": " << results[a].error->message;
      steps[a] += engines[a]->health().steps - before;
      repicked[a] += results[a].n_repicked;
      fetched[a] += results[a].n_logits_fetched;
      generated[a] += results[a].n_generated;
    }
    for (int a = 1; a < kArms; ++a) {
      EXPECT_EQ(results[a].tokens, results[0].tokens) << "request " << i << ", arm " << a;
      EXPECT_EQ(results[a].text, results[0].text) << "request " << i << ", arm " << a;
      EXPECT_EQ(results[a].finish, results[0].finish) << "request " << i << ", arm " << a;
      EXPECT_EQ(results[a].n_cached, results[0].n_cached) << "request " << i << ", arm " << a;
    }
  }
  EXPECT_EQ(repicked[0], 0);  // the host picks every token: nothing to pick again
  EXPECT_GT(repicked[1], 0);  // the story model's argmax is refused now and then
  EXPECT_EQ(repicked[2], 0);  // no steps ahead: the host picks, the switch notwithstanding
  EXPECT_EQ(repicked[4], repicked[1]);  // the same argmaxes refused ...
  EXPECT_LT(steps[4], steps[1]);        // ... but some settled by their step's list, not run again
  for (int a : {0, 1, 2}) EXPECT_EQ(fetched[a], 0) << "arm " << a;  // no lists
  // Listed steps: the list settles most, not all (a decode step a token but
  // the prefill's first).
  EXPECT_GT(fetched[3], 0);
  EXPECT_LT(fetched[3], generated[3] - static_cast<int>(requests.size()));
  EXPECT_EQ(steps[3], steps[0]);  // a copy of the logits, not a step
  std::printf("listed: %d of %d tokens' logits fetched; checked argmax: %d refused, %llu vs %llu steps\n", fetched[3],
              generated[3], repicked[1], static_cast<unsigned long long>(steps[4]),
              static_cast<unsigned long long>(steps[1]));
}

// A constrained request for log-probabilities (greedy: the steps list their
// candidates with the log-probabilities) against the host computing them
// from every step's logits: the same tokens and top lists, the same
// log-probabilities (the CPU backend computes both the host's way).
TEST(EngineConstrained, ListedCandidatesGiveTheHostsLogprobs) {
  std::unique_ptr<Engine> engines[2];
  for (int a = 0; a < 2; ++a) {
    engines[a] = stories_engine([&](EngineConfig& c) { c.constrained_candidates = a; });  // 1: on the CPU too
    ASSERT_TRUE(engines[a]);
  }
  GenerationRequest req = greedy(engines[0]->tokenize("Once upon a time", true, false), 60);
  req.json_object = true;
  req.top_logprobs = 3;
  GenerationResult r[2];
  for (int a = 0; a < 2; ++a) {
    r[a] = engines[a]->generate(req, nullptr, nullptr);
    ASSERT_NE(r[a].finish, FinishReason::kError) << r[a].error->message;
  }
  EXPECT_EQ(r[1].tokens, r[0].tokens);
  EXPECT_EQ(r[0].n_logits_fetched, 0);
  EXPECT_LT(r[1].n_logits_fetched, r[1].n_generated - 1);  // some tokens came from the lists
  ASSERT_EQ(r[1].logprobs.size(), r[0].logprobs.size());
  ASSERT_EQ(r[0].logprobs.size(), r[0].tokens.size());
  for (size_t i = 0; i < r[0].logprobs.size(); ++i) {
    const TokenLogprobs &host = r[0].logprobs[i], &listed = r[1].logprobs[i];
    EXPECT_EQ(listed.chosen.token, host.chosen.token) << "token " << i;
    EXPECT_EQ(listed.chosen.logprob, host.chosen.logprob) << "token " << i;
    ASSERT_EQ(listed.top.size(), host.top.size()) << "token " << i;
    for (size_t k = 0; k < host.top.size(); ++k) {
      EXPECT_EQ(listed.top[k].token, host.top[k].token) << "token " << i << ", top " << k;
      EXPECT_EQ(listed.top[k].logprob, host.top[k].logprob) << "token " << i << ", top " << k;
    }
  }
}

// Sampled requests whose steps draw their tokens (Op::kSample; with steps
// queued ahead, fed with the draw) against the host sampler drawing from the
// copied logits: the same tokens, text and ends — the defaults, a bias that
// bans the top token, a stop string, k = 1, penalties over the default
// window, over a short one with a bias, over the step's own token alone
// (pushed up, so that it decides draws) and over it and the one before
// (pushed down: three biased tokens in a cycle) — and the requests a step cannot
// draw (a penalties' window past 64 tokens, no top-k) on the host in both.
TEST(EngineDraw, StepsThatDrawGiveTheHostSamplersTokens) {
  struct Arm {
    bool draw_in_step;
    int lookahead;
  };
  const Arm arms[3] = {{false, 0}, {true, 1}, {true, 0}};
  std::unique_ptr<Engine> engines[3];
  for (int a = 0; a < 3; ++a) {
    engines[a] = stories_engine([&](EngineConfig& c) {
      c.draw_in_step = arms[a].draw_in_step;
      c.lookahead = arms[a].lookahead;
    });
    ASSERT_TRUE(engines[a]);
  }
  auto sampled = [](std::vector<int32_t> prompt, int n, uint64_t seed) {
    GenerationRequest r = greedy(std::move(prompt), n);
    r.sampling = SamplingParams{};  // T 0.8, top-k 40, top-p 0.95, min-p 0.05
    r.sampling.seed = seed;
    return r;
  };
  std::vector<GenerationRequest> requests;
  requests.push_back(sampled({1}, 60, 1));
  GenerationRequest banned = sampled({1, 403}, 40, 2);
  banned.sampling.temperature = 1.5f;
  banned.sampling.logit_bias = {{407, -INFINITY}, {261, 2.0f}, {261, 0.5f}};
  requests.push_back(banned);
  GenerationRequest stop = sampled({1, 403, 407}, 120, 3);
  stop.stop = {"."};
  requests.push_back(stop);
  GenerationRequest one = sampled({1, 403, 407}, 20, 4);
  one.sampling.top_k = 1;
  requests.push_back(one);
  GenerationRequest penalized = sampled({1, 378}, 30, 5);
  penalized.sampling.repeat_penalty = 1.3f;
  requests.push_back(penalized);
  GenerationRequest counted = sampled({1, 378, 378, 403}, 50, 7);
  counted.sampling.frequency_penalty = 0.6f;
  counted.sampling.presence_penalty = 0.4f;
  counted.sampling.penalty_last_n = 8;
  counted.sampling.logit_bias = {{378, 1.0f}};
  requests.push_back(counted);
  GenerationRequest echo = sampled({1, 378}, 30, 9);
  echo.sampling.repeat_penalty = 0.5f;  // the step's own token pushed up: the window is it alone
  echo.sampling.presence_penalty = -1.0f;
  echo.sampling.penalty_last_n = 1;
  requests.push_back(echo);
  // Three tokens pushed far above the rest, the last two tokens all but
  // banned: the draws cycle through the three — a window that missed the
  // token before the step's own (a step queued ahead takes it from the host
  // and its own from the device) would let one repeat.
  GenerationRequest cycle = sampled({1, 378}, 30, 10);
  cycle.sampling.logit_bias = {{300, 20.0f}, {301, 20.0f}, {302, 20.0f}};
  cycle.sampling.repeat_penalty = 10.0f;
  cycle.sampling.presence_penalty = 2.0f;
  cycle.sampling.penalty_last_n = 2;
  const size_t cycle_index = requests.size();
  requests.push_back(cycle);
  GenerationRequest wide = sampled({1, 378}, 30, 8);
  wide.sampling.repeat_penalty = 1.3f;
  wide.sampling.penalty_last_n = 65;  // past the window a step carries
  requests.push_back(wide);
  GenerationRequest no_top_k = sampled({1, 378}, 30, 6);
  no_top_k.sampling.top_k = 0;
  requests.push_back(no_top_k);
  const bool step_draws[] = {true, true, true, true, true, true, true, true, false, false};
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "request " << i);
    GenerationResult r[3];
    int64_t draws[3] = {};
    for (int a = 0; a < 3; ++a) {
      engines[a]->set_profiling(true);
      r[a] = engines[a]->generate(requests[i], nullptr, nullptr);
      ASSERT_NE(r[a].finish, FinishReason::kError) << r[a].error->message;
      for (const auto& [op, ms, calls] : engines[a]->profile()) {
        if (op == "sample") draws[a] = calls;
      }
      engines[a]->set_profiling(false);
    }
    for (int a = 1; a < 3; ++a) {
      EXPECT_EQ(r[0].tokens, r[a].tokens);
      EXPECT_EQ(r[0].text, r[a].text);
      EXPECT_EQ(r[0].finish, r[a].finish);
    }
    // Every decode step drew its token (the first token is the prefill's);
    // with steps ahead, up to two more were drawn and dropped at the end.
    const int64_t steps = r[0].n_generated - 1;
    EXPECT_EQ(draws[0], 0);
    EXPECT_EQ(draws[2], step_draws[i] ? steps : 0);
    EXPECT_GE(draws[1], step_draws[i] ? steps : 0);
    EXPECT_LE(draws[1], step_draws[i] ? steps + 2 : 0);
    EXPECT_GE(r[0].n_generated, 3);
    if (i == cycle_index) {
      for (size_t t = 2; t < r[0].tokens.size(); ++t) {
        ASSERT_TRUE(r[0].tokens[t] >= 300 && r[0].tokens[t] <= 302) << "token " << t;
        ASSERT_NE(r[0].tokens[t], r[0].tokens[t - 1]) << "token " << t;
        ASSERT_NE(r[0].tokens[t], r[0].tokens[t - 2]) << "token " << t;
      }
    }
    if (requests[i].sampling.penalties()) {
      // The penalties decide tokens: without them the request goes elsewhere.
      GenerationRequest plain = requests[i];
      plain.sampling.repeat_penalty = 1.0f;
      plain.sampling.frequency_penalty = plain.sampling.presence_penalty = 0.0f;
      EXPECT_NE(engines[2]->generate(plain, nullptr, nullptr).tokens, r[0].tokens);
    }
  }
}

// Scoring a prompt (prompt_logprobs): every prompt token after the first
// gets the log-probability a teacher-forced evaluation gives it, over
// prefill steps of 4 tokens (each step's rows read as it ends); the first
// has none (NaN); nothing of the prompt comes from the prefix cache; with
// max_tokens 0 nothing is generated, and with more the tokens are those of
// the request without scoring.
TEST(EnginePrefill, PromptLogprobsScoreEveryPromptTokenAcrossSteps) {
  EngineConfig c;
  c.model_path = test::stories_path();
  c.backend = BackendChoice::kCpu;
  c.n_ctx = 128;
  c.n_batch = 4;
  auto e = Engine::load(c);
  ASSERT_TRUE(e.has_value()) << e.error().message;
  const std::vector<int32_t> prompt = (*e)->tokenize("Once upon a time there was a little dog who liked to run", true, false);
  ASSERT_GE(prompt.size(), 9u);
  // eval_logits takes one step (at most n_batch tokens): the reference rows
  // for the whole prompt come from a second engine with one big step.
  EngineConfig big = c;
  big.n_batch = 128;
  auto whole = Engine::load(big);
  ASSERT_TRUE(whole.has_value());
  const auto ref = (*whole)->eval_logits(prompt);
  ASSERT_TRUE(ref.has_value()) << ref.error().message;
  const int vocab = (*e)->info().vocab_size;

  GenerationRequest req;
  req.prompt = prompt;
  req.max_tokens = 0;
  req.top_logprobs = 2;
  req.prompt_logprobs = true;
  req.sampling.temperature = 0.0f;
  for (int pass = 0; pass < 2; ++pass) {  // the second: the same prompt again, scored whole again
    const GenerationResult r = (*e)->generate(req, nullptr, nullptr);
    ASSERT_NE(r.finish, FinishReason::kError) << r.error->message;
    EXPECT_EQ(r.finish, FinishReason::kLength);
    EXPECT_EQ(r.n_generated, 0);
    EXPECT_EQ(r.n_cached, 0);
    ASSERT_EQ(r.prompt_logprobs.size(), prompt.size());
    EXPECT_TRUE(std::isnan(r.prompt_logprobs[0].chosen.logprob));
    EXPECT_TRUE(r.prompt_logprobs[0].top.empty());
    EXPECT_EQ(r.prompt_logprobs[0].chosen.token, prompt[0]);
    for (size_t i = 1; i < prompt.size(); ++i) {
      const float* row = ref->data() + (i - 1) * static_cast<size_t>(vocab);
      const double log_z = test::log_sum_exp(row, vocab);
      const double max = *std::max_element(row, row + vocab);
      const TokenLogprobs& lp = r.prompt_logprobs[i];
      EXPECT_EQ(lp.chosen.token, prompt[i]);
      EXPECT_NEAR(lp.chosen.logprob, row[prompt[i]] - log_z, 1e-3) << "prompt token " << i;
      ASSERT_EQ(lp.top.size(), 2u);
      EXPECT_NEAR(lp.top[0].logprob, max - log_z, 1e-3);
    }
  }
  // Scoring takes prefill steps of at most 64 tokens whatever n_batch
  // allows: 100 tokens in two steps on the engine whose n_batch is 128.
  GenerationRequest long_req = req;
  long_req.prompt.clear();
  for (int i = 0; i < 100; ++i) long_req.prompt.push_back(prompt[static_cast<size_t>(i) % prompt.size()]);
  const uint64_t steps_before = (*whole)->health().steps;
  const GenerationResult long_scored = (*whole)->generate(long_req, nullptr, nullptr);
  ASSERT_NE(long_scored.finish, FinishReason::kError) << long_scored.error->message;
  EXPECT_EQ((*whole)->health().steps, steps_before + 2);
  const auto long_ref = (*whole)->eval_logits(long_req.prompt);
  ASSERT_TRUE(long_ref.has_value());
  for (size_t i = 1; i < long_req.prompt.size(); ++i) {
    const float* row = long_ref->data() + (i - 1) * static_cast<size_t>(vocab);
    EXPECT_NEAR(long_scored.prompt_logprobs[i].chosen.logprob, row[long_req.prompt[i]] - test::log_sum_exp(row, vocab), 1e-3)
        << i;
  }

  req.max_tokens = 6;
  const GenerationResult scored = (*e)->generate(req, nullptr, nullptr);
  GenerationRequest plain = req;
  plain.prompt_logprobs = false;
  plain.top_logprobs = -1;
  const GenerationResult unscored = (*e)->generate(plain, nullptr, nullptr);
  EXPECT_EQ(scored.tokens, unscored.tokens);
  EXPECT_EQ(scored.logprobs.size(), 6u);
  plain.max_tokens = 0;
  const GenerationResult refused = (*e)->generate(plain, nullptr, nullptr);
  ASSERT_EQ(refused.finish, FinishReason::kError);
  EXPECT_NE(refused.error->message.find("max_tokens is 0; it must be at least 1"), std::string::npos);
  plain.prompt_logprobs = true;
  const GenerationResult needs_top = (*e)->generate(plain, nullptr, nullptr);
  ASSERT_EQ(needs_top.finish, FinishReason::kError);
  EXPECT_NE(needs_top.error->message.find("prompt_logprobs needs top_logprobs"), std::string::npos);
}

// A scored prompt whose tokens before prompt_logprobs_from are context
// (what minfer perplexity sends: the second half of a chunk scored): those
// entries NaN without top lists, as the first token's, the rest the
// log-probabilities of the whole prompt scored, bit for bit, in as many
// steps (the steps that score their rows put only the scored ones through
// the head, a step of context alone none; the host skips the context rows
// of copied logits), with the op counted once a step that scores; out-of-
// range values and a from without prompt_logprobs are refused with the
// value.
TEST(EngineScoring, ContextBeforeTheScoredTokensIsNotScored) {
  for (const bool in_step : {true, false}) {
    SCOPED_TRACE(in_step ? "scored in the steps" : "scored by the host");
    auto e = stories_engine([&](EngineConfig& c) { c.logprobs_in_step = in_step; });
    ASSERT_TRUE(e);
    e->set_profiling(true);
    const std::vector<int32_t> words = e->tokenize("Once upon a time there was a little dog who liked to run", true, false);
    GenerationRequest req;
    for (int i = 0; i < 80; ++i) req.prompt.push_back(words[static_cast<size_t>(i) % words.size()]);
    req.max_tokens = 4;
    req.ignore_eos = true;
    req.top_logprobs = 2;
    req.prompt_logprobs = true;
    req.sampling.temperature = 0.0f;
    const GenerationResult whole = e->generate(req, nullptr, nullptr);
    ASSERT_NE(whole.finish, FinishReason::kError) << whole.error->message;
    for (const int from : {0, 1, 2, 41, 79, 80}) {
      SCOPED_TRACE(testing::Message() << "from " << from);
      GenerationRequest part = req;
      part.prompt_logprobs_from = from;
      const uint64_t steps_before = e->health().steps;
      const int64_t calls_before = test::op_calls(*e, "logprobs");
      const GenerationResult r = e->generate(part, nullptr, nullptr);
      ASSERT_NE(r.finish, FinishReason::kError) << r.error->message;
      // The prefill: steps of at most 64 tokens (the CPU's score_rows); those
      // with rows to score run the op.
      EXPECT_EQ(e->health().steps - steps_before, static_cast<uint64_t>(2 + r.n_generated - 1));
      if (in_step) {
        const int64_t scoring_steps = std::max(0, from - 1) < 64 ? 2 : 1;
        EXPECT_EQ(test::op_calls(*e, "logprobs") - calls_before, scoring_steps + r.n_generated - 1);
      }
      EXPECT_EQ(r.tokens, whole.tokens);
      ASSERT_EQ(r.prompt_logprobs.size(), req.prompt.size());
      for (size_t i = 0; i < req.prompt.size(); ++i) {
        const TokenLogprobs &lp = r.prompt_logprobs[i], &ref = whole.prompt_logprobs[i];
        EXPECT_EQ(lp.chosen.token, req.prompt[i]) << i;
        if (i == 0 || static_cast<int>(i) < from) {
          EXPECT_TRUE(std::isnan(lp.chosen.logprob)) << i;
          EXPECT_TRUE(lp.top.empty()) << i;
          continue;
        }
        EXPECT_EQ(std::bit_cast<uint32_t>(lp.chosen.logprob), std::bit_cast<uint32_t>(ref.chosen.logprob)) << i;
        ASSERT_EQ(lp.top.size(), 2u) << i;
        for (size_t k = 0; k < 2; ++k) {
          EXPECT_EQ(lp.top[k].token, ref.top[k].token) << i << " " << k;
          EXPECT_EQ(lp.top[k].logprob, ref.top[k].logprob) << i << " " << k;
        }
      }
      ASSERT_EQ(r.logprobs.size(), whole.logprobs.size());
      for (size_t i = 0; i < r.logprobs.size(); ++i) EXPECT_EQ(r.logprobs[i].chosen.logprob, whole.logprobs[i].chosen.logprob);
    }
    GenerationRequest bad = req;
    bad.prompt_logprobs_from = 81;
    GenerationResult refused = e->generate(bad, nullptr, nullptr);
    ASSERT_EQ(refused.finish, FinishReason::kError);
    EXPECT_NE(refused.error->message.find("prompt_logprobs_from is 81; it needs prompt_logprobs and must be in [0, 80]"),
              std::string::npos)
        << refused.error->message;
    bad.prompt_logprobs_from = -1;
    refused = e->generate(bad, nullptr, nullptr);
    ASSERT_EQ(refused.finish, FinishReason::kError);
    EXPECT_NE(refused.error->message.find("prompt_logprobs_from is -1"), std::string::npos) << refused.error->message;
    bad.prompt_logprobs_from = 5;
    bad.prompt_logprobs = false;
    refused = e->generate(bad, nullptr, nullptr);
    ASSERT_EQ(refused.finish, FinishReason::kError);
    EXPECT_NE(refused.error->message.find("prompt_logprobs_from is 5; it needs prompt_logprobs"), std::string::npos)
        << refused.error->message;
  }
}

// A scored prompt whose prefill steps score their rows (the default:
// EngineConfig::logprobs_in_step, Logits::kScore) against one whose rows'
// logits come back to the host: bit for bit the same prompt and generated
// log-probabilities, top lists and tokens — 150 tokens in three steps —
// with the op counted once a scoring step and once a decode step, and never
// on the host's engine.
TEST(EngineScoring, ScoredStepsAreTheHostsBitForBit) {
  auto engine = [](bool in_step) {
    return stories_engine([&](EngineConfig& c) { c.logprobs_in_step = in_step; });
  };
  auto steps = engine(true), host = engine(false);
  ASSERT_TRUE(steps && host);
  const std::vector<int32_t> words = steps->tokenize("Once upon a time there was a little dog who liked to run", true, false);
  GenerationRequest req;
  for (int i = 0; i < 150; ++i) req.prompt.push_back(words[static_cast<size_t>(i) % words.size()]);
  req.max_tokens = 5;
  req.ignore_eos = true;
  req.top_logprobs = 3;
  req.prompt_logprobs = true;
  req.sampling.temperature = 0.0f;
  steps->set_profiling(true);
  host->set_profiling(true);
  const GenerationResult a = steps->generate(req, nullptr, nullptr), b = host->generate(req, nullptr, nullptr);
  ASSERT_NE(a.finish, FinishReason::kError) << a.error->message;
  ASSERT_NE(b.finish, FinishReason::kError) << b.error->message;
  EXPECT_EQ(test::op_calls(*steps, "logprobs"), 3 + a.n_generated - 1);
  EXPECT_EQ(test::op_calls(*host, "logprobs"), 0);
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.prompt_logprobs.size(), req.prompt.size());
  ASSERT_EQ(b.prompt_logprobs.size(), req.prompt.size());
  auto same = [](const TokenLogprobs& x, const TokenLogprobs& y, size_t i) {
    EXPECT_EQ(x.chosen.token, y.chosen.token) << i;
    EXPECT_EQ(std::bit_cast<uint32_t>(x.chosen.logprob), std::bit_cast<uint32_t>(y.chosen.logprob)) << i;
    EXPECT_EQ(x.chosen.bytes, y.chosen.bytes) << i;
    ASSERT_EQ(x.top.size(), y.top.size()) << i;
    for (size_t k = 0; k < x.top.size(); ++k) {
      EXPECT_EQ(x.top[k].token, y.top[k].token) << i << " " << k;
      EXPECT_EQ(x.top[k].logprob, y.top[k].logprob) << i << " " << k;
    }
  };
  for (size_t i = 0; i < req.prompt.size(); ++i) {
    same(a.prompt_logprobs[i], b.prompt_logprobs[i], i);
    EXPECT_EQ(a.prompt_logprobs[i].top.size(), i == 0 ? 0u : 3u) << i;
  }
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
  for (size_t i = 0; i < a.logprobs.size(); ++i) same(a.logprobs[i], b.logprobs[i], i);

  // Short prompts: one token (nothing to score), two, 65 (a step of 64 and
  // one of a single row).
  for (const int n : {1, 2, 65}) {
    GenerationRequest short_req = req;
    short_req.prompt.resize(static_cast<size_t>(n));
    const GenerationResult x = steps->generate(short_req, nullptr, nullptr);
    const GenerationResult y = host->generate(short_req, nullptr, nullptr);
    ASSERT_NE(x.finish, FinishReason::kError) << x.error->message;
    ASSERT_NE(y.finish, FinishReason::kError) << y.error->message;
    EXPECT_EQ(x.tokens, y.tokens) << n;
    ASSERT_EQ(x.prompt_logprobs.size(), static_cast<size_t>(n));
    ASSERT_EQ(y.prompt_logprobs.size(), static_cast<size_t>(n));
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) same(x.prompt_logprobs[i], y.prompt_logprobs[i], i);
  }

  // Steps of 100 (MINFER_SCORE_ROWS): two scoring steps, the same bits;
  // no rows is refused at load.
  auto wide = stories_engine([](EngineConfig& c) { c.score_rows = 100; });
  ASSERT_TRUE(wide);
  wide->set_profiling(true);
  const GenerationResult w = wide->generate(req, nullptr, nullptr);
  ASSERT_NE(w.finish, FinishReason::kError) << w.error->message;
  EXPECT_EQ(test::op_calls(*wide, "logprobs"), 2 + w.n_generated - 1);
  ASSERT_EQ(w.prompt_logprobs.size(), req.prompt.size());
  for (size_t i = 0; i < req.prompt.size(); ++i) same(w.prompt_logprobs[i], b.prompt_logprobs[i], i);
  EngineConfig none;
  none.model_path = test::stories_path();
  none.backend = BackendChoice::kCpu;
  none.score_rows = 0;
  const auto refused = Engine::load(none);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("score_rows 0 (MINFER_SCORE_ROWS) must be > 0"), std::string::npos)
      << refused.error().message;
}

TEST(EnginePrefill, DeadlineStopsBetweenChunksAndKeepsWhatWasDone) {
  EngineConfig c;
  c.model_path = test::stories_path();
  c.backend = BackendChoice::kCpu;
  c.n_ctx = 128;
  c.n_batch = 4;  // a 20-token prompt takes 5 forward steps
  auto e = Engine::load(c);
  ASSERT_TRUE(e.has_value()) << e.error().message;
  std::vector<int32_t> prompt((*e)->tokenize("Once upon a time there was a little dog who liked to run", true, false));
  ASSERT_GE(prompt.size(), 9u);
  GenerationRequest req;
  req.prompt = prompt;
  req.max_tokens = 8;
  req.sampling.temperature = 0.0f;
  req.deadline = std::chrono::steady_clock::now();  // already past: stop after the first chunk
  const uint64_t steps_before = (*e)->health().steps;
  GenerationResult r = (*e)->generate(req, nullptr, nullptr);
  EXPECT_EQ(r.finish, FinishReason::kDeadline);
  EXPECT_EQ(r.n_generated, 0);
  EXPECT_EQ((*e)->health().steps, steps_before + 1);  // the heartbeat advanced for the chunk
  req.deadline.reset();
  r = (*e)->generate(req, nullptr, nullptr);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(r.n_cached, 4);  // the chunk done before the deadline was kept
}

TYPED_TEST(Stories, BadRequestsAreErrorsAndTheEngineKeepsWorking) {
  GenerationResult r = this->engine_->generate(greedy({1, 9999}, 4), nullptr, nullptr);
  ASSERT_EQ(r.finish, FinishReason::kError);
  EXPECT_EQ(r.error->code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error->message.find("9999"), std::string::npos) << r.error->message;
  r = this->engine_->generate(greedy(std::vector<int32_t>(300, 1), 4), nullptr, nullptr);
  ASSERT_EQ(r.finish, FinishReason::kError);
  EXPECT_NE(r.error->message.find("300"), std::string::npos) << r.error->message;
  GenerationRequest bad = greedy({1}, 4);
  bad.sampling.top_p = 1.5f;
  r = this->engine_->generate(bad, nullptr, nullptr);
  ASSERT_EQ(r.finish, FinishReason::kError);
  EXPECT_NE(r.error->message.find("top_p"), std::string::npos);
  const std::vector<int32_t> ref = reference_ids();
  r = this->engine_->generate(greedy({1}, 10), nullptr, nullptr);
  EXPECT_EQ(r.tokens, std::vector<int32_t>(ref.begin() + 1, ref.begin() + 11));
}

// The prefix cache keeps several earlier requests' histories: requests run
// in turn on an engine with the cache, with it keeping only the previous
// request's, and without it give the same tokens; each reuses the longest
// prefix a kept history holds; a request short of cells takes them from the
// oldest histories, their last cells first. Greedy, ignoring end-of-text, so that every request
// generates all its tokens (its history: the prompt and all but the last).
struct CachedRun {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<int> cached;
};

CachedRun run_in_turn(Engine& e, const std::vector<GenerationRequest>& requests) {
  CachedRun run;
  for (const GenerationRequest& req : requests) {
    const GenerationResult r = e.generate(req, nullptr, nullptr);
    EXPECT_NE(r.finish, FinishReason::kError) << r.error->message;
    run.tokens.push_back(r.tokens);
    run.cached.push_back(r.n_cached);
  }
  return run;
}

GenerationRequest story(const std::vector<int32_t>& prompt, int n) {
  GenerationRequest r = greedy(prompt, n);
  r.ignore_eos = true;
  return r;
}

std::vector<int32_t> joined(std::vector<int32_t> a, const std::vector<int32_t>& b, const std::vector<int32_t>& c = {}) {
  a.insert(a.end(), b.begin(), b.end());
  a.insert(a.end(), c.begin(), c.end());
  return a;
}

TEST(EnginePrefixCache, AlternatingConversationsReuseTheirOwnHistories) {
  auto engine = [](bool cache, int entries) {
    return stories_engine([&](EngineConfig& c) {
      c.prefix_cache = cache;
      c.prefix_cache_entries = entries;
    });
  };
  std::unique_ptr<Engine> plain = engine(false, 16), last = engine(true, 1), kept = engine(true, 16);
  ASSERT_TRUE(plain && last && kept);
  const std::vector<int32_t> a = kept->tokenize("Once upon a time there was a dog", true, false);
  const std::vector<int32_t> b = kept->tokenize("The little girl went to the park with her mom", true, false);
  const std::vector<int32_t> more = kept->tokenize(" Then they", false, false);
  ASSERT_EQ(a[0], b[0]);  // BOS: the one token the conversations share
  ASSERT_NE(a[1], b[1]);
  // Turn 1 of each, then turn 2 of each: the conversation so far and more.
  std::vector<GenerationRequest> turns = {story(a, 12), story(b, 12)};
  const CachedRun first = run_in_turn(*plain, turns);
  turns.push_back(story(joined(a, first.tokens[0], more), 10));
  turns.push_back(story(joined(b, first.tokens[1], more), 10));
  turns.push_back(story(a, 6));  // turn 1 of a again

  const CachedRun ref = run_in_turn(*plain, turns);
  const CachedRun one = run_in_turn(*last, turns);
  const CachedRun many = run_in_turn(*kept, turns);
  EXPECT_EQ(one.tokens, ref.tokens);
  EXPECT_EQ(many.tokens, ref.tokens);
  EXPECT_EQ(ref.cached, (std::vector<int>{0, 0, 0, 0, 0}));
  const int a1 = static_cast<int>(a.size()) + 11, b1 = static_cast<int>(b.size()) + 11;  // turn 1's histories
  // Only the previous request's: each turn follows the other conversation's.
  EXPECT_EQ(one.cached, (std::vector<int>{0, 1, 1, 1, 1}));
  // Each conversation's own history; turn 1 of a again: its prompt, whose
  // last token is evaluated again.
  EXPECT_EQ(many.cached, (std::vector<int>{0, 1, a1, b1, static_cast<int>(a.size()) - 1}));
}

TEST(EnginePrefixCache, ASharedStartIsReusedByEveryRequestThatHasIt) {
  std::unique_ptr<Engine> plain = stories_engine([](EngineConfig& c) { c.prefix_cache = false; });
  std::unique_ptr<Engine> kept = stories_engine([](EngineConfig&) {});
  ASSERT_TRUE(plain && kept);
  const std::vector<int32_t> system = kept->tokenize("Tell a story about a cat who likes to play.", true, false);
  std::vector<GenerationRequest> requests;
  for (const char* q : {"The cat", "One day", "The cat", "A big"}) {
    requests.push_back(story(joined(system, kept->tokenize(q, false, false)), 8));
  }
  const CachedRun ref = run_in_turn(*plain, requests);
  const CachedRun run = run_in_turn(*kept, requests);
  EXPECT_EQ(run.tokens, ref.tokens);
  const int n = static_cast<int>(system.size());
  const int q1 = static_cast<int>(requests[0].prompt.size());
  // "The cat" and "One day" share no token after the start; the third is
  // the first again, still kept beside the second.
  ASSERT_NE(requests[0].prompt[static_cast<size_t>(n)], requests[1].prompt[static_cast<size_t>(n)]);
  EXPECT_EQ(run.cached, (std::vector<int>{0, n, q1 - 1, n}));
}

TEST(EnginePrefixCache, ARequestShortOfCellsTakesTheOldestHistoriesCells) {
  // 64 cells: two 36-cell histories do not fit beside each other.
  auto engine = [](bool cache) {
    return stories_engine([&](EngineConfig& c) {
      c.n_ctx = 64;
      c.prefix_cache = cache;
    });
  };
  std::unique_ptr<Engine> plain = engine(false), kept = engine(true);
  ASSERT_TRUE(plain && kept);
  std::vector<int32_t> a = kept->tokenize("Once upon a time there was a little dog named Max who", true, false);
  std::vector<int32_t> b = kept->tokenize("The sun was hot and the birds sang in the tall green", true, false);
  const std::vector<int32_t> c = kept->tokenize("Lily had a red ball", true, false);
  ASSERT_GE(a.size(), 12u);
  ASSERT_GE(b.size(), 12u);
  a.resize(12);
  b.resize(12);
  const std::vector<GenerationRequest> requests = {
      story(a, 25), story(c, 12),  // 36 cells, then c.size() + 10 beside them (BOS shared): 10 free
      story(b, 25),                // 35 more: a's history (the oldest) gives up its last 17 + c.size()
      story(c, 4),                 // from c's history; its last 4 cells from a's history again
      story(a, 4),                 // from what a's history kept; b's (now the oldest) gives up 4
      story(b, 64 - static_cast<int>(b.size())),  // the whole context: every other cell
      story(b, 4)};
  const CachedRun ref = run_in_turn(*plain, requests);
  const CachedRun run = run_in_turn(*kept, requests);
  EXPECT_EQ(run.tokens, ref.tokens);
  const int bos = 1;  // every prompt starts with BOS
  const int c_last = static_cast<int>(c.size()) - 1, b_last = static_cast<int>(b.size()) - 1;
  const int a_kept = 36 - (17 + static_cast<int>(c.size())) - 4;
  ASSERT_GT(a_kept, 1);
  EXPECT_EQ(run.cached, (std::vector<int>{0, bos, bos, c_last, a_kept, b_last, b_last}));
}

TEST(EnginePrefixCache, MoreCellsThanTheContextKeepMoreHistories) {
  auto engine = [](bool cache, int kv_cells) {
    return stories_engine([&](EngineConfig& c) {
      c.n_ctx = 64;
      c.kv_cells = kv_cells;
      c.prefix_cache = cache;
    });
  };
  std::unique_ptr<Engine> plain = engine(false, 0), roomy = engine(true, 160);
  ASSERT_TRUE(plain && roomy);
  EXPECT_EQ(roomy->info().n_ctx, 64);
  EXPECT_EQ(roomy->info().kv_cells, 160);
  EXPECT_EQ(plain->info().kv_cells, 64);
  std::vector<int32_t> a = roomy->tokenize("Once upon a time there was a little dog named Max who", true, false);
  std::vector<int32_t> b = roomy->tokenize("The sun was hot and the birds sang in the tall green", true, false);
  const std::vector<int32_t> c = roomy->tokenize("Lily had a red ball", true, false);
  a.resize(12);
  b.resize(12);
  const std::vector<GenerationRequest> requests = {
      story(a, 25), story(c, 12), story(b, 25), story(c, 4), story(a, 4),
      story(b, 64 - static_cast<int>(b.size())),  // 63 cells beside the others' 52 (and one shared)
      story(a, 4), story(c, 4), story(b, 4)};
  const CachedRun ref = run_in_turn(*plain, requests);
  const CachedRun run = run_in_turn(*roomy, requests);
  EXPECT_EQ(run.tokens, ref.tokens);
  const int bos = 1, a_last = 11, b_last = 11, c_last = static_cast<int>(c.size()) - 1;
  EXPECT_EQ(run.cached, (std::vector<int>{0, bos, bos, c_last, a_last, b_last, a_last, c_last, b_last}));
  EXPECT_EQ(roomy->health().prefix_histories, 3);
  EXPECT_EQ(roomy->health().kv_cells, 160);
  EXPECT_EQ(roomy->health().kv_cells_kept, 1 + 35 + (static_cast<int>(c.size()) + 10) + 62);
  // The context still bounds a request: asked for more, it ends where the
  // context is full (as the plain engine's), with cells to spare.
  const GenerationResult r = roomy->generate(story(a, 100), nullptr, nullptr);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(r.tokens, plain->generate(story(a, 100), nullptr, nullptr).tokens);
  EXPECT_EQ(r.n_generated, 64 - 12);  // the prompt and the tokens fill the context
  // Fewer cells than the context, or too many: refused at load, with the values.
  for (int cells : {63, kMaxKvCells + 1}) {
    EngineConfig cfg;
    cfg.model_path = test::stories_path();
    cfg.backend = BackendChoice::kCpu;
    cfg.n_ctx = 64;
    cfg.kv_cells = cells;
    auto e = Engine::load(cfg);
    ASSERT_FALSE(e.has_value()) << cells;
    EXPECT_EQ(e.error().message, fmt::format("kv_cells {} must be 0 (the context) or from the context, 64 tokens, to {}",
                                             cells, kMaxKvCells));
  }
}

TEST(EnginePrefixCache, EntriesOutOfRangeAreALoadError) {
  for (int entries : {0, -1, kMaxPrefixCacheEntries + 1}) {
    EngineConfig c;
    c.model_path = test::stories_path();
    c.backend = BackendChoice::kCpu;
    c.prefix_cache_entries = entries;
    auto e = Engine::load(c);
    ASSERT_FALSE(e.has_value()) << entries;
    EXPECT_EQ(e.error().message,
              fmt::format("prefix_cache_entries {} must be in [1, {}]", entries, kMaxPrefixCacheEntries));
  }
}

TEST(EngineLoad, MissingFileAndBadOptionsAreClearErrors) {
  EngineConfig c;
  c.model_path = "/nonexistent/model.gguf";
  auto e = Engine::load(c);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message.find("/nonexistent/model.gguf"), std::string::npos) << e.error().message;
  c.model_path = test::stories_path();
  c.kv_type = "q4_0";
  e = Engine::load(c);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message.find("q4_0"), std::string::npos) << e.error().message;
  c.kv_type = "f16";
  c.chat_template_file = "/nonexistent/template.jinja";
  e = Engine::load(c);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message.find("chat template file: cannot read /nonexistent/template.jinja"), std::string::npos)
      << e.error().message;
}

// A chat template file stands in for the model's: the story model has none
// (a ChatML fallback); with Qwen2.5's it renders Qwen2.5's prompts, tools too.
TEST(EngineLoad, AChatTemplateFileStandsInForTheModels) {
  EngineConfig c;
  c.model_path = test::stories_path();
  c.warmup = false;
  auto plain = Engine::load(c);
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_EQ((*plain)->info().chat_template, "chatml (fallback)");
  EXPECT_EQ((*plain)->chat_template().tool_style(), ToolStyle::kNone);

  c.chat_template_file = test::data_path("chat-templates/qwen2.5-instruct.jinja");
  auto qwen = Engine::load(c);
  ASSERT_TRUE(qwen) << qwen.error().message;
  EXPECT_EQ((*qwen)->info().chat_template, "chatml");
  EXPECT_EQ((*qwen)->chat_template().tool_style(), ToolStyle::kQwen25);
  auto text = (*qwen)->apply_chat_template({{"user", "Hi"}}, true);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text,
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  auto tools = (*qwen)->apply_chat_template({{"user", "Hi"}}, true, {R"({"type": "function", "function": {"name": "f"}})"});
  ASSERT_TRUE(tools) << tools.error().message;
  EXPECT_NE(tools->find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"f\"}}\n</tools>"), std::string::npos)
      << *tools;
}

}  // namespace
}  // namespace minfer
