// Tensor types for a synthetic model: one DType for every matrix, or
// llama.cpp's Q4_K_M mix. Norms, biases and RoPE factors always stay F32
// (llama-quantize quantizes only 2-D tensors whose names end in "weight"
// and are not norms).
#pragma once

#include <string_view>
#include <vector>

#include "engine/synth/synth.h"

namespace minfer::synth {

struct TypeSpec {
  enum class Kind { kUniform, kQ4KM };
  Kind kind = Kind::kUniform;
  DType uniform = DType::kF16;  // kUniform only
};

// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k",
// "q5_k", "q6_k" or "q4_k_m" (any case). The error lists them.
Expected<TypeSpec> parse_type_spec(std::string_view name);

// general.file_type: llama.cpp's LLAMA_FTYPE (include/llama.h).
uint32_t llama_file_type(const TypeSpec& spec);

// Sets the type of every tensor of `tensors` (a model_layout of n_layers
// blocks). A uniform type whose block does not divide a matrix's row width
// is an error naming the tensor; Q4_K_M falls back as llama.cpp does.
Status assign_types(const TypeSpec& spec, int n_layers, std::vector<PlannedTensor>& tensors);

}  // namespace minfer::synth
