// Runs a model on its backend for a Sequence: cuts the tokens into steps of at
// most max_tokens, fills the step inputs (positions, cells) and keeps the
// graphs it has built, one per output kind.
#pragma once

#include <functional>
#include <map>
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
  Runner(const ModelConfig& config, const ModelWeights& weights, Backend& backend, int n_ctx, int max_tokens,
         FusionOptions fusion);

  // Evaluates `tokens` after the sequence's history and appends them to it.
  // Logits (or argmax ids) come from the final step only: the last token's,
  // or with Logits::kAll every token of that final step — callers wanting all
  // rows pass at most max_tokens tokens.
  // `after_step` (may be empty) runs after every forward step; an error it
  // returns stops the evaluation there (the steps done stay in the sequence).
  Status eval(Sequence& seq, std::span<const int32_t> tokens, Logits logits, bool argmax, StepOutput* out,
              const std::function<Status()>& after_step = {});

  KvCells& cells() { return cells_; }
  int n_ctx() const { return cells_.n_ctx(); }
  int max_tokens() const { return max_tokens_; }
  Backend& backend() { return backend_; }

 private:
  const Graph& graph(Logits logits, bool argmax);

  const ModelConfig& config_;
  const ModelWeights& weights_;
  Backend& backend_;
  KvCells cells_;
  int max_tokens_;
  FusionOptions fusion_;
  std::map<std::pair<Logits, bool>, Graph> graphs_;
  std::vector<int32_t> positions_, step_cells_;
};

}  // namespace minfer
