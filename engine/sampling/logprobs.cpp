#include "engine/sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace minfer {

kernels::LogprobsOut step_logprobs_raw(std::span<const float> logits, int32_t chosen, int n_top) {
  kernels::LogprobsOut raw;
  raw.chosen = chosen;
  if (logits.empty()) return raw;
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (const float l : logits) sum += std::exp(static_cast<double>(l) - max);
  raw.log_z = static_cast<double>(max) + std::log(sum);
  raw.chosen_logit = chosen >= 0 && static_cast<size_t>(chosen) < logits.size() ? logits[static_cast<size_t>(chosen)]
                                                                                 : std::numeric_limits<float>::quiet_NaN();
  raw.n_top = static_cast<int32_t>(std::min(logits.size(), static_cast<size_t>(std::clamp(n_top, 0, kernels::kLogprobsTop))));
  if (raw.n_top == 0) return raw;
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + raw.n_top, ids.end(), better);
  for (int i = 0; i < raw.n_top; ++i) {
    raw.top[i] = ids[static_cast<size_t>(i)];
    raw.top_logit[i] = logits[static_cast<size_t>(raw.top[i])];
  }
  return raw;
}

StepLogprobs step_logprobs(const kernels::LogprobsOut& raw, int n) {
  StepLogprobs out;
  out.chosen = kernels::logprob_of(raw.chosen_logit, raw.log_z);
  n = std::clamp(n, 0, static_cast<int>(raw.n_top));
  out.top.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out.top.emplace_back(raw.top[i], kernels::logprob_of(raw.top_logit[i], raw.log_z));
  return out;
}

StepLogprobs step_logprobs(std::span<const float> logits, int32_t chosen, int n) {
  if (logits.empty()) return {};
  return step_logprobs(step_logprobs_raw(logits, chosen, n), n);
}

}  // namespace minfer
