#include "engine/scheduler/runner.h"

#include <fmt/format.h>

#include <algorithm>

namespace minfer {

Runner::Runner(const ModelConfig& config, const ModelWeights& weights, Backend& backend, int n_ctx, int max_tokens,
               FusionOptions fusion, int n_cells)
    : config_(config),
      weights_(weights),
      backend_(backend),
      n_ctx_(n_ctx),
      cells_(n_cells > 0 ? n_cells : n_ctx),
      max_tokens_(max_tokens),
      fusion_(fusion) {}

const Graph& Runner::graph(Logits logits, bool argmax, bool sample, bool logprobs) {
  auto key = std::make_tuple(logits, argmax, sample, logprobs);
  auto it = graphs_.find(key);
  if (it != graphs_.end()) return it->second;
  GraphOptions o;
  o.logits = logits;
  o.argmax = argmax;
  o.sample = sample;
  o.logprobs = logprobs;
  // Fuse only where the backend implements the fused op (the one rule the
  // builder and the backend share).
  o.fuse_qkv = fusion_.fuse_qkv && backend_.supports(Op::kQkvTail);
  o.fuse_ffn = fusion_.fuse_ffn && backend_.supports(Op::kGateUpSwiglu);
  return graphs_.emplace(key, build_decoder_graph(config_, weights_, o)).first->second;
}

Status Runner::eval(Sequence& seq, std::span<const int32_t> tokens, Logits logits, bool argmax, StepOutput* out,
                    const std::function<Status()>& after_step, int step_tokens, int score_from) {
  if (tokens.empty()) return unexpected(ErrorCode::kInvalidArgument, "eval of zero tokens");
  if (logits == Logits::kScore && argmax) {
    return unexpected(ErrorCode::kInvalidArgument, "a scored evaluation hands back logits, not an argmax");
  }
  if (score_from != 0 && (logits != Logits::kScore || score_from < 0 || static_cast<size_t>(score_from) >= tokens.size())) {
    return unexpected(ErrorCode::kInvalidArgument, fmt::format("score_from {} in an evaluation of {} tokens{}", score_from,
                                                               tokens.size(), logits == Logits::kScore ? "" : " unscored"));
  }
  if (!in_flight_.empty()) {
    return unexpected(ErrorCode::kInternal, fmt::format("eval with {} decode steps in flight", in_flight_.size()));
  }
  const size_t n_total = seq.tokens.size() + tokens.size();
  if (n_total > static_cast<size_t>(n_ctx_)) {
    return unexpected(ErrorCode::kOutOfRange,
                      fmt::format("sequence would hold {} tokens ({} + {}) but the context has {}", n_total,
                                  seq.tokens.size(), tokens.size(), n_ctx_));
  }
  size_t done = 0;
  while (done < tokens.size()) {
    const int cap = step_tokens > 0 ? std::min(step_tokens, max_tokens_) : max_tokens_;
    const size_t n = std::min(tokens.size() - done, static_cast<size_t>(cap));
    const bool last = done + n == tokens.size();
    const size_t first_cell = seq.cells.size();
    const int first_pos = seq.n_past();
    MINFER_TRY(cells_.allocate(seq, static_cast<int>(n)));
    positions_.resize(n);
    for (size_t i = 0; i < n; ++i) positions_[i] = first_pos + static_cast<int32_t>(i);
    StepInput in;
    in.n_tokens = static_cast<int>(n);
    in.tokens = tokens.data() + done;
    in.positions = positions_.data();
    in.kv_cells = seq.cells.data() + first_cell;
    in.seq_cells = seq.cells.data();
    in.n_seq_cells = static_cast<int>(seq.cells.size());
    in.next_token = last ? -1 : tokens[done + n];
    // The step's context rows (score_from): all of them, no logits at all.
    in.score_from = static_cast<int>(std::clamp<int64_t>(score_from - static_cast<int64_t>(done), 0, static_cast<int64_t>(n)));
    const bool context_only = in.score_from == static_cast<int>(n);
    if (context_only) in.score_from = 0;
    const Logits wanted =
        !context_only && (last || logits == Logits::kAll || logits == Logits::kScore) ? logits : Logits::kNone;
    Status st = backend_.run(graph(wanted, last && argmax), in, out);
    if (!st) {
      cells_.truncate(seq, static_cast<int>(first_cell));  // the step did not happen
      return st;
    }
    seq.tokens.insert(seq.tokens.end(), tokens.begin() + static_cast<ptrdiff_t>(done),
                      tokens.begin() + static_cast<ptrdiff_t>(done + n));
    done += n;
    if (after_step) MINFER_TRY(after_step());
  }
  last_argmax_ = argmax && out->argmax.size() == 1 ? out->argmax[0] : -1;
  return ok_status();
}

Status Runner::submit_decode(Sequence& seq, std::optional<int32_t> token, bool argmax,
                             const kernels::DrawArgs* draw, bool logprobs) {
  if (argmax && draw != nullptr) {
    return unexpected(ErrorCode::kInvalidArgument, "a decode step that both takes the argmax and draws");
  }
  if (logprobs && !argmax && draw == nullptr) {
    return unexpected(ErrorCode::kInvalidArgument, "a decode step's log-probabilities without its pick");
  }
  if (!token && ((!argmax && draw == nullptr) || (in_flight_.empty() && last_argmax_ < 0))) {
    return unexpected(ErrorCode::kInvalidArgument, "a decode step fed from a step that picks no token");
  }
  const size_t cell = seq.cells.size();
  if (cell + 1 > static_cast<size_t>(n_ctx_)) {
    return unexpected(ErrorCode::kOutOfRange, fmt::format("sequence would hold {} tokens but the context has {}",
                                                          cell + 1, n_ctx_));
  }
  MINFER_TRY(cells_.allocate(seq, 1));
  positions_.assign(1, static_cast<int32_t>(cell));  // token i sits at position i
  const int32_t host_token = token.value_or(0);
  StepInput in;
  in.n_tokens = 1;
  in.tokens = &host_token;
  in.token_from_previous = !token.has_value();
  in.positions = positions_.data();
  in.kv_cells = seq.cells.data() + cell;
  in.seq_cells = seq.cells.data();
  in.n_seq_cells = static_cast<int>(seq.cells.size());
  in.draw = draw;
  if (Status st = backend_.submit(graph(Logits::kLast, argmax, draw != nullptr, logprobs), in); !st) {
    cells_.truncate(seq, static_cast<int>(cell));  // the step did not happen
    return st;
  }
  in_flight_.push_back(token);
  return ok_status();
}

Status Runner::collect_decode(Sequence& seq, StepOutput* out) {
  if (in_flight_.empty()) return unexpected(ErrorCode::kInternal, "collect with no decode step in flight");
  const std::optional<int32_t> token = in_flight_.front();
  in_flight_.pop_front();
  MINFER_TRY(backend_.collect(out));
  seq.tokens.push_back(token.value_or(last_argmax_));
  last_argmax_ = out->argmax.size() == 1 ? out->argmax[0] : -1;
  return ok_status();
}

Status Runner::fetch_logits(StepOutput* out) {
  if (!in_flight_.empty()) return unexpected(ErrorCode::kInternal, "logits fetched with a decode step in flight");
  return backend_.fetch_logits(out);
}

Status Runner::drain(Sequence& seq) {
  Status first = ok_status();
  StepOutput out;
  while (!in_flight_.empty()) {
    in_flight_.pop_front();
    Status st = backend_.collect(&out);
    if (!st && first) first = st;
  }
  cells_.truncate(seq, static_cast<int>(seq.tokens.size()));
  return first;
}

}  // namespace minfer
