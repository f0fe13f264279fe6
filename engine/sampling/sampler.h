// Token sampling: greedy, temperature, top-k, top-p, min-p, repetition /
// presence / frequency penalties and logit bias, with a seeded generator that
// makes runs reproducible across machines (mt19937_64 and our own uniform
// draw, no std distributions whose output differs between libraries).
//
// Order, as llama.cpp's default chain: logit bias → penalties → top-k →
// top-p → min-p → temperature → draw. Temperature 0 is greedy. With top-k,
// what follows it is kernels/draw.h's arithmetic (top_k_draw.h), which a
// decode step can run on the device with the same bits (Op::kSample).
// Each sampled token takes one number from the generator, whichever side
// draws it.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "engine/common/expected.h"
#include "engine/sampling/top_k_draw.h"

namespace minfer {

struct SamplingParams {
  float temperature = 0.8f;     // 0: greedy
  int top_k = 40;               // 0: off
  float top_p = 0.95f;          // 1: off
  float min_p = 0.05f;          // 0: off
  float repeat_penalty = 1.0f;  // 1: off (llama.cpp's multiplicative penalty)
  int penalty_last_n = 64;      // tokens of history the penalties look at
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  std::vector<std::pair<int32_t, float>> logit_bias;

  bool greedy() const { return temperature <= 0.0f; }
  // True when greedy with nothing that changes the argmax (the device can pick).
  bool plain_greedy() const;
  // True when a penalty changes logits (one on, over a window of tokens).
  bool penalties() const;
  // True when a decode step can draw the token itself (Op::kSample,
  // kernels::DrawArgs): sampled from the k best (k up to kDrawMaxTopK), at
  // most kDrawMaxBias bias entries, and penalties over a window of at most
  // kDrawMaxPenaltyLastN tokens.
  bool drawn_in_step(int vocab_size) const;
  // Errors name the bad parameter and its allowed range.
  Status validate(int vocab_size) const;
};

class Sampler {
 public:
  Sampler(const SamplingParams& params, int vocab_size);

  // Picks the next token from `logits` (modified in place). `history` holds
  // the prompt and the tokens generated so far. `allowed` (may be empty):
  // tokens it refuses are never picked (constrained output, JSON mode) —
  // after the bias and penalties, the best tokens it allows stand in for the
  // best tokens (asked about in order, as many as the chain can use: one when
  // greedy, top-k of them, every token without top-k); -1 when it allows none.
  int32_t sample(float* logits, const std::vector<int32_t>& history,
                 const std::function<bool(int32_t)>& allowed = {});
  // The next token's draw for a step that draws it (params.drawn_in_step()):
  // what sample() would use, taking the generator's next number as it would.
  // The tokens before the step's input token are `before` followed by
  // `then` (the prompt and the tokens generated so far, as sample()'s
  // history, less the step's own, which the backend adds to the penalties'
  // window: the device may have drawn it).
  kernels::DrawArgs step_draw(std::span<const int32_t> before = {}, std::span<const int32_t> then = {});

 private:
  void apply_penalties(float* logits, const std::vector<int32_t>& history) const;
  // Sets every logit but those of the `need` best tokens `allowed` allows to
  // -inf; false when it allows none.
  bool constrain(float* logits, const std::function<bool(int32_t)>& allowed, size_t need);
  double uniform();
  float uniform24();

  SamplingParams params_;
  int vocab_size_;
  std::mt19937_64 rng_;
  Candidates candidates_;
  std::vector<float> terms_;
};

}  // namespace minfer
