// Helpers for the engine tests: paths to the shipped models and synthetic
// models written once per test binary into a temporary directory.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <string_view>

#include "engine/api.h"
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

// The calls of the op named `name` ("logprobs") the engine's profile counted
// (Engine::set_profiling).
inline int64_t op_calls(const Engine& e, std::string_view name) {
  for (const auto& [op, ms, calls] : e.profile()) {
    if (op == name) return calls;
  }
  return 0;
}

}  // namespace minfer::test
