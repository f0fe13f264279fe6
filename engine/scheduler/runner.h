// Runs a model on its backend for a Sequence: cuts the tokens into steps of at
// most max_tokens, fills the step inputs (positions, cells) and keeps the
// graphs it has built, one per output kind.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <tuple>

#include "engine/backend/backend.h"
#include "engine/graph/graph.h"
#include "engine/scheduler/kv_cells.h"

namespace minfer {

struct FusionOptions {
  bool fuse_qkv = true;
  bool fuse_ffn = true;
};

class Runner {
 public:
  // A sequence holds at most n_ctx tokens; the KV cache has n_cells cells
  // (0: n_ctx; more leaves room for the prefix cache's kept histories beside
  // a sequence of the whole context). The backend must have as many.
  Runner(const ModelConfig& config, const ModelWeights& weights, Backend& backend, int n_ctx, int max_tokens,
         FusionOptions fusion, int n_cells = 0);

  // Evaluates `tokens` after the sequence's history and appends them to it.
  // Logits (or argmax ids) come from the final step only, the last token's;
  // with Logits::kAll every step computes every one of its tokens' logits,
  // and `out` holds the step's rows when `after_step` runs (callers that want
  // all rows read them there, or pass at most max_tokens tokens); with
  // Logits::kScore every step scores each of its tokens' rows against the
  // token after it (out->row_logprobs, read there too; the last token's row
  // against none) and hands back its last row's logits.
  // `after_step` (may be empty) runs after every forward step; an error it
  // returns stops the evaluation there (the steps done stay in the sequence).
  // `step_tokens` (0: max_tokens) caps the tokens a step takes. With
  // Logits::kScore, `score_from` of the tokens are context: their rows get
  // no head and no scores (StepInput::score_from), and a step of context
  // alone computes no logits; at most all tokens but the last.
  // Nothing may be in flight (see submit_decode()).
  Status eval(Sequence& seq, std::span<const int32_t> tokens, Logits logits, bool argmax, StepOutput* out,
              const std::function<Status()>& after_step = {}, int step_tokens = 0, int score_from = 0);

  // Decode with steps in flight (Backend::submit/collect), so that the
  // device evaluates a token while the host hands out the one before.
  // submit_decode() enqueues the step that evaluates `token` after the
  // sequence — with no token, the one the step submitted before it picked
  // (its argmax, or its draw) — taking its cell now; the step's own token is
  // its argmax (argmax), its draw (draw: a kSample graph) or left to the host
  // (the logits); with logprobs, a step that picks its token also hands
  // back the pick's log-probabilities (StepOutput::logprobs; Op::kLogprobs).
  // collect_decode() waits for the oldest step, and its token joins
  // seq.tokens. drain() waits for every step in
  // flight and gives their cells back: what they computed is dropped.
  Status submit_decode(Sequence& seq, std::optional<int32_t> token, bool argmax,
                       const kernels::DrawArgs* draw = nullptr, bool logprobs = false);
  Status collect_decode(Sequence& seq, StepOutput* out);
  Status drain(Sequence& seq);
  // The logits of the step collected last, which picked its token
  // (Backend::fetch_logits): nothing may be in flight.
  Status fetch_logits(StepOutput* out);
  int in_flight() const { return static_cast<int>(in_flight_.size()); }

  KvCells& cells() { return cells_; }
  int n_ctx() const { return n_ctx_; }
  int max_tokens() const { return max_tokens_; }
  Backend& backend() { return backend_; }

 private:
  const Graph& graph(Logits logits, bool argmax, bool sample = false, bool logprobs = false);

  const ModelConfig& config_;
  const ModelWeights& weights_;
  Backend& backend_;
  int n_ctx_;
  KvCells cells_;
  int max_tokens_;
  FusionOptions fusion_;
  std::map<std::tuple<Logits, bool, bool, bool>, Graph> graphs_;  // (logits, argmax, sample, logprobs)
  std::vector<int32_t> positions_, step_cells_;
  std::deque<std::optional<int32_t>> in_flight_;  // the tokens the submitted steps evaluate, oldest first
  int32_t last_argmax_ = -1;                      // the last collected step's pick: a fed step's token
};

}  // namespace minfer
