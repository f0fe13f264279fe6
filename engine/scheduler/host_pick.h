// What the host does with a step's logits when it, not the device, picks the
// token: the sampler, the output's constraint (JSON mode, structured output,
// tool calls: output_constraint.h) and the
// token's log-probabilities (logprobs.h) — and, for a scored prompt, the
// prompt tokens' log-probabilities from every prefill row. Engine::generate
// uses one HostPick per request.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <string>
#include <vector>

#include "engine/api.h"
#include "engine/sampling/json_schema.h"
#include "engine/sampling/output_constraint.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/logprobs.h"

namespace minfer {

// Each token's bytes, control tokens none: what JSON mode checks a token by.
std::vector<std::string> token_texts(const Tokenizer& tokenizer);

// A token's log-probabilities, with the bytes of each token named (control
// tokens rendered).
TokenLogprobs describe_logprobs(const Tokenizer& tokenizer, std::span<const float> logits, int32_t chosen, int top_n);
// The same from what a step that computed them handed back (Op::kLogprobs).
TokenLogprobs describe_logprobs(const Tokenizer& tokenizer, const kernels::LogprobsOut& raw, int top_n);

class HostPick {
 public:
  // `token_text`: token_texts() of the model, read when the output is constrained.
  HostPick(const GenerationRequest& request, const Tokenizer& tokenizer, const std::vector<std::string>& token_text,
           int vocab_size);

  // The token picked from `logits` (which it changes) after `history`; -1
  // when the constraint allows none.
  int32_t pick(float* logits, const std::vector<int32_t>& history);
  // Takes `token`, picked elsewhere (the device's argmax), if the constraint
  // allows it there: false, and nothing changes, when it does not.
  bool take(int32_t token);
  // A greedy request's pick from the candidates its decode step listed
  // (Op::kLogprobs: the step's best tokens, the larger logit first, the
  // lower id on ties — the order in which the host's greedy pick meets
  // them): the first the constraint allows, the token pick() would take from
  // the whole logits, with its log-probabilities when asked for. kNotListed
  // when that is not settled by the list: the constraint allows none of them
  // (and the vocabulary holds more), or the logits hold a NaN or an infinity
  // (the host's order is then its own) — pick() from the logits then.
  static constexpr int32_t kNotListed = -2;
  int32_t pick_listed(const kernels::LogprobsOut& step);
  // The log-probabilities of a token the step picked, as the step computed
  // them (EngineConfig::logprobs_in_step): what take_logprobs() hands out next.
  void took_step_logprobs(const kernels::LogprobsOut& raw) {
    logprobs_ = describe_logprobs(tokenizer_, raw, request_.top_logprobs);
  }
  // The last picked token's log-probabilities, when asked for (once).
  std::optional<TokenLogprobs> take_logprobs() { return std::exchange(logprobs_, std::nullopt); }
  // The constraint says the reply is done (a JSON value, a Llama call).
  bool complete() const { return constraint_ && constraint_->complete(); }
  // The sampler, for the draws of steps that pick on the device.
  Sampler& sampler() { return sampler_; }

 private:
  const GenerationRequest& request_;
  const Tokenizer& tokenizer_;
  const std::vector<std::string>& token_text_;
  int vocab_size_;
  Sampler sampler_;
  std::unique_ptr<OutputConstraint> constraint_;
  std::vector<float> raw_logits_;
  std::optional<TokenLogprobs> logprobs_;

  // Whether the constraint lets `id` come next: its bytes keep the output a
  // prefix of what is allowed (a token without bytes: if it may end here).
  bool allows(int32_t id) const;
};

// A scored prompt's log-probabilities (GenerationRequest::prompt_logprobs),
// a prefill step's rows at a time: the row at prompt position p predicts
// token p + 1. The first token has none (NaN), nor do those before
// prompt_logprobs_from: the rows of that context (positions before
// context()) are skipped where they come (add_rows: every row's logits
// copied), or never come (add_scored_rows of steps that skip them,
// StepInput::score_from: `context_skipped`).
class PromptScorer {
 public:
  PromptScorer(const GenerationRequest& request, const Tokenizer& tokenizer, int vocab_size,
               std::vector<TokenLogprobs>* out, bool context_skipped);
  // The rows of context: those before the first scored token's.
  int context() const { return static_cast<int>(context_); }
  void add_rows(std::span<const float> logits);
  // An error where a row was scored against another token than the
  // prompt's next (a backend's bug).
  Status add_scored_rows(std::span<const kernels::LogprobsOut> rows);

 private:
  const GenerationRequest& request_;
  const Tokenizer& tokenizer_;
  int vocab_size_;
  std::vector<TokenLogprobs>* out_;
  size_t context_ = 0;
  size_t next_row_ = 0;  // the prompt position of the next row to come
  // The rows [first, last) of the next `n` to come that predict a scored
  // prompt token, as indices into them.
  std::pair<size_t, size_t> scored_of_next(size_t n) const;
};

}  // namespace minfer
