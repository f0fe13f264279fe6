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
  return ok_status();
}

int32_t draw_in_step(float* logits, int vocab_size, const kernels::DrawArgs& args, Candidates* scratch,
                     std::vector<float>* terms) {
  for (int b = 0; b < args.n_bias; ++b) logits[args.bias_token[b]] += args.bias[b];
  top_k_candidates(logits, vocab_size, args.top_k, scratch);
  const int i = draw_candidate(*scratch, args.inv_temperature, args.top_p, args.min_p, args.u, terms);
  return (*scratch)[static_cast<size_t>(i)].second;
}

}  // namespace minfer
