// The draw of a request sampled from its k best logits (SamplingParams::top_k
// set): the k best under (logit descending, the lower id first on ties), then
// kernels/draw.h's pick, whose arithmetic gives the same bits on the device.
// The host sampler takes this path for every top-k request; the CPU backend's
// Op::kSample calls draw_in_step(), the reference of kernels::launch_sample.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/common/expected.h"
#include "kernels/draw.h"

namespace minfer {

// (logit, token) pairs, best first.
using Candidates = std::vector<std::pair<float, int32_t>>;

// The k best of logits[vocab_size] (0 < k < vocab_size) into *out, in order:
// one pass over a heap of k, which nearly every token fails to enter with one
// float comparison (pairs for all 150k tokens, then a partial sort, cost
// several times more).
void top_k_candidates(const float* logits, int vocab_size, int k, Candidates* out);

// kernels::draw::select over the candidates in order: the index of the one
// drawn. *terms is scratch.
int draw_candidate(const Candidates& c, float inv_temperature, float top_p, float min_p, float u,
                   std::vector<float>* terms);

// A step's draw as a backend receives it (StepInput::draw of a sample
// graph): an error naming `backend`, the field, its value and its range.
Status check_draw(const kernels::DrawArgs* draw, int vocab_size, std::string_view backend);

// The penalties (kernels::draw::penalize) on logits[vocab_size] of the
// tokens in `window` (ids outside the vocabulary skipped), each once, with
// its count there. Nothing when no penalty is on.
void apply_penalties(float* logits, int vocab_size, std::span<const int32_t> window, float repeat, float frequency,
                     float presence);

// Op::kSample's token: args' bias added to logits (in place, entry order),
// the penalties over args.recent and, where args.penalize_step_token says,
// `step_token` (the step's input token), the k best, the draw.
int32_t draw_in_step(float* logits, int vocab_size, const kernels::DrawArgs& args, int32_t step_token,
                     Candidates* scratch, std::vector<float>* terms);

}  // namespace minfer
