#include "engine/sampling/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace minfer {

bool SamplingParams::plain_greedy() const { return greedy() && logit_bias.empty() && !penalties(); }

bool SamplingParams::penalties() const {
  return kernels::draw::penalties_on(repeat_penalty, frequency_penalty, presence_penalty) && penalty_last_n > 0;
}

bool SamplingParams::drawn_in_step(int vocab_size) const {
  return !greedy() && top_k >= 1 && top_k <= kernels::kDrawMaxTopK && top_k < vocab_size &&
         (!penalties() || penalty_last_n <= kernels::kDrawMaxPenaltyLastN) &&
         logit_bias.size() <= static_cast<size_t>(kernels::kDrawMaxBias);
}

Status SamplingParams::validate(int vocab_size) const {
  auto bad = [](const char* name, double v, const char* range) {
    return unexpected(ErrorCode::kInvalidArgument, fmt::format("{} is {}; allowed {}", name, v, range));
  };
  if (!(temperature >= 0.0f) || temperature > 100.0f) return bad("temperature", temperature, "[0, 100]");
  if (top_k < 0) return bad("top_k", top_k, ">= 0");
  if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p", top_p, "(0, 1]");
  if (!(min_p >= 0.0f && min_p < 1.0f)) return bad("min_p", min_p, "[0, 1)");
  if (!(repeat_penalty > 0.0f) || repeat_penalty > 10.0f) return bad("repeat_penalty", repeat_penalty, "(0, 10]");
  if (penalty_last_n < 0) return bad("penalty_last_n", penalty_last_n, ">= 0");
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) return bad("presence_penalty", presence_penalty, "[-2, 2]");
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return bad("frequency_penalty", frequency_penalty, "[-2, 2]");
  }
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size) {
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("logit_bias token {} is outside the vocabulary [0, {})", id, vocab_size));
    }
    if (!std::isfinite(bias) && !(std::isinf(bias) && bias < 0)) {
      return unexpected(ErrorCode::kInvalidArgument, fmt::format("logit_bias for token {} is {}", id, bias));
    }
  }
  return ok_status();
}

Sampler::Sampler(const SamplingParams& params, int vocab_size)
    : params_(params), vocab_size_(vocab_size), rng_(params.seed) {}

double Sampler::uniform() {
  // 53 random bits → [0, 1): the same on every platform, unlike
  // std::uniform_real_distribution.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

float Sampler::uniform24() {
  // 24 random bits → [0, 1), exact in a float: the top-k draw's, on either side.
  return static_cast<float>(rng_() >> 40) * 0x1.0p-24f;
}

kernels::DrawArgs Sampler::step_draw(std::span<const int32_t> before, std::span<const int32_t> then) {
  kernels::DrawArgs a;
  a.top_k = params_.top_k;
  a.inv_temperature = 1.0f / params_.temperature;
  a.top_p = params_.top_p;
  a.min_p = params_.min_p;
  a.u = uniform24();
  a.n_bias = static_cast<int32_t>(std::min(params_.logit_bias.size(), static_cast<size_t>(kernels::kDrawMaxBias)));
  for (int b = 0; b < a.n_bias; ++b) {
    a.bias_token[b] = params_.logit_bias[static_cast<size_t>(b)].first;
    a.bias[b] = params_.logit_bias[static_cast<size_t>(b)].second;
  }
  if (params_.penalties()) {
    a.repeat_penalty = params_.repeat_penalty;
    a.frequency_penalty = params_.frequency_penalty;
    a.presence_penalty = params_.presence_penalty;
    a.penalize_step_token = 1;
    // The window's other tokens: the last of `before` followed by `then`.
    const size_t want = std::min(static_cast<size_t>(params_.penalty_last_n), static_cast<size_t>(kernels::kDrawMaxPenaltyLastN)) - 1;
    const size_t from_then = std::min(want, then.size());
    const size_t from_before = std::min(want - from_then, before.size());
    int32_t* out = a.recent;
    out = std::copy(before.end() - static_cast<ptrdiff_t>(from_before), before.end(), out);
    std::copy(then.end() - static_cast<ptrdiff_t>(from_then), then.end(), out);
    a.n_recent = static_cast<int32_t>(from_before + from_then);
  }
  return a;
}

void Sampler::apply_penalties(float* logits, const std::vector<int32_t>& history) const {
  if (!params_.penalties()) return;
  const size_t n = std::min(history.size(), static_cast<size_t>(params_.penalty_last_n));
  minfer::apply_penalties(logits, vocab_size_, std::span<const int32_t>(history).last(n), params_.repeat_penalty,
                          params_.frequency_penalty, params_.presence_penalty);
}

bool Sampler::constrain(float* logits, const std::function<bool(int32_t)>& allowed, size_t need) {
  const size_t vocab = static_cast<size_t>(vocab_size_);
  const float inf = std::numeric_limits<float>::infinity();
  // Keeps `ids` (need of them, allowed) and sets every other logit to -inf.
  auto keep_only = [&](const std::vector<int32_t>& ids) {
    std::vector<float> kept_logits;
    for (const int32_t id : ids) kept_logits.push_back(logits[id]);
    std::fill(logits, logits + vocab, -inf);
    for (size_t i = 0; i < ids.size(); ++i) logits[ids[i]] = kept_logits[i];
  };
  if (need < vocab) {
    // Most often the best few tokens hold what is needed: look at the best
    // 4 × need first (one pass, top_k_candidates).
    const size_t first = std::min(vocab - 1, 4 * need);
    top_k_candidates(logits, vocab_size_, static_cast<int>(first), &candidates_);
    std::vector<int32_t> ids;
    for (const auto& [logit, id] : candidates_) {
      if (ids.size() == need) break;
      if (allowed(id)) ids.push_back(id);
    }
    if (ids.size() == need) {
      keep_only(ids);
      return true;
    }
    // Otherwise the `need` best tokens it allows in one pass over the
    // vocabulary: a token is asked only when it would enter the best allowed
    // so far (a larger logit than the worst kept; on a tie the kept one's
    // lower id wins) — a few thousand asks where the constraint allows one
    // token in 300. The same tokens as asking the whole vocabulary best
    // first, as a heap over it did before (sampler_bench
    // BM_ConstrainedGreedy, 2-core machine: one token in 300 allowed, 1,993
    // us with the heap, 271 with this pass; one in two, where the best 4
    // suffice, 180-203 either way).
    auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
    candidates_.clear();
    bool full = false;
    float worst = 0.0f;  // the worst kept logit, once `need` are kept
    for (size_t i = 0; i < vocab; ++i) {
      const float l = logits[i];
      if (full ? !(l > worst) : std::isnan(l)) continue;
      if (!allowed(static_cast<int32_t>(i))) continue;
      if (full) {
        std::pop_heap(candidates_.begin(), candidates_.end(), by_logit);  // the worst kept is on top
        candidates_.back() = {l, static_cast<int32_t>(i)};
      } else {
        candidates_.push_back({l, static_cast<int32_t>(i)});
      }
      std::push_heap(candidates_.begin(), candidates_.end(), by_logit);
      full = candidates_.size() == need;
      if (full) worst = candidates_.front().first;
    }
    ids.clear();
    for (const auto& [logit, id] : candidates_) ids.push_back(id);
    keep_only(ids);
    return !ids.empty();
  }
  std::vector<char> keep(vocab, 0);
  size_t kept = 0;
  for (size_t i = 0; i < vocab; ++i) kept += keep[i] = allowed(static_cast<int32_t>(i)) ? 1 : 0;
  for (size_t i = 0; i < vocab; ++i) {
    if (!keep[i]) logits[i] = -inf;
  }
  return kept > 0;
}

int32_t Sampler::sample(float* logits, const std::vector<int32_t>& history, const std::function<bool(int32_t)>& allowed) {
  const SamplingParams& p = params_;
  for (const auto& [id, bias] : p.logit_bias) logits[id] += bias;
  apply_penalties(logits, history);
  if (allowed) {
    const size_t vocab = static_cast<size_t>(vocab_size_);
    const size_t need = p.greedy() ? 1 : (p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab ? p.top_k : vocab);
    if (!constrain(logits, allowed, need)) return -1;
  }

  if (p.greedy()) {
    return static_cast<int32_t>(std::max_element(logits, logits + vocab_size_) - logits);
  }

  const size_t vocab = static_cast<size_t>(vocab_size_);
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab) {
    // The top-k chain a step can also run on the device (top_k_draw.h).
    const float u = uniform24();
    top_k_candidates(logits, vocab_size_, p.top_k, &candidates_);
    const int i = draw_candidate(candidates_, 1.0f / p.temperature, p.top_p, p.min_p, u, &terms_);
    return candidates_[static_cast<size_t>(i)].second;
  }

  // Without top-k: candidates sorted by logit, descending (the lower id
  // first on ties), as far as the filters need. A prefix is sorted, growing
  // until top-p's mass is covered: a full sort of a 150k vocabulary per token
  // costs milliseconds.
  const double u = uniform();
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t n = vocab;
  candidates_.resize(vocab);
  for (int i = 0; i < vocab_size_; ++i) candidates_[static_cast<size_t>(i)] = {logits[i], i};
  size_t sorted = std::min<size_t>(n, 256);
  std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(sorted), candidates_.end(), by_logit);
  // Candidates [from, to) in order, given [0, from) are: to the end, a sort
  // (the same order: ids make it total), far faster than a partial sort's
  // heap over 150k.
  auto order = [&](size_t from, size_t to) {
    const auto first = candidates_.begin() + static_cast<ptrdiff_t>(from);
    if (to == candidates_.size()) {
      std::sort(first, candidates_.end(), by_logit);
    } else {
      std::partial_sort(first, candidates_.begin() + static_cast<ptrdiff_t>(to), candidates_.end(), by_logit);
    }
  };
  const float max_logit = candidates_[0].first;
  if (!std::isfinite(max_logit)) return candidates_[0].second;  // every logit -inf but one, or all: take the top

  if (p.top_p < 1.0f) {
    // The mass of every token.
    double total = 0.0;
    for (size_t i = 0; i < n; ++i) total += std::exp(static_cast<double>(candidates_[i].first) - max_logit);
    for (;;) {
      double cum = 0.0;
      size_t keep = sorted;
      for (size_t i = 0; i < sorted; ++i) {
        cum += std::exp(static_cast<double>(candidates_[i].first) - max_logit) / total;
        if (cum >= p.top_p) {
          keep = i + 1;
          break;
        }
      }
      if (keep < sorted || sorted == n) {
        n = std::min(n, keep);
        break;
      }
      const size_t grow = std::min(n, sorted * 8);
      order(sorted, grow);
      sorted = grow;
    }
  }
  // Now [0, sorted) is in order; so is everything up to n after a top-p,
  // and without it the rest stays as it lies (the draw below
  // needs no order: sorting 150k candidates took 10 ms a token).
  if (p.min_p > 0.0f) {
    // Keep tokens whose probability is at least min_p times the top one's.
    const float cutoff = max_logit + std::log(p.min_p);
    size_t keep = 1;
    while (keep < std::min(n, sorted) && candidates_[keep].first >= cutoff) ++keep;
    if (keep == sorted && n > sorted) {
      const auto rest = std::partition(candidates_.begin() + static_cast<ptrdiff_t>(sorted),
                                       candidates_.begin() + static_cast<ptrdiff_t>(n),
                                       [cutoff](const auto& c) { return c.first >= cutoff; });
      keep = static_cast<size_t>(rest - candidates_.begin());
    }
    n = keep;
  }
  // Temperature, then draw from the softmax of what is left.
  double total = 0.0;
  std::vector<double> weights(n);
  for (size_t i = 0; i < n; ++i) {
    weights[i] = std::exp((static_cast<double>(candidates_[i].first) - max_logit) / p.temperature);
    total += weights[i];
  }
  double r = u * total;
  for (size_t i = 0; i < n; ++i) {
    r -= weights[i];
    if (r < 0.0) return candidates_[i].second;
  }
  return candidates_[n - 1].second;
}

}  // namespace minfer
