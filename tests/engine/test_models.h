// Helpers for the engine tests: paths to the shipped models and synthetic
// models written once per test binary into a temporary directory.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "engine/synth/synth.h"

namespace minfer::test {

inline std::string data_path(const std::string& rel) { return std::string(MINFER_TEST_DATA_DIR) + "/" + rel; }
inline std::string stories_path() { return data_path("models/stories260K.gguf"); }

// Writes (once per process) a small synthetic model: `preset` with `layers`
// layers and a `vocab`-piece synthetic vocabulary, weights of `type`.
// Returns its path; fails the calling test on error.
std::string synth_model(const std::string& preset, const std::string& type, int layers, int vocab, uint64_t seed = 7);

// ln Σ exp(row[i]) over a logits row, in double from the largest down: the
// log-probability tests' reference normalizer (log p(t) = row[t] - it).
inline double log_sum_exp(const float* row, int n) {
  const double max = *std::max_element(row, row + n);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::exp(row[i] - max);
  return max + std::log(sum);
}

}  // namespace minfer::test
