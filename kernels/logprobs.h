// A decode step's log-probabilities as the step computes them
// (Op::kLogprobs; kernels::launch_logprobs on the device): the log of the
// softmax's denominator over the step's raw logits, the token the step
// picked with its logit, and the kLogprobsTop most likely tokens with
// theirs — so that a request asking for log-probabilities copies back a
// few hundred bytes, not the logits, and its next step can be queued behind.
// engine/sampling/logprobs.h turns it into log-probabilities with the
// host's arithmetic (logprob_of), which step_logprobs uses too.
//
// Plain C++ (no CUDA headers), shared by the host and the device.
#pragma once

#include <cstdint>

namespace minfer::kernels {

// The most likely tokens a step lists (the API's most: kMaxTopLogprobs).
inline constexpr int kLogprobsTop = 20;

struct LogprobsOut {
  // log Σ exp(logit) over the vocabulary: the largest logit plus the log of
  // the sum of exp(logit - largest), taken in double. NaN where the largest
  // logit is not finite (as the host's).
  double log_z = 0.0;
  int32_t chosen = 0;        // the token the step picked (its argmax or its draw)
  float chosen_logit = 0.0f;
  // The n_top (kLogprobsTop, or the vocabulary's size if smaller) best
  // logits, the larger first, the lower id on ties (-0 counts as +0).
  int32_t n_top = 0;
  int32_t top[kLogprobsTop] = {};
  float top_logit[kLogprobsTop] = {};
};

// A logit's log-probability given log_z (the same bits on either side).
inline float logprob_of(float logit, double log_z) { return static_cast<float>(static_cast<double>(logit) - log_z); }

}  // namespace minfer::kernels
