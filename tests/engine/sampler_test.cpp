// Sampler: each filter on logits worked out by hand, reproducibility, and the
// drawn frequencies against the softmax they should follow.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "engine/sampling/logprobs.h"
#include "engine/sampling/sampler.h"

namespace minfer {
namespace {

SamplingParams plain(float temperature) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

TEST(Sampler, GreedyTakesTheFirstLargest) {
  Sampler s(plain(0.0f), 4);
  std::vector<float> l{0.5f, 2.0f, 2.0f, -1.0f};
  EXPECT_EQ(s.sample(l.data(), {}), 1);
}

TEST(Sampler, RepeatPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  Sampler s(p, 3);
  // history {0, 2}: [2.0, 1.5, -1.0] → [1.0, 1.5, -2.0]
  std::vector<float> l{2.0f, 1.5f, -1.0f};
  EXPECT_EQ(s.sample(l.data(), {0, 2}), 1);
  EXPECT_FLOAT_EQ(l[0], 1.0f);
  EXPECT_FLOAT_EQ(l[1], 1.5f);
  EXPECT_FLOAT_EQ(l[2], -2.0f);
}

TEST(Sampler, PresenceAndFrequencyPenalties) {
  SamplingParams p = plain(0.0f);
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.1f;
  Sampler s(p, 3);
  // history {0, 0, 1}: token 0: 1 - 2*0.5 - 0.1 = -0.1; token 1: 1 - 0.5 - 0.1 = 0.4; token 2: 1
  std::vector<float> l{1.0f, 1.0f, 1.0f};
  EXPECT_EQ(s.sample(l.data(), {0, 0, 1}), 2);
  EXPECT_FLOAT_EQ(l[0], -0.1f);
  EXPECT_FLOAT_EQ(l[1], 0.4f);
}

TEST(Sampler, PenaltiesLookOnlyAtTheLastNTokens) {
  SamplingParams p = plain(0.0f);
  p.presence_penalty = 1.0f;
  p.penalty_last_n = 1;
  Sampler s(p, 2);
  std::vector<float> l{1.0f, 0.5f};
  EXPECT_EQ(s.sample(l.data(), {0, 1}), 0);  // only token 1 is penalised → [1.0, -0.5]
  EXPECT_FLOAT_EQ(l[1], -0.5f);
}

TEST(Sampler, LogitBiasCanBanTheTopToken) {
  SamplingParams p = plain(0.0f);
  p.logit_bias = {{1, -INFINITY}};
  Sampler s(p, 3);
  std::vector<float> l{0.0f, 5.0f, 1.0f};
  EXPECT_EQ(s.sample(l.data(), {}), 2);
}

std::vector<int> histogram(SamplingParams p, const std::vector<float>& logits, int draws) {
  Sampler s(p, static_cast<int>(logits.size()));
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    std::vector<float> l = logits;
    ++counts[static_cast<size_t>(s.sample(l.data(), {}))];
  }
  return counts;
}

TEST(Sampler, DrawsFollowTheSoftmax) {
  const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  const auto counts = histogram(plain(1.0f), logits, 20000);
  EXPECT_NEAR(counts[0] / 20000.0, 0.5, 0.015);
  EXPECT_NEAR(counts[1] / 20000.0, 0.3, 0.015);
  EXPECT_NEAR(counts[2] / 20000.0, 0.2, 0.015);
}

TEST(Sampler, TemperatureSharpens) {
  // T = 0.5 squares the probabilities: 0.25, 0.09, 0.04 → 0.6579, 0.2368, 0.1053
  const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  const auto counts = histogram(plain(0.5f), logits, 20000);
  EXPECT_NEAR(counts[0] / 20000.0, 0.6579, 0.015);
  EXPECT_NEAR(counts[2] / 20000.0, 0.1053, 0.015);
}

TEST(Sampler, TopKTopPMinPCutTheTail) {
  const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplingParams k = plain(1.0f);
  k.top_k = 1;
  EXPECT_EQ(histogram(k, logits, 500)[0], 500);
  SamplingParams p = plain(1.0f);
  p.top_p = 0.6f;  // 0.5 < 0.6 ≤ 0.8: keeps two
  auto hp = histogram(p, logits, 2000);
  EXPECT_EQ(hp[2], 0);
  EXPECT_GT(hp[1], 0);
  SamplingParams m = plain(1.0f);
  m.min_p = 0.5f;  // keeps p ≥ 0.25
  auto hm = histogram(m, logits, 2000);
  EXPECT_EQ(hm[2], 0);
  EXPECT_GT(hm[1], 0);
}

// llama.cpp's chain: top-p renormalizes over what top-k kept. The top two
// hold 0.6 of the mass; over them the first has 0.5 / 0.6 = 0.83 ≥ 0.7, so
// top-k 2 then top-p 0.7 keeps one token (measured against the whole
// vocabulary, 0.5 < 0.7 would have kept two).
TEST(Sampler, TopPRenormalizesOverWhatTopKKept) {
  const std::vector<float> logits{std::log(0.5f), std::log(0.1f), std::log(0.1f), std::log(0.1f), std::log(0.1f),
                                  std::log(0.1f)};
  SamplingParams p = plain(1.0f);
  p.top_k = 2;
  p.top_p = 0.7f;
  EXPECT_EQ(histogram(p, logits, 500)[0], 500);
  p.top_p = 0.9f;  // 0.83 < 0.9: both
  const auto both = histogram(p, logits, 3000);
  EXPECT_NEAR(both[0] / 3000.0, 0.8333, 0.03);
  EXPECT_NEAR(both[1] / 3000.0, 0.1667, 0.03);
  EXPECT_EQ(both[2] + both[3] + both[4] + both[5], 0);
}

// Without top-k and top-p only the first 256 candidates are put in order:
// the draw over a vocabulary of 3000 still follows the softmax, and min-p
// finds its cut among the unordered rest. 1000 tokens at logit 0 and 2000
// at log(1/2): each of the first carries 1/2000 of the mass, each of the
// others 1/4000; min-p 0.6 drops the others.
TEST(Sampler, DrawsBeyondTheOrderedCandidatesFollowTheSoftmax) {
  std::vector<float> logits(3000, std::log(0.5f));
  for (int i = 0; i < 3000; i += 3) logits[static_cast<size_t>(i)] = 0.0f;
  const int draws = 40000;
  const auto counts = histogram(plain(1.0f), logits, draws);
  long high = 0, low = 0;
  for (size_t i = 0; i < counts.size(); ++i) (i % 3 == 0 ? high : low) += counts[i];
  EXPECT_NEAR(static_cast<double>(high) / draws, 0.5, 0.015);
  int beyond = 0;  // the tokens past the first 256 of each kind
  for (size_t i = 3 * 256; i < counts.size(); ++i) beyond += counts[i] > 0;
  EXPECT_GT(beyond, 1000);
  SamplingParams m = plain(1.0f);
  m.min_p = 0.6f;
  const auto cut = histogram(m, logits, 4000);
  long dropped = 0, kept_far = 0;
  for (size_t i = 0; i < cut.size(); ++i) {
    if (i % 3 != 0) dropped += cut[i];
    if (i % 3 == 0 && i > 3 * 256) kept_far += cut[i] > 0;
  }
  EXPECT_EQ(dropped, 0);
  EXPECT_GT(kept_far, 300);
}

TEST(Sampler, TopPOverALargeVocabularyGrowsItsSortedPrefix) {
  // 5000 equal logits: top_p 0.9 must keep 4500 of them, more than the first
  // sorted prefix of 256.
  SamplingParams p = plain(1.0f);
  p.top_p = 0.9f;
  const auto counts = histogram(p, std::vector<float>(5000, 0.0f), 3000);
  int used = 0;
  for (int c : counts) used += c > 0;
  EXPECT_GT(used, 1500);
  int beyond = 0;
  for (size_t i = 4500; i < counts.size(); ++i) beyond += counts[i];
  EXPECT_EQ(beyond, 0);
}

TEST(Sampler, SameSeedSameDraws) {
  const std::vector<float> logits{0.1f, 0.2f, 0.3f, 0.4f};
  SamplingParams p = plain(1.0f);
  p.seed = 99;
  EXPECT_EQ(histogram(p, logits, 300), histogram(p, logits, 300));
  Sampler a(p, 4), b(p, 4);
  for (int i = 0; i < 50; ++i) {
    std::vector<float> la = logits, lb = logits;
    ASSERT_EQ(a.sample(la.data(), {}), b.sample(lb.data(), {}));
  }
}

TEST(Sampler, ValidateNamesTheParameter) {
  SamplingParams p = plain(1.0f);
  p.min_p = 1.5f;
  auto st = p.validate(10);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("min_p is 1.5"), std::string::npos) << st.error().message;
  p = plain(1.0f);
  p.logit_bias = {{10, 1.0f}};
  st = p.validate(10);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("logit_bias token 10"), std::string::npos);
  EXPECT_TRUE(plain(0.7f).validate(10).has_value());
}

// Log-probabilities by hand: logits {1, 2, 3, 3, -inf}: Z = e + e² + 2e³,
// log p(i) = l_i - ln Z; ties listed by id; -inf is impossible, not NaN.
TEST(StepLogprobs, LogSoftmaxOfTheRawLogitsBestFirst) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 3.0f, -inf};
  const double log_z = std::log(std::exp(1.0) + std::exp(2.0) + 2 * std::exp(3.0));
  const StepLogprobs lp = step_logprobs(logits, 1, 3);
  EXPECT_NEAR(lp.chosen, 2.0 - log_z, 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 2);
  EXPECT_EQ(lp.top[1].first, 3);
  EXPECT_EQ(lp.top[2].first, 1);
  EXPECT_NEAR(lp.top[0].second, 3.0 - log_z, 1e-6);
  EXPECT_EQ(lp.top[0].second, lp.top[1].second);
  EXPECT_EQ(step_logprobs(logits, 4, 0).chosen, -inf);
  EXPECT_TRUE(step_logprobs(logits, 4, 0).top.empty());
  EXPECT_EQ(step_logprobs(logits, 0, 9).top.size(), 5u);  // at most the vocabulary
  // Large logits do not overflow: shifted by the largest.
  const StepLogprobs big = step_logprobs(std::vector<float>{1000.0f, 1000.0f}, 0, 1);
  EXPECT_NEAR(big.chosen, -std::log(2.0), 1e-6);
}

// A constraint (JSON mode's): greedy takes the best token it allows, even
// past the bias; sampled draws, with top-k and without, never take one it
// refuses and still follow the logits among the others; none allowed: -1.
TEST(Sampler, AllowedTokensOnly) {
  const std::vector<float> base = {5.0f, 4.0f, 3.0f, 2.0f, 1.0f, 0.0f};
  auto odd = [](int32_t t) { return t % 2 == 1; };
  std::vector<float> l = base;
  Sampler greedy(plain(0.0f), 6);
  EXPECT_EQ(greedy.sample(l.data(), {}, odd), 1);
  SamplingParams biased = plain(0.0f);
  biased.logit_bias = {{5, 10.0f}};
  l = base;
  EXPECT_EQ(Sampler(biased, 6).sample(l.data(), {}, odd), 5);  // the bias counts first
  for (const int top_k : {0, 2}) {
    SamplingParams sp = plain(1.0f);
    sp.top_k = top_k;
    sp.seed = 3;
    Sampler s(sp, 6);
    int counts[6] = {};
    for (int i = 0; i < 4000; ++i) {
      l = base;
      ++counts[s.sample(l.data(), {}, odd)];
    }
    EXPECT_EQ(counts[0] + counts[2] + counts[4], 0) << "top_k " << top_k;
    // Among 1, 3, 5 the softmax of 4, 2, 0 (top-k 2: of 4 and 2 alone).
    const double p1 = top_k == 2 ? 1.0 / (1.0 + std::exp(-2.0)) : 1.0 / (1.0 + std::exp(-2.0) + std::exp(-4.0));
    EXPECT_NEAR(counts[1] / 4000.0, p1, 0.03) << "top_k " << top_k;
    if (top_k == 2) {
      EXPECT_EQ(counts[5], 0);
    }
  }
  l = base;
  EXPECT_EQ(greedy.sample(l.data(), {}, [](int32_t) { return false; }), -1);
}

// The best tokens a constraint allows, found with the best few looked at
// first and then one pass over the vocabulary, are the tokens of sampling
// from the logits with every refused token at -inf: the same draws, seed
// for seed, greedy and top-k, for constraints that allow every token, one
// in 3, 97 or 1,000, one token and none — on logits with ties (quarter
// steps: the lower id first) where the best allowed lie far down the order.
TEST(Sampler, AllowedTokensAreTheMaskedLogitsBest) {
  constexpr int kVocab = 5000;
  std::mt19937 rng(17);
  std::vector<float> base(kVocab);
  for (float& v : base) v = static_cast<float>(static_cast<int>(rng() % 64)) * 0.25f;
  const std::function<bool(int32_t)> constraints[] = {
      [](int32_t) { return true; },           [](int32_t t) { return t % 3 == 1; },
      [](int32_t t) { return t % 97 == 5; },  [](int32_t t) { return t % 1000 == 999; },
      [](int32_t t) { return t == 4321; },    [](int32_t) { return false; }};
  for (size_t c = 0; c < std::size(constraints); ++c) {
    for (const int top_k : {0, 2, 40}) {  // 0: greedy here
      SCOPED_TRACE(testing::Message() << "constraint " << c << ", top_k " << top_k);
      SamplingParams sp = plain(top_k == 0 ? 0.0f : 1.5f);
      sp.top_k = top_k;
      sp.seed = 5;
      Sampler held(sp, kVocab), masked(sp, kVocab);
      std::vector<float> masked_base = base;
      bool any = false;
      for (int32_t t = 0; t < kVocab; ++t) {
        if (!constraints[c](t)) masked_base[static_cast<size_t>(t)] = -INFINITY;
        any = any || constraints[c](t);
      }
      std::set<int32_t> seen;
      for (int d = 0; d < 200; ++d) {
        std::vector<float> a = base, b = masked_base;
        const int32_t got = held.sample(a.data(), {}, constraints[c]);
        const int32_t want = any ? masked.sample(b.data(), {}) : -1;
        ASSERT_EQ(got, want) << "draw " << d;
        seen.insert(got);
        if (top_k == 0) break;  // greedy: one answer
      }
      if (top_k > 1 && c < 4) {
        EXPECT_GT(seen.size(), 1u) << "the draws never vary: a wrong kept set could hide";
      }
    }
  }
}

}  // namespace
}  // namespace minfer
