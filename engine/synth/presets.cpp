// The presets: hyper-parameters copied from each model's config.json on
// Hugging Face (Qwen/Qwen2.5-*-Instruct, Qwen/Qwen3-*, meta-llama/Llama-3.2-1B).
// head_dim where config.json has none is hidden_size / num_attention_heads.
// Context lengths are max_position_embeddings (the Instruct configs for Qwen2.5).
#include <array>

#include "engine/synth/synth.h"

namespace minfer::synth {
namespace {

const std::array<Preset, 6>& presets() {
  static const std::array<Preset, 6> kPresets = {{
      {.name = "qwen2.5-0.5b", .arch = "qwen2", .n_layers = 24, .d_model = 896, .n_heads = 14, .n_kv_heads = 2,
       .head_dim = 64, .d_ff = 4864, .vocab_size = 151936, .n_ctx = 32768, .rope_base = 1e6f, .rms_eps = 1e-6f,
       .tied_output = true, .qkv_bias = true},
      {.name = "qwen2.5-1.5b", .arch = "qwen2", .n_layers = 28, .d_model = 1536, .n_heads = 12, .n_kv_heads = 2,
       .head_dim = 128, .d_ff = 8960, .vocab_size = 151936, .n_ctx = 32768, .rope_base = 1e6f, .rms_eps = 1e-6f,
       .tied_output = true, .qkv_bias = true},
      {.name = "qwen2.5-7b", .arch = "qwen2", .n_layers = 28, .d_model = 3584, .n_heads = 28, .n_kv_heads = 4,
       .head_dim = 128, .d_ff = 18944, .vocab_size = 152064, .n_ctx = 32768, .rope_base = 1e6f, .rms_eps = 1e-6f,
       .tied_output = false, .qkv_bias = true},
      // Qwen3's head_dim is its own config key (128), not d_model / n_heads (64 for 0.6B).
      {.name = "qwen3-0.6b", .arch = "qwen3", .n_layers = 28, .d_model = 1024, .n_heads = 16, .n_kv_heads = 8,
       .head_dim = 128, .d_ff = 3072, .vocab_size = 151936, .n_ctx = 40960, .rope_base = 1e6f, .rms_eps = 1e-6f,
       .tied_output = true, .qk_norm = true, .head_dim_in_config = true},
      {.name = "qwen3-4b", .arch = "qwen3", .n_layers = 36, .d_model = 2560, .n_heads = 32, .n_kv_heads = 8,
       .head_dim = 128, .d_ff = 9728, .vocab_size = 151936, .n_ctx = 40960, .rope_base = 1e6f, .rms_eps = 1e-6f,
       .tied_output = true, .qk_norm = true, .head_dim_in_config = true},
      // rope_scaling: {factor 32, low_freq_factor 1, high_freq_factor 4,
      // original_max_position_embeddings 8192, rope_type "llama3"}.
      {.name = "llama-3.2-1b", .arch = "llama", .n_layers = 16, .d_model = 2048, .n_heads = 32, .n_kv_heads = 8,
       .head_dim = 64, .d_ff = 8192, .vocab_size = 128256, .n_ctx = 131072, .rope_base = 500000.0f, .rms_eps = 1e-5f,
       .tied_output = true, .head_dim_in_config = true, .llama3_rope_factor = 32.0f, .llama3_low_freq_factor = 1.0f,
       .llama3_high_freq_factor = 4.0f, .llama3_original_ctx = 8192},
  }};
  return kPresets;
}

}  // namespace

std::optional<Preset> find_preset(std::string_view name) {
  for (const Preset& p : presets()) {
    if (p.name == name) return p;
  }
  return std::nullopt;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : presets()) names.push_back(p.name);
  return names;
}

}  // namespace minfer::synth
