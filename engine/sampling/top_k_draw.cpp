#include "engine/sampling/top_k_draw.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace minfer {

void top_k_candidates(const float* logits, int vocab_size, int k, Candidates* out) {
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  Candidates& c = *out;
  c.clear();
  for (int i = 0; i < k; ++i) c.push_back({logits[i], i});
  std::make_heap(c.begin(), c.end(), by_logit);  // the worst kept on top
  // A later token beats the worst kept only with a larger logit (on a tie
  // the lower id, kept already, wins): one float comparison a token.
  float worst = c.front().first;
  for (int i = k; i < vocab_size; ++i) {
    if (!(logits[i] > worst)) continue;
    std::pop_heap(c.begin(), c.end(), by_logit);
    c.back() = {logits[i], i};
    std::push_heap(c.begin(), c.end(), by_logit);
    worst = c.front().first;
  }
  std::sort(c.begin(), c.end(), by_logit);
}

int draw_candidate(const Candidates& c, float inv_temperature, float top_p, float min_p, float u,
                   std::vector<float>* terms) {
  const int n = static_cast<int>(c.size());
  const float l0 = c[0].first;
  if (!std::isfinite(l0)) return 0;  // every logit -inf (or the top +inf): take the top
  terms->resize(2 * static_cast<size_t>(n));
  float* e = terms->data();
  float* t = e + n;
  for (int i = 0; i < n; ++i) kernels::draw::terms(c[static_cast<size_t>(i)].first, l0, inv_temperature, &e[i], &t[i]);
  return kernels::draw::select(e, t, n, top_p, min_p, u);
}

Status check_draw(const kernels::DrawArgs* draw, int vocab_size, std::string_view backend) {
  auto bad = [&](std::string_view what) {
    return unexpected(ErrorCode::kInvalidArgument, fmt::format("{} backend: a sampling step's draw {}", backend, what));
  };
  if (draw == nullptr) return bad("is missing");
  const kernels::DrawArgs& d = *draw;
  if (d.top_k < 1 || d.top_k > kernels::kDrawMaxTopK || d.top_k >= vocab_size) {
    return bad(fmt::format("has top_k {}; allowed 1..{} and below the vocabulary size {}", d.top_k,
                           kernels::kDrawMaxTopK, vocab_size));
  }
  if (!(d.inv_temperature > 0.0f) || !std::isfinite(d.inv_temperature)) {
    return bad(fmt::format("has 1/temperature {}; allowed finite and above 0", d.inv_temperature));
  }
  if (!(d.top_p > 0.0f && d.top_p <= 1.0f)) return bad(fmt::format("has top_p {}; allowed (0, 1]", d.top_p));
  if (!(d.min_p >= 0.0f && d.min_p < 1.0f)) return bad(fmt::format("has min_p {}; allowed [0, 1)", d.min_p));
  if (!(d.u >= 0.0f && d.u < 1.0f)) return bad(fmt::format("has u {}; allowed [0, 1)", d.u));
  if (d.n_bias < 0 || d.n_bias > kernels::kDrawMaxBias) {
    return bad(fmt::format("has {} bias entries; allowed 0..{}", d.n_bias, kernels::kDrawMaxBias));
  }
  for (int b = 0; b < d.n_bias; ++b) {
    if (d.bias_token[b] < 0 || d.bias_token[b] >= vocab_size) {
      return bad(fmt::format("biases token {} (entry {}), outside the vocabulary [0, {})", d.bias_token[b], b,
                             vocab_size));
    }
    if (std::isnan(d.bias[b]) || d.bias[b] == INFINITY) {
      return bad(fmt::format("has bias {} for token {}; allowed finite or -inf", d.bias[b], d.bias_token[b]));
    }
  }
  if (!(d.repeat_penalty > 0.0f) || !std::isfinite(d.repeat_penalty)) {
    return bad(fmt::format("has repeat_penalty {}; allowed finite and above 0", d.repeat_penalty));
  }
  if (!std::isfinite(d.frequency_penalty) || !std::isfinite(d.presence_penalty)) {
    return bad(fmt::format("has frequency_penalty {} and presence_penalty {}; allowed finite", d.frequency_penalty,
                           d.presence_penalty));
  }
  if (d.n_recent < 0 || d.n_recent > kernels::kDrawMaxPenaltyLastN - 1) {
    return bad(fmt::format("has {} recent tokens; allowed 0..{}", d.n_recent, kernels::kDrawMaxPenaltyLastN - 1));
  }
  for (int i = 0; i < d.n_recent; ++i) {
    if (d.recent[i] < 0 || d.recent[i] >= vocab_size) {
      return bad(fmt::format("has recent token {} (entry {}), outside the vocabulary [0, {})", d.recent[i], i,
                             vocab_size));
    }
  }
  return ok_status();
}

void apply_penalties(float* logits, int vocab_size, std::span<const int32_t> window, float repeat, float frequency,
                     float presence) {
  if (!kernels::draw::penalties_on(repeat, frequency, presence)) return;
  // At most a window of tokens: counted by sorting a copy.
  std::vector<int32_t> ids(window.begin(), window.end());
  std::sort(ids.begin(), ids.end());
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j < ids.size() && ids[j] == ids[i]) ++j;
    if (ids[i] >= 0 && ids[i] < vocab_size) {
      float& l = logits[ids[i]];
      l = kernels::draw::penalize(l, static_cast<int>(j - i), repeat, frequency, presence);
    }
    i = j;
  }
}

int32_t draw_in_step(float* logits, int vocab_size, const kernels::DrawArgs& args, int32_t step_token,
                     Candidates* scratch, std::vector<float>* terms) {
  for (int b = 0; b < args.n_bias; ++b) logits[args.bias_token[b]] += args.bias[b];
  if (kernels::draw::penalties_on(args.repeat_penalty, args.frequency_penalty, args.presence_penalty)) {
    int32_t window[kernels::kDrawMaxPenaltyLastN];
    std::copy(args.recent, args.recent + args.n_recent, window);
    size_t n = static_cast<size_t>(args.n_recent);
    if (args.penalize_step_token != 0) window[n++] = step_token;
    apply_penalties(logits, vocab_size, std::span<const int32_t>(window, n), args.repeat_penalty,
                    args.frequency_penalty, args.presence_penalty);
  }
  top_k_candidates(logits, vocab_size, args.top_k, scratch);
  const int i = draw_candidate(*scratch, args.inv_temperature, args.top_p, args.min_p, args.u, terms);
  return (*scratch)[static_cast<size_t>(i)].second;
}

}  // namespace minfer
