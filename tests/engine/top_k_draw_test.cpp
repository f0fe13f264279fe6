// The top-k draw (engine/sampling/top_k_draw.h, kernels/draw.h): our exp
// against the C library's, the pick worked out by hand, and a step's draw
// (Op::kSample's reference) giving the host sampler's tokens from the same
// logits and seed. The CUDA kernel is checked against draw_in_step() in
// tests/gpu/sample_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <span>

#include "engine/sampling/sampler.h"
#include "engine/sampling/top_k_draw.h"

namespace minfer {
namespace {

TEST(DrawArithmetic, ExpFollowsTheLibrarysWithinTwoUlps) {
  EXPECT_EQ(kernels::draw::exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(kernels::draw::exp_nonpositive(-0.0f), 1.0f);
  EXPECT_EQ(kernels::draw::exp_nonpositive(-80.5f), 0.0f);
  EXPECT_EQ(kernels::draw::exp_nonpositive(-INFINITY), 0.0f);
  EXPECT_EQ(kernels::draw::exp_nonpositive(NAN), 0.0f);
  double worst = 0.0;
  for (int i = 0; i <= 800000; ++i) {
    const float x = -80.0f * static_cast<float>(i) / 800000.0f;
    const double want = std::exp(static_cast<double>(x));
    const double rel = std::fabs(kernels::draw::exp_nonpositive(x) - want) / want;
    worst = std::max(worst, rel);
  }
  EXPECT_LT(worst, 2.0 * 0x1.0p-23) << "largest relative error " << worst;
}

// Candidates with weights 1, 1/2, 1/4, 1/8 (mass 15/8): top-p 0.7 needs
// 1.3125, reached by the second (1.5); min-p 0.3 keeps the first two of the
// four (1/4 < 0.3); u walks the tempered weights.
TEST(DrawArithmetic, SelectWorkedByHand) {
  const float e[4] = {1.0f, 0.5f, 0.25f, 0.125f};
  EXPECT_EQ(kernels::draw::select(e, e, 4, 1.0f, 0.0f, 0.0f), 0);
  EXPECT_EQ(kernels::draw::select(e, e, 4, 1.0f, 0.0f, 0.99f), 3);          // 0.99 · 1.875 > 1.75
  EXPECT_EQ(kernels::draw::select(e, e, 4, 1.0f, 0.0f, 0.9f), 2);           // 1.6875 in [1.5, 1.75)
  EXPECT_EQ(kernels::draw::select(e, e, 4, 0.7f, 0.0f, 0.99f), 1);          // top-p kept two
  EXPECT_EQ(kernels::draw::select(e, e, 4, 0.5f, 0.0f, 0.99f), 0);          // 1 ≥ 0.9375
  EXPECT_EQ(kernels::draw::select(e, e, 4, 1.0f, 0.3f, 0.99f), 1);          // min-p kept two
  EXPECT_EQ(kernels::draw::select(e, e, 4, 1.0f, 0.3f, 0.6f), 0);           // 0.9 < 1
  float te[4], tt[4];
  for (int i = 0; i < 4; ++i) kernels::draw::terms(-static_cast<float>(i), 0.0f, 0.5f, &te[i], &tt[i]);
  EXPECT_NEAR(te[1], std::exp(-1.0), 1e-7);
  EXPECT_NEAR(tt[1], std::exp(-0.5), 1e-7);  // temperature 2
}

SamplingParams top_k_params(int k, float temperature, float top_p, float min_p, uint64_t seed) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

// Logits with many ties (quarter steps) so that the order's tie rule counts.
std::vector<float> tied_logits(int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> l(static_cast<size_t>(vocab));
  for (float& v : l) v = static_cast<float>(static_cast<int>(rng() % 64) - 40) * 0.25f;
  return l;
}

// The host sampler and a step's draw, from one seed over the same logits, a
// token at a time: the same tokens — with bias (a token named twice, a ban
// of the top token), penalties (windows of 1 to 64 tokens, boosting and
// negative ones, a biased token in the window), every filter, k from 1 to
// the most a step takes. Each draw is appended to a history that starts
// with a 70-token prompt; the window's tokens are pushed up among the best
// logits, so that the penalties decide draws.
TEST(TopKDraw, StepDrawsGiveTheSamplersTokens) {
  const int vocab = 3000;
  std::vector<SamplingParams> cases = {
      top_k_params(40, 0.8f, 0.95f, 0.05f, 1), top_k_params(1, 1.0f, 1.0f, 0.0f, 2),
      top_k_params(128, 1.3f, 1.0f, 0.0f, 3),  top_k_params(64, 0.3f, 0.5f, 0.0f, 4),
      top_k_params(7, 2.0f, 1.0f, 0.2f, 5),    top_k_params(100, 0.01f, 0.9f, 0.01f, 6),
  };
  SamplingParams biased = top_k_params(40, 1.0f, 0.9f, 0.0f, 8);
  biased.logit_bias = {{17, 3.0f}, {17, 2.25f}, {2999, 9.5f}, {5, -INFINITY}, {0, -1.0f}};
  cases.push_back(biased);
  const size_t first_penalized = cases.size();
  SamplingParams repeat = top_k_params(40, 0.8f, 0.95f, 0.05f, 9);
  repeat.repeat_penalty = 1.3f;  // the default window, 64
  cases.push_back(repeat);
  SamplingParams counted = top_k_params(20, 1.0f, 1.0f, 0.0f, 10);
  counted.frequency_penalty = 0.5f;
  counted.presence_penalty = 0.3f;
  counted.penalty_last_n = 16;
  cases.push_back(counted);
  SamplingParams boost = top_k_params(64, 1.2f, 0.9f, 0.0f, 11);
  boost.repeat_penalty = 0.7f;
  boost.frequency_penalty = -0.5f;
  boost.presence_penalty = -1.0f;
  boost.penalty_last_n = 1;  // the step's own token alone
  cases.push_back(boost);
  SamplingParams both = top_k_params(40, 0.9f, 0.95f, 0.0f, 12);
  both.repeat_penalty = 1.1f;
  both.frequency_penalty = 0.2f;
  both.penalty_last_n = 2;
  both.logit_bias = {{40, 1.5f}, {41, -INFINITY}};
  cases.push_back(both);
  int different = 0, penalties_decided = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(testing::Message() << "case " << c << " top_k " << cases[c].top_k);
    ASSERT_TRUE(cases[c].drawn_in_step(vocab));
    Sampler host(cases[c], vocab), step(cases[c], vocab);
    std::mt19937_64 rng(c);
    std::vector<int32_t> history;
    for (int i = 0; i < 70; ++i) history.push_back(static_cast<int32_t>(rng() % 48));  // repeats, ids 40 and 41
    Candidates scratch;
    std::vector<float> terms;
    int32_t previous = -1;
    for (int i = 0; i < 200; ++i) {
      std::vector<float> a = tied_logits(vocab, 100 * c + i);
      for (size_t h = history.size() - 8; h < history.size(); ++h) a[static_cast<size_t>(history[h])] = 6.0f;
      std::vector<float> b = a, unpenalized = a;
      const int32_t want = host.sample(a.data(), history);
      // The tokens before the step's own: some as `then`, as the engine
      // gives a step queued before the host has seen its token's predecessor.
      const std::span<const int32_t> all(history);
      const size_t then = static_cast<size_t>(i % 3);
      const kernels::DrawArgs args = step.step_draw(all.first(all.size() - 1 - then), all.subspan(all.size() - 1 - then, then));
      ASSERT_EQ(draw_in_step(b.data(), vocab, args, history.back(), &scratch, &terms), want) << "token " << i;
      if (c >= first_penalized) {
        kernels::DrawArgs off = args;
        off.repeat_penalty = 1.0f;
        off.frequency_penalty = off.presence_penalty = 0.0f;
        penalties_decided += draw_in_step(unpenalized.data(), vocab, off, history.back(), &scratch, &terms) != want;
      }
      if (c + 1 == first_penalized) {
        ASSERT_NE(want, 5);  // banned
      }
      different += want != previous;
      previous = want;
      history.push_back(want);
    }
  }
  EXPECT_GT(different, 1000) << "the draws hardly vary: the test would not see a wrong one";
  EXPECT_GT(penalties_decided, 100) << "the penalties hardly change a draw: the test would not see a wrong one";
}

// The window a step's draw carries: the last penalty_last_n - 1 tokens
// before the step's own, from `before` then `then`, newest last.
TEST(TopKDraw, TheWindowEndsWithTheTokensBeforeTheStepsOwn) {
  SamplingParams p = top_k_params(40, 1.0f, 1.0f, 0.0f, 1);
  p.presence_penalty = 0.5f;
  p.penalty_last_n = 4;
  const std::vector<int32_t> before = {9, 8, 7, 6, 5}, then = {4};
  kernels::DrawArgs a = Sampler(p, 100).step_draw(before, then);
  EXPECT_EQ(a.penalize_step_token, 1);
  ASSERT_EQ(a.n_recent, 3);
  EXPECT_EQ(std::vector<int32_t>(a.recent, a.recent + 3), (std::vector<int32_t>{6, 5, 4}));
  a = Sampler(p, 100).step_draw({}, {});
  EXPECT_EQ(a.n_recent, 0);
  EXPECT_EQ(a.penalize_step_token, 1);
  p.penalty_last_n = 64;
  std::vector<int32_t> long_history(100);
  for (int i = 0; i < 100; ++i) long_history[static_cast<size_t>(i)] = i;
  a = Sampler(p, 100).step_draw(long_history, {});
  ASSERT_EQ(a.n_recent, 63);
  EXPECT_EQ(a.recent[0], 37);
  EXPECT_EQ(a.recent[62], 99);
  p.presence_penalty = 0.0f;  // no penalty: no window
  a = Sampler(p, 100).step_draw(long_history, {});
  EXPECT_EQ(a.n_recent, 0);
  EXPECT_EQ(a.penalize_step_token, 0);
}

TEST(TopKDraw, WhatAStepCannotDrawStaysWithTheHost) {
  EXPECT_FALSE(top_k_params(40, 0.0f, 1.0f, 0.0f, 1).drawn_in_step(1000));     // greedy
  EXPECT_FALSE(top_k_params(0, 1.0f, 0.9f, 0.0f, 1).drawn_in_step(1000));      // no top-k
  EXPECT_FALSE(top_k_params(129, 1.0f, 1.0f, 0.0f, 1).drawn_in_step(1000));    // past kDrawMaxTopK
  EXPECT_FALSE(top_k_params(40, 1.0f, 1.0f, 0.0f, 1).drawn_in_step(40));       // k not below the vocabulary
  SamplingParams p = top_k_params(40, 1.0f, 1.0f, 0.0f, 1);
  p.repeat_penalty = 1.1f;
  EXPECT_TRUE(p.drawn_in_step(1000));                         // the default window, 64
  p.penalty_last_n = kernels::kDrawMaxPenaltyLastN + 1;
  EXPECT_FALSE(p.drawn_in_step(1000));                        // a window past the most a step carries
  p.repeat_penalty = 1.0f;
  EXPECT_TRUE(p.drawn_in_step(1000));                         // no penalty on: no window
  p = top_k_params(40, 1.0f, 1.0f, 0.0f, 1);
  p.logit_bias.assign(kernels::kDrawMaxBias + 1, {3, 1.0f});
  EXPECT_FALSE(p.drawn_in_step(1000));
  p.logit_bias.resize(kernels::kDrawMaxBias);
  EXPECT_TRUE(p.drawn_in_step(1000));
}

TEST(TopKDraw, CheckDrawNamesTheFieldAndItsRange) {
  auto message = [](const kernels::DrawArgs* d) {
    Status st = check_draw(d, 1000, "cpu");
    return st ? std::string() : st.error().message;
  };
  EXPECT_NE(message(nullptr).find("missing"), std::string::npos);
  kernels::DrawArgs d;
  d.top_k = 40;
  EXPECT_EQ(message(&d), "");
  d.top_k = 1000;
  EXPECT_NE(message(&d).find("top_k 1000"), std::string::npos) << message(&d);
  d.top_k = 40;
  d.u = 1.0f;
  EXPECT_NE(message(&d).find("u 1"), std::string::npos) << message(&d);
  d.u = 0.5f;
  d.n_bias = 1;
  d.bias_token[0] = 1000;
  EXPECT_NE(message(&d).find("token 1000"), std::string::npos) << message(&d);
  d.bias_token[0] = 3;
  d.bias[0] = INFINITY;
  EXPECT_NE(message(&d).find("bias inf"), std::string::npos) << message(&d);
  d.bias[0] = -INFINITY;
  EXPECT_EQ(message(&d), "");
  d.repeat_penalty = 0.0f;
  EXPECT_NE(message(&d).find("repeat_penalty 0"), std::string::npos) << message(&d);
  d.repeat_penalty = 1.5f;
  d.presence_penalty = NAN;
  EXPECT_NE(message(&d).find("presence_penalty nan"), std::string::npos) << message(&d);
  d.presence_penalty = 0.5f;
  d.n_recent = kernels::kDrawMaxPenaltyLastN;
  EXPECT_NE(message(&d).find("64 recent tokens"), std::string::npos) << message(&d);
  d.n_recent = 2;
  d.recent[1] = -1;
  EXPECT_NE(message(&d).find("recent token -1 (entry 1)"), std::string::npos) << message(&d);
  d.recent[1] = 999;
  EXPECT_EQ(message(&d), "");
  d.inv_temperature = 0.0f;
  EXPECT_NE(message(&d).find("1/temperature 0"), std::string::npos) << message(&d);
}

}  // namespace
}  // namespace minfer
