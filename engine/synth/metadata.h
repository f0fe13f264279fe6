// The general.* and <arch>.* GGUF keys of a synthetic model, as llama.cpp's
// convert_hf_to_gguf.py writes them for that architecture.
#pragma once

#include "engine/gguf/gguf.h"
#include "engine/synth/synth.h"

namespace minfer::synth {

Status write_model_metadata(const ModelPlan& plan, uint64_t seed, gguf::Writer& w);

// The Llama 3 RoPE factors (rope_freqs.weight, head_dim / 2 values), as the
// converter computes them (LlamaModel.generate_extra_tensors).
std::vector<float> llama3_rope_factors(const Preset& p);

}  // namespace minfer::synth
