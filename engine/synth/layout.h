// The tensors of a llama / qwen2 / qwen3 model: names as llama.cpp writes
// them (src/llama-arch.cpp LLM_TENSOR_NAMES), shapes in GGUF order, in the
// order llama.cpp's converter emits them. Types are chosen later (recipe.h).
#pragma once

#include <vector>

#include "engine/synth/synth.h"

namespace minfer::synth {

// The preset must already be checked (check_preset).
std::vector<PlannedTensor> model_layout(const Preset& p);

// Rejects presets whose shapes cannot form a model (after overrides).
Status check_preset(const Preset& p);

}  // namespace minfer::synth
