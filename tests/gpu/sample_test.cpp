// kernels::launch_sample against its reference, draw_in_step()
// (engine/sampling/top_k_draw.h): the same token, bit for bit, from the same
// logits and draw — vocabularies of one block to the most the kernel takes
// (one list, an odd last chunk, 38 and 64 blocks), k from 1 to
// kDrawMaxTopK, ties everywhere (logits in quarter steps: the lower id
// first), bias (a token named twice, -inf on the best ones), penalties
// (windows of 1 to 64 tokens among the best, repeated and biased ones,
// boosting and negative penalties), every filter. And kernels::launch_logprobs
// against step_logprobs_raw (engine/sampling/logprobs.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <span>

#include "engine/sampling/logprobs.h"
#include "engine/sampling/top_k_draw.h"
#include "kernels/kernels.h"
#include "tests/gpu/gpu_test_util.h"

namespace minfer {
namespace {

using test::DeviceArray;

std::vector<float> draw_logits(int vocab, uint64_t seed, bool tied) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> l(static_cast<size_t>(vocab));
  for (float& v : l) v = tied ? static_cast<float>(static_cast<int>(rng() % 48) - 30) * 0.25f : normal(rng);
  return l;
}

// A fused argmax's key of (v, row), as kernels/dot.cuh's argmax_pack.
unsigned long long argmax_key(float v, int32_t row) {
  uint32_t b = 0;
  std::memcpy(&b, &v, sizeof(b));
  const uint32_t ord = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (static_cast<unsigned long long>(ord) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(row));
}

TEST(GpuSample, DrawsTheReferencesToken) {
  MINFER_REQUIRE_GPU();
  struct Case {
    int k;
    float temperature, top_p, min_p;
    int n_bias;
    float repeat = 1.0f, frequency = 0.0f, presence = 0.0f;
    int window = 0;  // the penalties' tokens, the step's own the last
  };
  const Case cases[] = {{40, 0.8f, 0.95f, 0.05f, 0},
                        {1, 1.0f, 1.0f, 0.0f, 0},
                        {128, 1.0f, 1.0f, 0.0f, 3},
                        {64, 1.5f, 0.9f, 0.0f, 5},
                        {7, 0.2f, 1.0f, 0.3f, 0},
                        {100, 3.0f, 0.99f, 0.0f, 64},
                        {2, 1.0f, 0.5f, 0.0f, 1},
                        {40, 0.8f, 0.95f, 0.05f, 0, 1.3f, 0.0f, 0.0f, 64},
                        {20, 1.0f, 1.0f, 0.0f, 2, 1.0f, 0.5f, 0.3f, 16},
                        {64, 1.2f, 0.9f, 0.0f, 0, 0.7f, -0.5f, -1.0f, 1},
                        {128, 2.0f, 1.0f, 0.0f, 4, 1.1f, 0.25f, 0.0f, 33}};
  const int vocabs[] = {100, 4096, 4097, 151936, kernels::kSampleMaxVocab};
  DeviceArray<unsigned long long> lists(kernels::sample_lists_bytes(kernels::kSampleMaxVocab) / 8);
  DeviceArray<unsigned int> count;
  count.upload({0u});
  DeviceArray<int32_t> out(1);
  DeviceArray<kernels::DrawArgs> dargs(1);
  DeviceArray<int32_t> step_token(1);
  Candidates scratch;
  std::vector<float> terms;
  int draws = 0, distinct_tokens = 0, penalties_decided = 0;
  for (int vocab : vocabs) {
    for (int tied = 0; tied < 2; ++tied) {
      const std::vector<float> logits = draw_logits(vocab, static_cast<uint64_t>(vocab) * 2 + tied, tied == 1);
      // The best 48 tokens: the penalties' windows take theirs from them.
      Candidates best;
      top_k_candidates(logits.data(), vocab, std::min(48, vocab - 1), &best);
      DeviceArray<float> dl;
      dl.upload(logits);
      for (size_t c = 0; c < std::size(cases); ++c) {
        if (cases[c].k >= vocab) continue;
        std::mt19937_64 rng(1000 * c + static_cast<uint64_t>(vocab));
        kernels::DrawArgs a;
        a.top_k = cases[c].k;
        a.inv_temperature = 1.0f / cases[c].temperature;
        a.top_p = cases[c].top_p;
        a.min_p = cases[c].min_p;
        a.n_bias = cases[c].n_bias;
        // Bias: the best tokens banned or pushed, one token named twice.
        for (int b = 0; b < a.n_bias; ++b) {
          a.bias_token[b] = b == 1 ? a.bias_token[0] : static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
          a.bias[b] = b % 3 == 2 ? -INFINITY : static_cast<float>(static_cast<int>(rng() % 17) - 8) * 0.75f;
        }
        // The window: tokens among the best, some named twice or more, a
        // biased one; the step's own token is one of them.
        int32_t own = 0;
        if (cases[c].window > 0) {
          a.repeat_penalty = cases[c].repeat;
          a.frequency_penalty = cases[c].frequency;
          a.presence_penalty = cases[c].presence;
          a.penalize_step_token = 1;
          a.n_recent = cases[c].window - 1;
          auto pick = [&] { return best[rng() % best.size()].second; };
          for (int i = 0; i < a.n_recent; ++i) a.recent[i] = i % 5 == 4 ? a.recent[i - 1] : pick();
          if (a.n_bias > 0 && a.n_recent > 0) a.recent[0] = a.bias_token[0];
          own = a.n_recent > 0 ? a.recent[a.n_recent / 2] : pick();
        }
        step_token.upload({own});
        std::vector<int32_t> seen;
        for (int d = 0; d < 12; ++d) {
          a.u = static_cast<float>(rng() >> 40) * 0x1.0p-24f;
          if (d == 0) a.u = 0.0f;
          if (d == 1) a.u = 1.0f - 0x1.0p-24f;
          std::vector<float> host = logits;
          const int32_t want = draw_in_step(host.data(), vocab, a, own, &scratch, &terms);
          if (cases[c].window > 0) {
            kernels::DrawArgs off = a;
            off.repeat_penalty = 1.0f;
            off.frequency_penalty = off.presence_penalty = 0.0f;
            std::vector<float> plain = logits;
            penalties_decided += draw_in_step(plain.data(), vocab, off, own, &scratch, &terms) != want;
          }
          dargs.upload({a});
          out.poison();
          CUDA_ASSERT(kernels::launch_sample(dl.get(), vocab, dargs.get(), step_token.get(), lists.get(), count.get(),
                                             out.get(), nullptr));
          const int32_t got = out.download()[0];
          ASSERT_EQ(got, want) << "vocab " << vocab << (tied ? " tied" : "") << ", case " << c << " (k " << a.top_k
                               << "), u " << a.u;
          ++draws;
          if (std::find(seen.begin(), seen.end(), got) == seen.end()) seen.push_back(got);
        }
        distinct_tokens += static_cast<int>(seen.size());
      }
    }
  }
  EXPECT_EQ(count.download()[0], 0u) << "each launch leaves the count at zero";
  EXPECT_GT(distinct_tokens, draws / 3) << "the draws hardly vary: the test would not see a wrong one";
  EXPECT_GT(penalties_decided, 60) << "the penalties hardly change a draw: the test would not see a wrong one";
}

// Chunks whose bound passes all of their keys (every block's 127 best at
// 11, block 0's 128 at 10, the rest at -10: at k = 128 the 128th best
// thread of a block holds -10) sort all 4,096; the lists' merge then meets
// 63 lists of 127 equal values. The same tokens as the host's.
TEST(GpuSample, ChunksOfTiesSortWhole) {
  MINFER_REQUIRE_GPU();
  const int vocab = kernels::kSampleMaxVocab, chunk = 4096;
  std::vector<float> logits(static_cast<size_t>(vocab), -10.0f);
  for (int b = 0; b < vocab / chunk; ++b) {
    for (int i = 0; i < (b == 0 ? 128 : 127); ++i) logits[static_cast<size_t>(b * chunk + 31 * i)] = b == 0 ? 10.0f : 11.0f;
  }
  DeviceArray<float> dl;
  dl.upload(logits);
  DeviceArray<unsigned long long> lists(kernels::sample_lists_bytes(vocab) / 8);
  DeviceArray<unsigned int> count;
  count.upload({0u});
  DeviceArray<int32_t> out(1);
  DeviceArray<kernels::DrawArgs> dargs(1);
  DeviceArray<int32_t> step_token;
  step_token.upload({0});
  Candidates scratch;
  std::vector<float> terms;
  std::set<int32_t> seen;
  for (int d = 0; d < 16; ++d) {
    kernels::DrawArgs a;
    a.top_k = 128;
    a.inv_temperature = 1.0f;
    a.u = static_cast<float>(d) / 16.0f;
    std::vector<float> host = logits;
    const int32_t want = draw_in_step(host.data(), vocab, a, 0, &scratch, &terms);
    dargs.upload({a});
    CUDA_ASSERT(kernels::launch_sample(dl.get(), vocab, dargs.get(), step_token.get(), lists.get(), count.get(),
                                       out.get(), nullptr));
    ASSERT_EQ(out.download()[0], want) << "u " << a.u;
    seen.insert(want);
  }
  EXPECT_GT(seen.size(), 8u);
}

TEST(GpuSample, AVocabularyPastTheLimitIsRefused) {
  MINFER_REQUIRE_GPU();
  DeviceArray<float> dl(1);
  DeviceArray<unsigned long long> lists(1);
  DeviceArray<unsigned int> count(1);
  DeviceArray<int32_t> out(1);
  DeviceArray<kernels::DrawArgs> dargs(1);
  DeviceArray<int32_t> step_token(1);
  EXPECT_EQ(kernels::launch_sample(dl.get(), kernels::kSampleMaxVocab + 1, dargs.get(), step_token.get(), lists.get(),
                                   count.get(), out.get(), nullptr),
            cudaErrorInvalidValue);
}

// A step's log-probabilities on the device are the host's: the same best
// tokens in the same order (ties to the lower id, -0 beside +0), the same
// logits, the picked token's logit whichever way the step names it (a fused
// argmax's key or an id), and log Σ exp within a few ulps of a double (the
// sum is taken in another order) — vocabularies of fewer tokens than the
// list to the most the kernel takes, tied and -inf logits, a launch after
// another on the same count; where the largest logit is infinite, NaN as
// on the host.
TEST(GpuLogprobs, TheStepsListAndSumAreTheHosts) {
  MINFER_REQUIRE_GPU();
  const int vocabs[] = {7, 20, 100, 4096, 4097, 151936, kernels::kSampleMaxVocab};
  DeviceArray<unsigned char> scratch(kernels::logprobs_scratch_bytes(kernels::kSampleMaxVocab));
  DeviceArray<unsigned int> count;
  count.upload({0u});
  DeviceArray<kernels::LogprobsOut> out(1);
  DeviceArray<int32_t> id(1);
  DeviceArray<unsigned long long> key(1);
  int launches = 0, chosen_outside_top = 0;
  for (int vocab : vocabs) {
    for (int kind = 0; kind < 3; ++kind) {  // normal, tied, with -inf and ±0
      std::vector<float> logits = draw_logits(vocab, static_cast<uint64_t>(vocab) * 3 + kind, kind == 1);
      if (kind == 2) {
        for (int i = 0; i < vocab; i += 3) logits[static_cast<size_t>(i)] = -INFINITY;
        logits[static_cast<size_t>(vocab / 2)] = 0.0f;
        logits[static_cast<size_t>(vocab - 1)] = -0.0f;
      }
      DeviceArray<float> dl;
      dl.upload(logits);
      std::mt19937_64 rng(static_cast<uint64_t>(vocab) + kind);
      for (int by_key = 0; by_key < 2; ++by_key) {
        SCOPED_TRACE(testing::Message() << "vocab " << vocab << ", kind " << kind << (by_key ? ", key" : ", id"));
        const int32_t chosen = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
        id.upload({chosen});
        key.upload({argmax_key(logits[static_cast<size_t>(chosen)], chosen)});
        out.poison();
        CUDA_ASSERT(kernels::launch_logprobs(dl.get(), vocab, 1, by_key ? key.get() : nullptr, by_key ? nullptr : id.get(),
                                             scratch.get(), count.get(), out.get(), nullptr));
        ++launches;
        const kernels::LogprobsOut got = out.download()[0];
        const kernels::LogprobsOut want = step_logprobs_raw(logits, chosen);
        EXPECT_NEAR(got.log_z, want.log_z, 1e-10 * std::max(1.0, std::fabs(want.log_z)));
        EXPECT_EQ(got.chosen, chosen);
        EXPECT_EQ(got.chosen_logit, want.chosen_logit);
        ASSERT_EQ(got.n_top, want.n_top);
        bool listed = false;
        for (int i = 0; i < want.n_top; ++i) {
          EXPECT_EQ(got.top[i], want.top[i]) << "rank " << i;
          EXPECT_EQ(got.top_logit[i], want.top_logit[i]) << "rank " << i;
          listed = listed || want.top[i] == chosen;
        }
        chosen_outside_top += listed ? 0 : 1;
        // The log-probabilities the host hands out from either: the same bits
        // but where the sums' last bits differ at a float's rounding.
        const StepLogprobs a = step_logprobs(got, kernels::kLogprobsTop), b = step_logprobs(want, kernels::kLogprobsTop);
        if (std::isinf(b.chosen)) {
          EXPECT_EQ(a.chosen, b.chosen);  // a refused (-inf) token: no difference to take
        } else {
          EXPECT_NEAR(a.chosen, b.chosen, 1e-6f * std::max(1.0f, std::fabs(b.chosen)));
        }
      }
    }
  }
  EXPECT_EQ(count.download()[0], 0u) << "each launch leaves the count at zero";
  EXPECT_GT(chosen_outside_top, launches / 2) << "the picked token's logit must be read, not found in the list";

  // An infinite largest logit: NaN, as the host's sum.
  std::vector<float> inf_logits = draw_logits(5000, 1, false);
  inf_logits[4321] = INFINITY;
  DeviceArray<float> dl;
  dl.upload(inf_logits);
  id.upload({4321});
  CUDA_ASSERT(kernels::launch_logprobs(dl.get(), 5000, 1, nullptr, id.get(), scratch.get(), count.get(), out.get(),
                                       nullptr));
  const kernels::LogprobsOut got = out.download()[0];
  EXPECT_TRUE(std::isnan(got.log_z));
  EXPECT_TRUE(std::isnan(step_logprobs_raw(inf_logits, 4321).log_z));
  EXPECT_EQ(got.top[0], 4321);
}

// A scored prompt's step: every row in one launch, row r against its own
// token (out of range: NaN, as the host's), each row the host's — the
// same list and logits, log Σ exp within a few ulps of a double — and a
// second launch on the same counts the same (each row's count back at zero).
TEST(GpuLogprobs, EveryRowOfAScoredStepIsTheHosts) {
  MINFER_REQUIRE_GPU();
  for (const int vocab : {100, 151936}) {
    const int rows = 37;
    std::vector<float> logits;
    std::vector<int32_t> next(static_cast<size_t>(rows));
    std::mt19937_64 rng(static_cast<uint64_t>(vocab));
    for (int r = 0; r < rows; ++r) {
      const std::vector<float> row = draw_logits(vocab, static_cast<uint64_t>(vocab) * 7 + r, r % 3 == 1);
      logits.insert(logits.end(), row.begin(), row.end());
      next[static_cast<size_t>(r)] = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    }
    next.back() = -1;  // the prompt's last row: no token after it
    DeviceArray<float> dl;
    dl.upload(logits);
    DeviceArray<int32_t> ids;
    ids.upload(next);
    DeviceArray<unsigned char> scratch(kernels::logprobs_scratch_bytes(vocab, rows));
    DeviceArray<unsigned int> counts;
    counts.upload(std::vector<unsigned int>(static_cast<size_t>(rows), 0u));
    DeviceArray<kernels::LogprobsOut> out(static_cast<size_t>(rows));
    for (int launch = 0; launch < 2; ++launch) {
      out.poison();
      CUDA_ASSERT(kernels::launch_logprobs(dl.get(), vocab, rows, nullptr, ids.get(), scratch.get(), counts.get(),
                                           out.get(), nullptr));
      const std::vector<kernels::LogprobsOut> got = out.download();
      for (int r = 0; r < rows; ++r) {
        SCOPED_TRACE(testing::Message() << "vocab " << vocab << ", row " << r << ", launch " << launch);
        const kernels::LogprobsOut want = step_logprobs_raw(
            std::span<const float>(logits).subspan(static_cast<size_t>(r) * vocab, static_cast<size_t>(vocab)),
            next[static_cast<size_t>(r)]);
        const kernels::LogprobsOut& g = got[static_cast<size_t>(r)];
        EXPECT_NEAR(g.log_z, want.log_z, 1e-10 * std::max(1.0, std::fabs(want.log_z)));
        EXPECT_EQ(g.chosen, want.chosen);
        if (std::isnan(want.chosen_logit)) {
          EXPECT_TRUE(std::isnan(g.chosen_logit));
        } else {
          EXPECT_EQ(g.chosen_logit, want.chosen_logit);
        }
        ASSERT_EQ(g.n_top, want.n_top);
        for (int i = 0; i < want.n_top; ++i) {
          EXPECT_EQ(g.top[i], want.top[i]) << "rank " << i;
          EXPECT_EQ(g.top_logit[i], want.top_logit[i]) << "rank " << i;
        }
      }
    }
    const std::vector<unsigned int> left = counts.download();
    EXPECT_EQ(std::count(left.begin(), left.end(), 0u), rows) << "each row's count back at zero";
  }
}

TEST(GpuLogprobs, BadArgumentsAreRefused) {
  MINFER_REQUIRE_GPU();
  DeviceArray<float> dl(1);
  DeviceArray<unsigned char> scratch(1);
  DeviceArray<unsigned int> count(1);
  DeviceArray<kernels::LogprobsOut> out(1);
  DeviceArray<int32_t> id(1);
  DeviceArray<unsigned long long> key(1);
  EXPECT_EQ(kernels::launch_logprobs(dl.get(), kernels::kSampleMaxVocab + 1, 1, nullptr, id.get(), scratch.get(),
                                     count.get(), out.get(), nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::launch_logprobs(dl.get(), 1, 1, key.get(), id.get(), scratch.get(), count.get(), out.get(), nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::launch_logprobs(dl.get(), 1, 1, nullptr, nullptr, scratch.get(), count.get(), out.get(), nullptr),
            cudaErrorInvalidValue);
  // A fused argmax's key names one row's pick; rows are counted from one.
  EXPECT_EQ(kernels::launch_logprobs(dl.get(), 1, 2, key.get(), nullptr, scratch.get(), count.get(), out.get(), nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::launch_logprobs(dl.get(), 1, 0, nullptr, id.get(), scratch.get(), count.get(), out.get(), nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::launch_logprobs(dl.get(), 1, kernels::kLogprobsMaxRows + 1, nullptr, id.get(), scratch.get(),
                                     count.get(), out.get(), nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace minfer
