#include "engine/scheduler/host_pick.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

#include "engine/sampling/logprobs.h"

namespace minfer {

std::vector<std::string> token_texts(const Tokenizer& tokenizer) {
  std::vector<std::string> text(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) text[static_cast<size_t>(id)] = tokenizer.token_bytes(id, false);
  return text;
}

namespace {

TokenLogprobs describe(const Tokenizer& tokenizer, const StepLogprobs& lp, int32_t chosen) {
  TokenLogprobs out{TokenLogprob{chosen, lp.chosen, tokenizer.token_bytes(chosen, true)}, {}};
  for (const auto& [id, logprob] : lp.top) out.top.push_back(TokenLogprob{id, logprob, tokenizer.token_bytes(id, true)});
  return out;
}

}  // namespace

TokenLogprobs describe_logprobs(const Tokenizer& tokenizer, std::span<const float> logits, int32_t chosen, int top_n) {
  return describe(tokenizer, step_logprobs(logits, chosen, top_n), chosen);
}

TokenLogprobs describe_logprobs(const Tokenizer& tokenizer, const kernels::LogprobsOut& raw, int top_n) {
  return describe(tokenizer, step_logprobs(raw, top_n), raw.chosen);
}

HostPick::HostPick(const GenerationRequest& request, const Tokenizer& tokenizer,
                   const std::vector<std::string>& token_text, int vocab_size)
    : request_(request),
      tokenizer_(tokenizer),
      token_text_(token_text),
      vocab_size_(vocab_size),
      sampler_(request.sampling, vocab_size) {
  if (request.json_schema) {
    constraint_ = json_value_constraint(request.json_schema);
  } else if (request.json_object) {
    constraint_ = json_value_constraint(JsonSchema::any_object());
  } else if (request.tool_call_schema) {
    constraint_ = tool_call_constraint(
        request.tool_call_schema, request.tool_call_style == ToolStyle::kLlama3 ? CallShape::kWholeReply : CallShape::kBlocks);
  }
}

int32_t HostPick::pick(float* logits, const std::vector<int32_t>& history) {
  const bool want_logprobs = request_.top_logprobs >= 0;
  // The sampler changes the logits; log-probabilities are of the raw ones.
  if (want_logprobs) raw_logits_.assign(logits, logits + vocab_size_);
  int32_t t = -1;
  if (constraint_ && !constraint_->unconstrained()) {
    t = sampler_.sample(logits, history, [this](int32_t id) { return allows(id); });
    if (t < 0) return t;
  } else {
    t = sampler_.sample(logits, history);
  }
  if (constraint_) constraint_->advance(token_text_[static_cast<size_t>(t)]);
  if (want_logprobs) logprobs_ = describe_logprobs(tokenizer_, raw_logits_, t, request_.top_logprobs);
  return t;
}

bool HostPick::allows(int32_t id) const {
  const std::string& bytes = token_text_[static_cast<size_t>(id)];
  return bytes.empty() ? constraint_->accepts_end() : constraint_->accepts(bytes);
}

bool HostPick::take(int32_t token) {
  if (constraint_ && !constraint_->unconstrained() && !allows(token)) return false;
  if (constraint_) constraint_->advance(token_text_[static_cast<size_t>(token)]);
  return true;
}

int32_t HostPick::pick_listed(const kernels::LogprobsOut& step) {
  // log Σ exp is finite only when no logit is NaN or +inf.
  if (!std::isfinite(step.log_z)) return kNotListed;
  const bool constrained = constraint_ && !constraint_->unconstrained();
  for (int i = 0; i < step.n_top; ++i) {
    const int32_t id = step.top[i];
    if (constrained && !allows(id)) continue;
    // Among -inf logits the host takes the lowest id of the vocabulary.
    if (!std::isfinite(step.top_logit[i])) return kNotListed;
    if (constraint_) constraint_->advance(token_text_[static_cast<size_t>(id)]);
    if (request_.top_logprobs >= 0) {
      kernels::LogprobsOut mine = step;
      mine.chosen = id;
      mine.chosen_logit = step.top_logit[i];
      took_step_logprobs(mine);
    }
    return id;
  }
  return step.n_top >= vocab_size_ ? -1 : kNotListed;
}

PromptScorer::PromptScorer(const GenerationRequest& request, const Tokenizer& tokenizer, int vocab_size,
                           std::vector<TokenLogprobs>* out, bool context_skipped)
    : request_(request), tokenizer_(tokenizer), vocab_size_(vocab_size), out_(out) {
  // The first token has no context; those before prompt_logprobs_from are
  // context only.
  const size_t unscored = std::max<size_t>(1, static_cast<size_t>(std::max(0, request.prompt_logprobs_from)));
  for (size_t i = 0; i < unscored; ++i) {
    const int32_t t = request.prompt.at(i);
    out_->push_back(TokenLogprobs{TokenLogprob{t, std::numeric_limits<float>::quiet_NaN(), tokenizer.token_bytes(t, true)}, {}});
  }
  context_ = unscored - 1;
  next_row_ = context_skipped ? context_ : 0;
}

std::pair<size_t, size_t> PromptScorer::scored_of_next(size_t n) const {
  // The prompt's last row predicts the first generated token, not a prompt one.
  const size_t end = std::min(next_row_ + n, request_.prompt.size() - 1);
  const size_t begin = std::max(next_row_, context_);
  return begin < end ? std::pair{begin - next_row_, end - next_row_} : std::pair{size_t{0}, size_t{0}};
}

void PromptScorer::add_rows(std::span<const float> logits) {
  const size_t vocab = static_cast<size_t>(vocab_size_);
  const size_t n = logits.size() / vocab;
  const std::pair<size_t, size_t> range = scored_of_next(n);  // not a structured binding: the lambda captures it
  const size_t first = range.first, last = range.second;
  // A row's log-softmax is ~1 ms on a Qwen-sized vocabulary (one core of
  // the 2-core machine, sampler_bench's BM_Logprobs5): the rows are shared
  // out over the cores, at least 8 a thread, then described in order.
  const size_t rows = last - first;
  std::vector<StepLogprobs> lp(rows);
  auto score = [&](size_t from, size_t to) {
    for (size_t j = from; j < to; ++j) {
      lp[j] = step_logprobs(logits.subspan((first + j) * vocab, vocab), request_.prompt[next_row_ + first + j + 1],
                            request_.top_logprobs);
    }
  };
  const size_t threads = std::clamp<size_t>(std::min<size_t>(std::thread::hardware_concurrency(), rows / 8), 1, 16);
  {
    std::vector<std::jthread> pool;
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(score, rows * t / threads, rows * (t + 1) / threads);
    score(0, rows / threads);
  }
  for (size_t j = 0; j < rows; ++j) out_->push_back(describe(tokenizer_, lp[j], request_.prompt[next_row_ + first + j + 1]));
  next_row_ += n;
}

Status PromptScorer::add_scored_rows(std::span<const kernels::LogprobsOut> rows) {
  const auto [first, last] = scored_of_next(rows.size());
  for (size_t j = first; j < last; ++j) {
    const int32_t next = request_.prompt[next_row_ + j + 1];
    if (rows[j].chosen != next) {
      return unexpected(ErrorCode::kInternal, fmt::format("prompt row {} was scored against token {}, not the prompt's {}",
                                                          next_row_ + j, rows[j].chosen, next));
    }
    out_->push_back(describe(tokenizer_, step_logprobs(rows[j], request_.top_logprobs), next));
  }
  next_row_ += rows.size();
  return ok_status();
}

}  // namespace minfer
