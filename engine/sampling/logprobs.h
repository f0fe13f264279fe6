// Log-probabilities of a step's tokens under the model, for requests that ask
// for them (GenerationRequest::top_logprobs): the log-softmax of the step's
// raw logits — before temperature, penalties, bias and the sampler's filters,
// as vLLM's default and OpenAI's "the model's" log-probabilities — of the
// token picked and of the n most likely ones.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kernels/logprobs.h"

namespace minfer {

struct StepLogprobs {
  float chosen = 0.0f;                            // the picked token's
  std::vector<std::pair<int32_t, float>> top;     // the n most likely (token, logprob), best first, ties by id
};

// `logits`: the step's [vocab] raw logits; `chosen`: the token picked from
// them; `n`: how many of the most likely to list (at most the vocabulary).
// The sum of exponentials is taken in double from the largest logit down, so
// that no term overflows; a logit of -inf has log-probability -inf.
StepLogprobs step_logprobs(std::span<const float> logits, int32_t chosen, int n);

// What a step that computes its own log-probabilities hands back
// (Op::kLogprobs; kernels/logprobs.h) from `logits` and the token it
// picked, listing the n_top (at most kLogprobsTop) best: the CPU backend's
// op (all of them), and step_logprobs' first part (the n it lists).
kernels::LogprobsOut step_logprobs_raw(std::span<const float> logits, int32_t chosen,
                                       int n_top = kernels::kLogprobsTop);
// The picked token's log-probability and the n (at most raw.n_top) most
// likely: step_logprobs' second part.
StepLogprobs step_logprobs(const kernels::LogprobsOut& raw, int n);

}  // namespace minfer
