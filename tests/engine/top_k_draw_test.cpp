// The top-k draw (engine/sampling/top_k_draw.h, kernels/draw.h): our exp
// against the C library's, the pick worked out by hand, and a step's draw
// (Op::kSample's reference) giving the host sampler's tokens from the same
// logits and seed. The CUDA kernel is checked against draw_in_step() in
// tests/gpu/sample_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

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
// of the top token), every filter, k from 1 to the most a step takes.
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
  int different = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(testing::Message() << "case " << c << " top_k " << cases[c].top_k);
    ASSERT_TRUE(cases[c].drawn_in_step(vocab));
    Sampler host(cases[c], vocab), step(cases[c], vocab);
    Candidates scratch;
    std::vector<float> terms;
    int32_t previous = -1;
    for (int i = 0; i < 200; ++i) {
      std::vector<float> a = tied_logits(vocab, 100 * c + i), b = a;
      const int32_t want = host.sample(a.data(), {});
      const kernels::DrawArgs args = step.step_draw();
      ASSERT_EQ(draw_in_step(b.data(), vocab, args, &scratch, &terms), want) << "token " << i;
      if (c + 1 == cases.size()) {
        ASSERT_NE(want, 5);  // banned
      }
      different += want != previous;
      previous = want;
    }
  }
  EXPECT_GT(different, 600) << "the draws hardly vary: the test would not see a wrong one";
}

TEST(TopKDraw, WhatAStepCannotDrawStaysWithTheHost) {
  EXPECT_FALSE(top_k_params(40, 0.0f, 1.0f, 0.0f, 1).drawn_in_step(1000));     // greedy
  EXPECT_FALSE(top_k_params(0, 1.0f, 0.9f, 0.0f, 1).drawn_in_step(1000));      // no top-k
  EXPECT_FALSE(top_k_params(129, 1.0f, 1.0f, 0.0f, 1).drawn_in_step(1000));    // past kDrawMaxTopK
  EXPECT_FALSE(top_k_params(40, 1.0f, 1.0f, 0.0f, 1).drawn_in_step(40));       // k not below the vocabulary
  SamplingParams p = top_k_params(40, 1.0f, 1.0f, 0.0f, 1);
  p.repeat_penalty = 1.1f;
  EXPECT_FALSE(p.drawn_in_step(1000));
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
  d.inv_temperature = 0.0f;
  EXPECT_NE(message(&d).find("1/temperature 0"), std::string::npos) << message(&d);
}

}  // namespace
}  // namespace minfer
