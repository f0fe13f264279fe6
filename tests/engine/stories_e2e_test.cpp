// End to end on the shipped model (stories260K, trained, all F32): greedy
// decoding must reproduce the reference ids token for token. The reference
// (tests/data/models/reference-greedy.json) was computed by an independent
// float64 Python forward pass from BOS; a greedy run from a prefix of that
// sequence must continue it exactly.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/api.h"
#include "tests/engine/test_models.h"

namespace minfer {
namespace {

std::vector<int32_t> reference_ids() {
  std::ifstream in(test::data_path("models/reference-greedy.json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  return j.at("stories260K.gguf").at("greedy_ids_including_bos").get<std::vector<int32_t>>();
}

class Stories : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineConfig c;
    c.model_path = test::stories_path();
    c.backend = BackendChoice::kCpu;
    c.n_ctx = 256;
    auto e = Engine::load(c);
    ASSERT_TRUE(e.has_value()) << e.error().message;
    engine_ = std::move(*e).release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  static GenerationRequest greedy(std::vector<int32_t> prompt, int n) {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = n;
    r.sampling.temperature = 0.0f;
    return r;
  }
  static Engine* engine_;
};
Engine* Stories::engine_ = nullptr;

TEST_F(Stories, ModelInfo) {
  const ModelInfo& i = engine_->info();
  EXPECT_EQ(i.arch, "llama");
  EXPECT_EQ(i.n_layers, 5);
  EXPECT_EQ(i.d_model, 64);
  EXPECT_EQ(i.n_heads, 8);
  EXPECT_EQ(i.n_kv_heads, 4);
  EXPECT_EQ(i.vocab_size, 512);
  EXPECT_EQ(i.backend, "cpu");
}

TEST_F(Stories, TokenizesThePrompt) {
  EXPECT_EQ(engine_->tokenize("Once upon a time", true, false), (std::vector<int32_t>{1, 403, 407, 261, 378}));
}

TEST_F(Stories, GreedyFromBosMatchesReference80Tokens) {
  const std::vector<int32_t> ref = reference_ids();
  ASSERT_EQ(ref.size(), 81u);
  GenerationResult r = engine_->generate(greedy({1}, 80), nullptr, nullptr);
  ASSERT_NE(r.finish, FinishReason::kError) << r.error->message;
  EXPECT_EQ(r.tokens, std::vector<int32_t>(ref.begin() + 1, ref.end()));
}

TEST_F(Stories, OnceUponATimeContinuesTheReference48Tokens) {
  const std::vector<int32_t> ref = reference_ids();
  const std::vector<int32_t> prompt = engine_->tokenize("Once upon a time", true, false);
  ASSERT_EQ(prompt, std::vector<int32_t>(ref.begin(), ref.begin() + 5));
  GenerationResult r = engine_->generate(greedy(prompt, 48), nullptr, nullptr);
  ASSERT_NE(r.finish, FinishReason::kError) << r.error->message;
  EXPECT_EQ(r.tokens, std::vector<int32_t>(ref.begin() + 5, ref.begin() + 53));
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(r.n_generated, 48);
  // The reference text (README of the data): "… Once upon a time, there was a little girl named Lily. …"
  EXPECT_EQ(r.text.rfind(", there was a little girl named Lily. She loved to play outside in the park.", 0), 0u) << r.text;
}

TEST_F(Stories, StreamedPiecesJoinToTheText) {
  std::string streamed;
  int token_events = 0;
  GenerationRequest req = greedy({1}, 40);
  req.stop = {"zzz"};  // never completes; a trailing "z" would be held back and flushed as a tail
  GenerationResult r = engine_->generate(req, [&](const TokenEvent& e) {
    streamed += e.text;
    token_events += e.tail ? 0 : 1;
    return true;
  }, nullptr);
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(token_events, r.n_generated);  // one event per token, plus at most one tail
  EXPECT_EQ(*engine_->detokenize(r.tokens), r.text);
}

TEST_F(Stories, SameSeedSameOutputOtherSeedOtherOutput) {
  GenerationRequest req = greedy({1, 403, 407}, 40);
  req.sampling.temperature = 1.0f;
  req.sampling.top_k = 0;
  req.sampling.top_p = 1.0f;
  req.sampling.min_p = 0.0f;
  req.sampling.seed = 42;
  const GenerationResult a = engine_->generate(req, nullptr, nullptr);
  const GenerationResult b = engine_->generate(req, nullptr, nullptr);
  EXPECT_EQ(a.tokens, b.tokens);
  req.sampling.seed = 43;
  const GenerationResult c = engine_->generate(req, nullptr, nullptr);
  EXPECT_NE(a.tokens, c.tokens);
}

TEST_F(Stories, CallbackCancelStopsWithinOneStep) {
  int calls = 0;
  GenerationResult r = engine_->generate(greedy({1}, 40), [&](const TokenEvent&) { return ++calls < 3; }, nullptr);
  EXPECT_EQ(r.finish, FinishReason::kCancelled);
  EXPECT_EQ(r.n_generated, 3);
  EXPECT_EQ(calls, 3);
}

TEST_F(Stories, CancelFlagStopsWithinOneStep) {
  std::atomic<bool> cancel{false};
  int calls = 0;
  GenerationResult r = engine_->generate(greedy({1}, 40), [&](const TokenEvent&) {
    if (++calls == 5) cancel = true;
    return true;
  }, &cancel);
  EXPECT_EQ(r.finish, FinishReason::kCancelled);
  EXPECT_EQ(r.n_generated, 5);
}

TEST_F(Stories, StopStringEndsTheTextBeforeIt) {
  GenerationResult r = engine_->generate(greedy({1}, 80), nullptr, nullptr);
  GenerationRequest req = greedy({1}, 80);
  req.stop = {"girl"};
  GenerationResult s = engine_->generate(req, nullptr, nullptr);
  EXPECT_EQ(s.finish, FinishReason::kStop);
  EXPECT_EQ(s.text, r.text.substr(0, r.text.find("girl")));
}

TEST_F(Stories, PrefixCacheReusesTheCommonPrefixAndChangesNothing) {
  const std::vector<int32_t> prompt = engine_->tokenize("Once upon a time there was a dog", true, false);
  const GenerationResult a = engine_->generate(greedy(prompt, 20), nullptr, nullptr);
  const GenerationResult b = engine_->generate(greedy(prompt, 20), nullptr, nullptr);
  EXPECT_EQ(b.n_cached, static_cast<int>(prompt.size()) - 1);
  EXPECT_EQ(a.tokens, b.tokens);
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

TEST_F(Stories, BadRequestsAreErrorsAndTheEngineKeepsWorking) {
  GenerationResult r = engine_->generate(greedy({1, 9999}, 4), nullptr, nullptr);
  ASSERT_EQ(r.finish, FinishReason::kError);
  EXPECT_EQ(r.error->code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error->message.find("9999"), std::string::npos) << r.error->message;
  r = engine_->generate(greedy(std::vector<int32_t>(300, 1), 4), nullptr, nullptr);
  ASSERT_EQ(r.finish, FinishReason::kError);
  EXPECT_NE(r.error->message.find("300"), std::string::npos) << r.error->message;
  GenerationRequest bad = greedy({1}, 4);
  bad.sampling.top_p = 1.5f;
  r = engine_->generate(bad, nullptr, nullptr);
  ASSERT_EQ(r.finish, FinishReason::kError);
  EXPECT_NE(r.error->message.find("top_p"), std::string::npos);
  const std::vector<int32_t> ref = reference_ids();
  r = engine_->generate(greedy({1}, 10), nullptr, nullptr);
  EXPECT_EQ(r.tokens, std::vector<int32_t>(ref.begin() + 1, ref.begin() + 11));
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
}

}  // namespace
}  // namespace minfer
