// Helpers for the engine tests: paths to the shipped models and synthetic
// models written once per test binary into a temporary directory.
#pragma once

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

}  // namespace minfer::test
