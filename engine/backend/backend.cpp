#include "engine/backend/backend.h"

#include <fmt/format.h>

namespace minfer {

Status Backend::submit(const Graph& graph, const StepInput& input) {
  if (in_flight() >= max_in_flight()) {
    return unexpected(ErrorCode::kInternal, fmt::format("{} backend: a step submitted with {} in flight (at most {})",
                                                        name(), in_flight(), max_in_flight()));
  }
  StepInput in = input;
  int32_t token = 0;
  if (input.token_from_previous) {
    if (input.n_tokens != 1 || last_argmax_ < 0) {
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("{} backend: a step of {} tokens fed from the previous step's argmax (which {})",
                                    name(), input.n_tokens, last_argmax_ < 0 ? "gave none" : "gave one"));
    }
    token = last_argmax_;
    in.tokens = &token;
    in.token_from_previous = false;
  }
  StepOutput out;
  Status st = run(graph, in, &out);
  last_argmax_ = st && out.argmax.size() == 1 ? out.argmax[0] : -1;
  // A failed step is reported by the collect() that reaches it, in order.
  queued_.emplace_back(std::move(st), std::move(out));
  return ok_status();
}

Status Backend::collect(StepOutput* output) {
  if (queued_.empty()) return unexpected(ErrorCode::kInternal, fmt::format("{} backend: collect() with no step in flight", name()));
  auto [st, out] = std::move(queued_.front());
  queued_.pop_front();
  if (!st) return st;
  *output = std::move(out);
  return ok_status();
}

Status check_score_from(const Graph& graph, const StepInput& in, std::string_view backend) {
  if (in.score_from == 0) return ok_status();
  if (!graph.scores_rows() || in.score_from < 0 || in.score_from >= in.n_tokens) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("{} backend: score_from {} in a {}step of {} tokens (allowed 0{})", backend,
                                  in.score_from, graph.scores_rows() ? "scoring " : "", in.n_tokens,
                                  graph.scores_rows() ? fmt::format("..{}", in.n_tokens - 1) : std::string()));
  }
  return ok_status();
}

Status Backend::fetch_logits(StepOutput*) {
  return unexpected(ErrorCode::kUnsupported, fmt::format("{} backend: no logits to fetch after a step", name()));
}

}  // namespace minfer
