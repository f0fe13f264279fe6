#include "engine/sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace minfer {

StepLogprobs step_logprobs(std::span<const float> logits, int32_t chosen, int n) {
  StepLogprobs out;
  if (logits.empty()) return out;
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (const float l : logits) sum += std::exp(static_cast<double>(l) - max);
  const double log_z = static_cast<double>(max) + std::log(sum);
  auto logprob = [&](int32_t t) { return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(t)]) - log_z); };
  out.chosen = logprob(chosen);
  n = std::clamp(n, 0, static_cast<int>(logits.size()));
  if (n == 0) return out;
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), better);
  out.top.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out.top.emplace_back(ids[static_cast<size_t>(i)], logprob(ids[static_cast<size_t>(i)]));
  return out;
}

}  // namespace minfer
