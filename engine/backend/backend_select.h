// The weight gate (ARCHITECTURE.md rule 2): decides once, at load, which
// backend runs the whole model, and records why.
#pragma once

#include <memory>
#include <string>

#include "engine/api.h"
#include "engine/backend/backend.h"

namespace minfer {

struct BackendSelection {
  std::unique_ptr<Backend> backend;
  std::string reason;  // e.g. "cuda: NVIDIA H200, all weight types supported" or why the CPU runs it
};

// kCuda makes a failed gate an error; kAuto falls back to the CPU with a
// warning naming the reason; kCpu always picks the CPU.
std::unique_ptr<Backend> make_cpu_backend();

Expected<BackendSelection> select_backend(BackendChoice choice, const ModelConfig& config, const ModelWeights& weights);

}  // namespace minfer
